package tcp

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // procPin's linkname

	"github.com/cohort-mp/cohort/transport/hotsync"
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
// reader goroutine, which the caller wakes for them. A caller looks at a
// ring without the connection's mapping lock (shmConn.use): the poll
// guard (pollGuard, below) keeps the rings mapped while any caller polls.
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
	t.pollers.makeSlots()
	var next []*conn
	if cur := t.rings.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, c)
	t.rings.Store(&next)
}

func (t *Transport) removeRing(c *conn) {
	c.rd.Lock() // no caller delivers from c meanwhile (c.polled)
	defer c.rd.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats.polled.Add(c.polled.Load())
	c.polledOut = true
	cur := t.rings.Load()
	if cur == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*cur), func(o *conn) bool { return o == c })
	t.rings.Store(&next)
}

// The window stretches. Two ranks that wait for each other's replies
// have two steady states: both poll, and a reply comes within
// microseconds; or both park, and each reply needs the peer's wake-up
// (its doorbell, the netpoller, a thread of a loaded host to run on),
// which can take longer than the polling time: each side's poll then ends
// in vain just before the other's reply, and both stay parked (measured
// here with one busy process beside a two-rank ping-pong: 20–100 µs per
// message, for as long as the load lasts, against 1 µs). So a poll that
// follows one that ended in vain looks at how soon its caller came back
// (parked, woken, and called again): within half the longest window
// (stretchMax polling times), the window becomes twice the vain poll and
// that gap together, so that the next wait outlasts the peer's wake-up,
// gets its reply by polling, and the peer then does too; later, the peer
// was merely busy, and the window goes back to the polling time. Each
// wait whose frame came in its first looks shrinks the window by a
// sixty-fourth. A stretched poll costs a processor only while its peer is
// as slow to answer as its wake-up would be, and at most the longest
// window once when the job turns from talking to computing.
//
// A stretched poll ends at the polling time (as an unstretched one) while
// another goroutine of the transport moves frames (Transport.working): a
// reader goroutine reading (a frame the callers leave to it: a large one),
// a writer writing a large frame, or a Read or Write waiting for its
// peer's doorbell (a writer for room, a
// reader for the rest of a large frame). On a rank with one processor the
// polling caller takes turns with the first, and the second's wake-up
// comes through the netpoller, which the Go scheduler does not consult
// while a goroutine yields on the only processor: a long poll would slow
// both (large messages' bandwidth falls fivefold when it does).

// stretchMax bounds the window, in polling times (and by MaxSpin).
const stretchMax = 20

// stretched returns the window of a poll whose polling time is d, after
// one that ended in vain with window win (0: d) gap ns before.
func stretched(d, win, gap int64) int64 {
	longest := min(stretchMax*d, int64(MaxSpin))
	if gap < 0 || gap > longest/2 {
		return d
	}
	return max(d, min(longest, 2*(max(win, d)+gap)))
}

// PollUntil polls this transport's shared-memory connections on the
// calling goroutine, delivering the frames it finds to the handler as the
// reader goroutines would, until *word has a bit of mask set (by the
// handler, or by anyone) or the polling window has passed (d, stretched
// after a poll that ended in vain: see progress.go), and reports whether
// it has. It yields to the process's goroutines every progressYield.
// The handler must not call PollUntil itself (a frame is delivered under
// its connection's read lock).
// Without shared-memory connections, or with d <= 0, it only reports
// whether such a bit is set. (A word rather than a flag: a caller's
// request keeps its other states in the same word, so that completing
// it is one atomic operation.)
func (t *Transport) PollUntil(word *atomic.Uint32, mask uint32, d time.Duration) bool {
	done := waitWord{word, mask}
	if done.Load() {
		return true
	}
	rings := t.rings.Load()
	if d <= 0 || rings == nil || len(*rings) == 0 {
		return false
	}
	if v := t.vainAt.Load(); v != 0 && t.vainAt.CompareAndSwap(v, 0) {
		t.window.Store(stretched(int64(d), t.window.Load(), monoNow()-v))
	}
	win := max(int64(d), t.window.Load())
	t.pollers.enter()
	// The clock is first read at the 64th look, so that a frame at hand
	// (a reply that came while the caller sent) costs no clock read: the
	// poll lasts its window plus those first looks.
	var start, lastYield int64
	yields := 0
	for looks := 1; ; looks++ {
		for _, c := range *t.rings.Load() {
			if t.progress(c, done) {
				break
			}
		}
		if done.Load() {
			// A reader goroutine that parked unarmed meanwhile raises
			// its flag by itself (shmConn.await), within a millisecond:
			// a caller that got what it polled for is likely to poll
			// again sooner.
			t.pollers.leave()
			if looks < 64 && win > int64(d) {
				t.window.Store(max(int64(d), win-win/64))
			}
			return true
		}
		if looks%64 == 0 { // a clock read costs several looks
			now := monoNow()
			if start == 0 {
				start, lastYield = now, now
			}
			if el := now - start; el >= int64(d) && (el >= win || t.working.Load() > 0) {
				// Polled in vain: about to park, the caller leaves the
				// next frame to the reader goroutines, which must raise
				// their flags now.
				t.pollers.leave()
				for _, c := range *t.rings.Load() {
					c.shm.poke()
				}
				t.vainAt.Store(max(now, 1))
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
// reading c, and reports whether done is set. It stops at the frame that
// sets done: the caller's wait is over, and its return is what the peer
// waits for; the frames after it go to the reader goroutine.
func (t *Transport) progress(c *conn, done waitWord) bool {
	if !c.shm.pending() || !c.rd.TryLock() {
		return false
	}
	got, fenced := t.progressLocked(c, done)
	// The frames' room goes back to a writer waiting for it: the ring's
	// head was stored by a plain move (ring.consume), which must be
	// visible before this load of the writer's flag (the futex pattern,
	// shmConn.wait). A frame readLineShm took is followed by the
	// delivery lock's compare-and-swap, a full barrier after the head's
	// store (fenced); after any other (readFrame's, whose ways are many),
	// the read lock's release is the barrier.
	if fenced {
		c.rd.Unlock()
	} else {
		c.rd.UnlockFence()
	}
	c.shm.ring(c.shm.in, offWWaiting)
	return got
}

// progressLocked is progress under c.rd. fenced reports that no frame
// was consumed after the last locked instruction it ran: the frames it
// took, if any, were readLineShm's, the last of which took the delivery
// lock after it consumed.
func (t *Transport) progressLocked(c *conn, done waitWord) (got, fenced bool) {
	var err error
	fenced = true
	for n := 0; n < progressBatch && err == nil; n++ {
		var decided bool
		if decided, err = t.readLineShm(c); !decided {
			err = t.readFrame(c, true)
			fenced = false
		} else if err == nil {
			fenced = true
		}
		if err == nil && done.Load() {
			break
		}
	}
	// What is left beyond the ring (a large or torn frame read into the
	// frame reader, the rest of a batch or what followed the frame the
	// caller waited for, or an error, which is sticky and ends c when the
	// reader meets it) is the reader goroutine's: wake it.
	if c.fr.Buffered() > 0 || err != nil && err != wire.ErrWouldBlock || err == nil && c.shm.pending() {
		c.shm.handoff.Store(true)
		c.shm.poke()
	}
	return done.Load(), fenced
}

// waitWord is what PollUntil waits for: a bit of mask set in *w.
type waitWord struct {
	w    *atomic.Uint32
	mask uint32
}

func (d waitWord) Load() bool { return d.w.Load()&d.mask != 0 }

// pollGuard counts the callers polling a transport's rings (PollUntil)
// and keeps the rings mapped while any does: the callers' look at a ring
// (shmConn.pending, nextFrame) then takes no lock, which a look at every
// message would pay twice. A connection's Close sets closing, then hands
// its unmapping to unmap, which runs it at once if no caller polls and
// otherwise when the last one leaves. A caller that came before closing
// was set is counted (unmap waits for it); one that came after sees it
// set, and does not touch the ring.
//
// The count is two monotonic sums, of entries and of exits, and a caller
// adds to them in the slot of the processor it runs on (pinned to it for
// that), by a load and a release store, not an atomic add: a locked
// instruction at each end of every poll is a sizeable part of a small
// message's cost on one host. Those plain stores are fenced by the
// closing side alone, with an asymmetric barrier (membarrier(2),
// guardBarrier) between its own stores (closing, waiting) and its loads
// of the slots: each caller then either has its entry seen, or sees
// closing set at its next look. Where the barrier is not available, or
// a processor has no slot, the caller counts in the shared sums by
// atomic adds, which fence on both sides. A caller that leaves while an
// unmapping waits takes mu, which orders its exit with another
// leaver's, before it sums.
type pollGuard struct {
	slots   atomic.Pointer[[]pollSlot] // by processor, with guardBarrier (nil: none yet, makeSlots)
	enters  atomic.Uint64              // entries of callers without a slot
	leaves  atomic.Uint64              // and their exits
	waiting atomic.Bool                // late is not empty (a load for a caller that leaves)
	mu      sync.Mutex
	late    []func() // unmappings waiting for the callers to leave
}

// pollSlotsMax bounds the processors that count in a slot of their own:
// the sums are read by every look of a parked reader (shmConn.await).
const pollSlotsMax = 256

// makeSlots gives g a slot for each of the process's processors (at
// most pollSlotsMax), once; the transport calls it under its mu before
// it lists its first ring, so callers that poll find them (a processor
// added later counts in the shared sums).
func (g *pollGuard) makeSlots() {
	if guardFenced && g.slots.Load() == nil {
		sl := make([]pollSlot, min(runtime.GOMAXPROCS(0), pollSlotsMax))
		g.slots.Store(&sl)
	}
}

// pollSlot is one processor's share of a guard's sums, alone in its
// cache line.
type pollSlot struct {
	enters, leaves atomic.Uint64
	_              [48]byte
}

func (g *pollGuard) enter() {
	// Slots are made only with guardFenced (makeSlots).
	if sl := g.slots.Load(); sl != nil {
		if pid := procPin(); uint(pid) < uint(len(*sl)) {
			s := &(*sl)[pid].enters
			hotsync.StoreRelease64(s, s.Load()+1)
			procUnpin()
			return
		}
		procUnpin()
	}
	g.enters.Add(1)
}

func (g *pollGuard) leave() {
	if sl := g.slots.Load(); sl == nil {
		g.leaves.Add(1)
	} else if pid := procPin(); uint(pid) < uint(len(*sl)) {
		s := &(*sl)[pid].leaves
		hotsync.StoreRelease64(s, s.Load()+1)
		procUnpin()
	} else {
		procUnpin()
		g.leaves.Add(1)
	}
	if g.waiting.Load() {
		g.runLate()
	}
}

// polling reports whether a caller polls. Every exit is read before
// every entry: the sums only grow, and each exit follows its entry, so
// equal sums mean that no caller was polling at the moment between the
// two reads (a caller counted on the way adds to the entries only, and
// is taken for one that polls).
func (g *pollGuard) polling() bool {
	var sl []pollSlot
	if p := g.slots.Load(); p != nil {
		sl = *p
	}
	out := g.leaves.Load()
	for i := range sl {
		out += sl[i].leaves.Load()
	}
	in := g.enters.Load()
	for i := range sl {
		in += sl[i].enters.Load()
	}
	return in != out
}

// unmap runs f once no caller polls (at once for a nil guard: a
// connection of no transport).
func (g *pollGuard) unmap(f func()) {
	if g == nil {
		f()
		return
	}
	g.mu.Lock()
	g.late = append(g.late, f)
	g.waiting.Store(true)
	g.mu.Unlock()
	// The connection's closing and waiting are stored: from here on, a
	// caller's entry is seen, or it sees closing; its exit is seen, or
	// it sees waiting and runs f itself.
	if guardFenced {
		guardBarrier()
	}
	g.runLate()
}

// runLate runs the unmappings waiting, unless a caller polls (the last
// to leave runs them then).
func (g *pollGuard) runLate() {
	g.mu.Lock()
	if g.polling() {
		g.mu.Unlock()
		return
	}
	late := g.late
	g.late = nil
	g.waiting.Store(false)
	g.mu.Unlock()
	for _, f := range late {
		f()
	}
}

// procPin pins the calling goroutine to its processor, whose id it
// returns, until procUnpin: no other goroutine runs there meanwhile, so
// a slot of that processor's is the caller's alone.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
