package tcp

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// Progress driven by the caller. A frame that arrives on a shared-memory
// ring is normally read by the connection's reader goroutine, which then
// hands it to the goroutine waiting for it: on a host where each process
// has one processor, that hand-off (the reader yields, the waiter runs,
// the waiter parks, the reader runs) costs more than the rest of the
// message. A caller that is about to wait for a frame may instead poll
// the rings itself (PollUntil): it reads and delivers, on its own
// goroutine, the frames it finds whole, so the reply it waits for needs
// no hand-off at all.
//
// The two share a connection by its read lock (conn.rd), taken between
// frames: the reader goroutine waits for bytes without it (shmConn.await)
// and a caller only tries it. Frames of one connection are therefore
// delivered one at a time and in order, by whichever holds the lock. A
// caller takes only a frame smaller than wire.PlaceMin that the ring
// holds whole; a larger one (placed into its receiver's buffer as it
// streams in), a torn one, and the ends of the stream are left to the
// reader goroutine, which the caller wakes for them.
//
// While callers poll, a reader goroutine that finds nothing to read parks
// without raising its ring's flag, so the peer does not ring a doorbell
// (a system call on its side, a wake-up on ours) for every frame that a
// caller will read anyway; it looks again every millisecond and raises
// its flag once no caller polls (shmConn.await), and a caller that polled
// in vain wakes it before it goes to wait for the reader's delivery.

// progressYield is how often a polling caller yields to the process's
// other goroutines (and every 16th time to the system's threads): a
// yield costs about as much as a message, so not at every look.
const progressYield = 4 * time.Microsecond

// progressBatch bounds the frames one look of a caller delivers from one
// connection; the reader goroutine is woken for the rest.
const progressBatch = 64

// addRing lists c, whose reader goroutine has started, for the callers'
// progress; removeRing takes it off once the reader is done.
func (t *Transport) addRing(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next []*conn
	if cur := t.rings.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, c)
	t.rings.Store(&next)
}

func (t *Transport) removeRing(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.rings.Load()
	if cur == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*cur), func(o *conn) bool { return o == c })
	t.rings.Store(&next)
}

// PollUntil polls this transport's shared-memory connections on the
// calling goroutine, delivering the frames it finds to the handler as the
// reader goroutines would, until done is set (by the handler, or by
// anyone) or d has passed, and reports whether done was set. It yields to
// the process's goroutines every progressYield. The handler must not call
// PollUntil itself (a frame is delivered under its connection's read
// lock). Without shared-memory connections, or with d <= 0, it only
// reports done.
func (t *Transport) PollUntil(done *atomic.Bool, d time.Duration) bool {
	if done.Load() {
		return true
	}
	rings := t.rings.Load()
	if d <= 0 || rings == nil || len(*rings) == 0 {
		return false
	}
	t.pollers.Add(1)
	// The clock is first read at the 64th look, so that a frame at hand
	// (a reply that came while the caller sent) costs no clock read: the
	// poll lasts d plus those first looks.
	var start, lastYield int64
	yields := 0
	for looks := 1; ; looks++ {
		for _, c := range *t.rings.Load() {
			t.progress(c)
		}
		if done.Load() {
			// A reader goroutine that parked unarmed meanwhile raises
			// its flag by itself (shmConn.await), within a millisecond:
			// a caller that got what it polled for is likely to poll
			// again sooner.
			t.pollers.Add(-1)
			return true
		}
		if looks%64 == 0 { // a clock read costs several looks
			now := monoNow()
			if start == 0 {
				start, lastYield = now, now
			}
			if now-start >= int64(d) {
				// Polled in vain: about to park, the caller leaves the
				// next frame to the reader goroutines, which must raise
				// their flags now.
				t.pollers.Add(-1)
				for _, c := range *t.rings.Load() {
					c.shm.poke()
				}
				return false
			}
			if now-lastYield >= int64(progressYield) {
				yields++
				pollYield(yields)
				lastYield = monoNow()
			}
		}
	}
}

// progress delivers the frames c's ring holds whole, if no one else is
// reading c.
func (t *Transport) progress(c *conn) {
	if !c.shm.pending() || !c.rd.TryLock() {
		return
	}
	defer c.rd.Unlock()
	var err error
	for n := 0; n < progressBatch && err == nil; n++ {
		err = t.readFrame(c, true)
	}
	// What is left beyond the ring (a large or torn frame read into the
	// frame reader, the rest of a batch, or an error, which is sticky and
	// ends c when the reader meets it) is the reader goroutine's: wake it.
	if c.fr.Buffered() > 0 || err != nil && err != wire.ErrWouldBlock {
		c.shm.handoff.Store(true)
		c.shm.poke()
	}
}
