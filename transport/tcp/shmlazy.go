package tcp

import "time"

// Lazy reads. A process that only follows (a replica that is not its
// rank's master: its data come in batches, late by design) serves no one
// waiting when it reads a frame at once, yet its reader, parked with its
// flag raised, makes every writer ring it: a write on the Unix socket
// and, usually, the wake-up of a process asleep on the other core, paid
// on the writer's processor, which is a master's, on the critical path.
// While lazy reads are on (SetLazyReads), a reader that finds its ring
// empty raises its flag as lazy (waitingLazy) and parks for the lazy
// period: a writer rings it only once the ring is half full (pastHalf),
// and otherwise the reader looks again by its own timer, where it ran.
// After lazyLooks looks that found nothing it raises its flag as usual
// (waitingRing), so that a quiet connection costs no timer wake-ups; the
// next frame is rung, and the reader then reads lazily again.
//
// A lazy reader delays only reading, by a lazy period at most: the
// peer's death and Close still wake it (the watcher sees the socket
// end), a half-close rings it whatever its flag (CloseWrite), and a
// writer never waits for room before ringing it, since the ring is then
// more than half full. The period is not shorter than the Go runtime
// sleeps: the netpoller's wait counts in milliseconds, so a timer due
// sooner still sleeps one.

// The values of a ring's waiting flag (offRWaiting, offWWaiting): the
// side that set it sleeps, and the other rings it (ring), the writer a
// lazy reader only past half the ring.
const (
	waitingNone uint32 = iota
	waitingRing
	waitingLazy
)

// lazyLooks is how many looks that found nothing a lazy reader makes
// before it raises its flag as usual.
const lazyLooks = 4

// waitingFlag is the flag a reader arms with (arm) or none.
func waitingFlag(arm bool) uint32 {
	if arm {
		return waitingRing
	}
	return waitingNone
}

// SetLazyReads makes the readers of the transport's shared-memory rings
// read lazily, looking every period instead of being rung while their
// ring is less than half full (see above), or ends that for period 0. A
// reader parked takes a change in at its next look at the latest.
func (t *Transport) SetLazyReads(period time.Duration) {
	t.lazyReads.Store(int64(max(period, 0)))
}

// lazyLook decides whether a reader that found the ring empty, after
// *looks lazy looks already, parks as a lazy reader: if so it counts the
// look and lowers *dl (Unix ns, 0 none) to the next look.
func (c *shmConn) lazyLook(looks *int, dl *int64) bool {
	var every int64
	if c.lazy != nil {
		every = c.lazy.Load()
	}
	if every == 0 || *looks >= lazyLooks {
		return false
	}
	*looks++
	if until := time.Now().UnixNano() + every; *dl == 0 || until < *dl {
		*dl = until
	}
	return true
}

// pastHalf reports whether the writer's ring holds half its size or more
// not yet read (the writer's side, under its lock).
func (r *ring) pastHalf() bool {
	return r.pos-r.u64(offHead).Load() >= r.size/2
}
