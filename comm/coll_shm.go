package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cohort-mp/cohort/comm/internal/coll"
)

// Collectives over shared memory. When every rank of a communicator runs
// on this host, its Allreduce, Bcast and Barrier go through a segment of
// memory that the ranks share, not through messages (across hosts, see
// coll_hier.go). Each rank writes its contribution into its own slot and
// every element is reduced in rank order (coll.Segment), so every rank
// gets the same bits as the flat algorithm's. On a busy host a
// collective's cost is its waits: a rank now waits for the others'
// progress words, polling and yielding its core, then asleep on a futex,
// instead of for a reader goroutine to be woken by a message and to wake
// it in turn.
//
// The segment is made at the communicator's first of them: its rank 0
// creates a memfd and maps it, tells the others its process and
// descriptor (a Bcast over the transport), they reopen it through
// /proc/<pid>/fd (allowed to a process that may trace the creator: one of
// the same user) and map it, and an Allreduce over the transport tells
// every rank that every rank succeeded; else (a rank among them whose
// connections of one host do not share memory either: COHORT_SHM=off,
// COHORT_UNIX=off or TLS; or elsewhere than on Linux, or in a replicated
// job) the communicator keeps the transport's collectives. Nothing is
// left behind: the memfd has no name, and its memory goes when the last
// rank unmaps it — when the session ends, when the communicator is
// revoked or loses a member (it never runs a collective again; Shrink and
// Dup make communicators with segments of their own), or with the
// process.
//
// Failures keep their meaning: a wait gives up with a [*ProcFailedError]
// naming the failed ranks once the membership declares a member failed,
// with [ErrRevoked] once the communicator is revoked, and with ctx's error
// when ctx ends. A rank whose ctx ends in the middle of a round leaves the
// others without its part; it marks the segment abandoned, and every later
// or pending collective of the communicator on the segment fails with
// [ErrAbandoned] naming it, at every rank, rather than waiting for it.

// The segment's layout: a header page, a page (or more) of progress
// lines, one a rank, then two buffers of p input slots, then two output
// areas.
const (
	segMagic     = "cohortC1"
	segHeader    = 4096
	segLine      = 64  // a rank's progress line: its word, its bytes of even and odd rounds, its CPU (segCPUAt), then from segSmall its small inputs
	segCPUAt     = 24  // offset in a progress line of 1 + the CPU its rank last waited on (0: unknown)
	segSmall     = 32  // offset in a progress line of the small inputs of buffers 0 and 1 (coll.LineBytes each)
	offSegRanks  = 8   // uint64: p
	offSegSlot   = 16  // uint64: the slot's bytes
	offSegComm   = 24  // uint64: the communicator's id
	offAbandoned = 64  // uint32: 1 + the rank that abandoned a round, or 0
	offSleepers  = 128 // uint32: ranks asleep on the bell
	offBell      = 192 // uint32: bumped by a publish that finds sleepers

	// segMaxRanks bounds the ranks of a communicator on a segment: its
	// rounds read every rank's line, and its size grows with p.
	segMaxRanks = 64
)

// segSlotBytes is the slot size of a segment for p ranks: 1 MiB up to 16
// ranks, then 16 MiB shared among them, whole pages (the inputs take 2·p
// slots, so at most 32 MiB, touched only as far as vectors reach). Each
// slot is one round, and a round's waits, not its copies, are what cost
// on a busy host: on 2 cores (cohort bench allreduce, alternated runs)
// the 1 MiB Allreduce took 535–625 µs on 4 ranks and 1,250–1,500 on 8
// in rounds of 1 MiB, against 540–4,570 and 2,090–2,800 in rounds of 256
// KiB.
func segSlotBytes(p int) int {
	return min(1<<20, max(64<<10, (16<<20)/p&^4095))
}

// segLayout gives a segment's offsets for p ranks and slots of slot bytes.
func segLayout(p, slot int) (inputs, outputs, size int) {
	lines := (p*segLine + 4095) &^ 4095
	inputs = segHeader + lines
	outputs = inputs + 2*p*slot
	return inputs, outputs, outputs + 2*slot
}

// Polling of a wait on the segment: it looks at the progress words
// segLooks times, yields its core (sched_yield: on a host with more ranks
// than cores, the rank it waits for may need it), and again, for up to
// segSpin in all; then it sleeps on the bell, waking at least every
// segSleep to look for failures. What matters on a busy host is to yield
// often, as for the collectives' receives (coll_fast.go); on 2 busy cores
// (cohort bench allreduce, 4 and 8 ranks), 1 µs of looks between yields
// and a spin of 200 µs rather than 50 did no better than this.
//
// Before its first yield a wait polls on for up to segPoll while every
// rank it waits for last waited on another CPU than this one: on a host
// with more ranks than cores, those ranks are either running or about to
// run there, and the call finishes in this rank's turn on its core
// instead of after one more switch to the other rank there and back.
// When a rank it waits for shares its CPU, or two share another, it
// yields at once, since one of them needs a switch first. With 4 ranks
// on 2 cores, two a core (cohort bench allreduce near quiet,
// docs/PERFORMANCE.md), this took the context switches per 8 B
// Allreduce from 4.0–4.2 to 2.8–3.2; packed on one core, or 8 ranks on
// 2, the counts did not move.
const (
	segLooks = 64
	segPoll  = 5 * time.Microsecond
	segSpin  = 50 * time.Microsecond
	segSleep = time.Millisecond
)

// collSeg is one rank's view of a communicator's segment (coll.Segment):
// of all its ranks, or of those of this host when its ranks span hosts
// (coll_hier.go). Its waits look for failures and revocation on c.
type collSeg struct {
	c       *Comm
	mem     []byte
	p, self int
	slot    int
	in, out int // offsets of the inputs and the outputs
	round   uint64

	ranks     []int               // the communicator's rank of each rank of the segment; nil: the same
	progress  []*atomic.Uint64    // by rank
	cpus      []*atomic.Uint64    // by rank: 1 + the CPU it last waited on, 0 unknown
	bytes     [][2]*atomic.Uint64 // by rank, by round parity
	abandoned *atomic.Uint32
	sleepers  *atomic.Uint32
	bell      *atomic.Uint32

	home segHome // the CPU this rank starts on, and goes back to after a sleep
	// quietSleep: sleep on the bell without the Go runtime's knowledge
	// (futexWait), the rank being its process's only one.
	quietSleep bool
}

func word64(mem []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&mem[off])) }
func word32(mem []byte, off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&mem[off])) }

func newCollSeg(c *Comm, t coll.Transport, mem []byte, slot int) *collSeg {
	p := t.Size()
	g := &collSeg{c: c, mem: mem, p: p, self: t.Rank(), slot: slot}
	g.in, g.out, _ = segLayout(p, slot)
	if st, ok := t.(*subTransport); ok {
		g.ranks = st.ranks
	}
	for r := range p {
		g.progress = append(g.progress, word64(mem, segHeader+r*segLine))
		g.cpus = append(g.cpus, word64(mem, segHeader+r*segLine+segCPUAt))
		g.bytes = append(g.bytes, [2]*atomic.Uint64{word64(mem, segHeader+r*segLine+8), word64(mem, segHeader+r*segLine+16)})
	}
	g.abandoned, g.sleepers, g.bell = word32(mem, offAbandoned), word32(mem, offSleepers), word32(mem, offBell)
	g.home = newSegHome(g.self, p)
	g.quietSleep = c.s.wholeProcess
	return g
}

// writeSegHeader fills a new segment's header.
func writeSegHeader(mem []byte, p, slot int, id uint64) {
	copy(mem, segMagic)
	binary.LittleEndian.PutUint64(mem[offSegRanks:], uint64(p))
	binary.LittleEndian.PutUint64(mem[offSegSlot:], uint64(slot))
	binary.LittleEndian.PutUint64(mem[offSegComm:], id)
}

// checkSegHeader checks that a mapped segment is the one its creator made
// for this communicator.
func checkSegHeader(mem []byte, p, slot int, id uint64) error {
	switch {
	case string(mem[:len(segMagic)]) != segMagic:
		return errors.New("not a collective segment")
	case binary.LittleEndian.Uint64(mem[offSegRanks:]) != uint64(p),
		binary.LittleEndian.Uint64(mem[offSegSlot:]) != uint64(slot),
		binary.LittleEndian.Uint64(mem[offSegComm:]) != id:
		return errors.New("the segment of another communicator")
	}
	return nil
}

func (g *collSeg) SlotBytes() int { return g.slot }

func (g *collSeg) Input(r, b int) []byte {
	off := g.in + (b*g.p+r)*g.slot
	return g.mem[off : off+g.slot : off+g.slot]
}

func (g *collSeg) Small(r, b int) []byte {
	off := segHeader + r*segLine + segSmall + b*coll.LineBytes
	return g.mem[off : off+coll.LineBytes : off+coll.LineBytes]
}

func (g *collSeg) Output(b int) []byte {
	off := g.out + b*g.slot
	return g.mem[off : off+g.slot : off+g.slot]
}

func (g *collSeg) Begin() uint64 {
	k := g.round
	g.round++
	return k
}

func (g *collSeg) Bytes(r int, k uint64) int { return int(g.bytes[r][k%2].Load()) }

func (g *collSeg) Publish(v uint64, bytes int) {
	// The progress word's store publishes the bytes word before it (and
	// the input), which needs no fence of its own.
	hotsync.StoreRelease64(g.bytes[g.self][(v-1)/2%2], uint64(bytes))
	g.progress[g.self].Store(v)
	g.ring()
}

// ring wakes the ranks asleep on the bell, if any.
func (g *collSeg) ring() {
	if g.sleepers.Load() > 0 {
		g.bell.Add(1)
		futexWake(g.bell)
	}
}

func (g *collSeg) Await(ctx context.Context, v uint64) error {
	next := 0 // the first rank not known to have reached v
	reached := func() bool {
		for next < g.p && g.progress[next].Load() >= v {
			next++
		}
		return next == g.p
	}
	if reached() {
		return nil
	}
	cpu := g.noteCPU()
	start := time.Now()
	for n := 1; ; n++ {
		for range segLooks {
			if reached() {
				return nil
			}
		}
		if n%16 == 0 {
			if err := g.check(ctx, next); err != nil {
				return err
			}
			runtime.Gosched() // the rank's own goroutines: its failure detector
		}
		waited := time.Since(start)
		if waited < segPoll && g.othersElsewhere(cpu, next, v) {
			continue
		}
		if waited < segSpin {
			hotsync.Yield()
			cpu = g.noteCPU()
			continue
		}
		if err := g.check(ctx, next); err != nil {
			return err
		}
		g.sleepers.Add(1)
		bell := g.bell.Load()
		if !reached() {
			futexWait(g.bell, bell, segSleep, g.quietSleep)
		}
		g.sleepers.Add(^uint32(0))
		g.home.goIfQuiet(g.p)
		runtime.Gosched() // the sleep held the rank's processor
		cpu = g.noteCPU()
	}
}

// noteCPU publishes the CPU this rank waits on (segCPU), for the others'
// waits, and returns it.
func (g *collSeg) noteCPU() uint64 {
	cpu := segCPU()
	if w := g.cpus[g.self]; w.Load() != cpu {
		hotsync.StoreRelease64(w, cpu)
	}
	return cpu
}

// othersElsewhere reports whether every rank from next on that has not
// reached v last waited on a known CPU other than cpu (this rank's), each
// on a CPU of its own: two on one CPU cannot both be running, and the
// second would need a switch there that outlasts segPoll.
func (g *collSeg) othersElsewhere(cpu uint64, next int, v uint64) bool {
	if cpu == 0 {
		return false
	}
	var seen [segMaxRanks]uint64
	k := 0
	for r := next; r < g.p; r++ {
		if g.progress[r].Load() >= v {
			continue
		}
		c := g.cpus[r].Load()
		if c == 0 || c == cpu || slices.Contains(seen[:k], c) {
			return false
		}
		seen[k] = c
		k++
	}
	return true
}

// check returns why a wait for rank waiting of the segment must end: a
// member failed, the communicator was revoked, the session ended, the rank
// waited for left the job (it will never write its part), a rank abandoned
// the segment, or ctx ended (this rank then abandons it).
func (g *collSeg) check(ctx context.Context, waiting int) error {
	if err := g.c.collErr(); err != nil {
		return err
	}
	if err := g.leftErr(waiting); err != nil {
		return err
	}
	if a := g.abandoned.Load(); a != 0 {
		return fmt.Errorf("%w: rank %d", ErrAbandoned, a-1)
	}
	select {
	case <-ctx.Done():
		g.abandon()
		return ctx.Err()
	default:
	}
	return nil
}

// leftErr is the *ProcLeftError of a wait for rank r of the segment if r
// left the job: what it had not written before it left, it never will.
func (g *collSeg) leftErr(r int) error {
	if r < 0 || r >= g.p {
		return nil
	}
	if g.ranks != nil {
		r = g.ranks[r]
	}
	s := g.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.c.st.left[r] {
		return &ProcLeftError{Ranks: []int{r}}
	}
	return nil
}

// abandon marks the segment abandoned by this rank, and wakes the ranks
// asleep on it to see so.
func (g *collSeg) abandon() {
	g.abandoned.CompareAndSwap(0, uint32(g.self)+1)
	g.sleepers.Add(1) // wake every sleeper, whether or not one is counted
	g.ring()
	g.sleepers.Add(^uint32(0))
}

// collErr reports why no collective step may run on c: the session
// ended, c is revoked, or a member is known failed (other than by
// finalizing: see collFailedLocked).
func (c *Comm) collErr() error {
	s, st := c.s, c.st
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.state != nil:
		return s.state
	case st.revoked:
		return ErrRevoked
	case st.collFailedLocked():
		return &ProcFailedError{Ranks: st.failedRanks()}
	}
	return nil
}

// segState is a communicator's segment, as far as this rank knows
// (commState.seg).
type segState struct {
	mu    sync.Mutex
	tried bool // set up, or found not to apply
	// setupErr is why the setup failed here: the others may have
	// finished it, so later collectives fail.
	setupErr error
	seg      *collSeg   // nil: no segment (for this host's ranks, with hier)
	hier     *hierState // set when the communicator spans hosts (coll_hier.go)
	users    int        // collectives using seg now
	closed   bool       // seg is unmapped once users is 0
}

// acquireSeg returns c's segment for a collective, setting it up at the
// communicator's first, and c's state across hosts if it spans hosts;
// both nil when c's collectives go over the transport alone. A segment
// returned, or a hierState, must be given back with releaseSeg.
func (c *Comm) acquireSeg(ctx context.Context) (*collSeg, *hierState, error) {
	st := &c.st.seg
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, nil, nil
	}
	if st.setupErr != nil {
		// The others may have the segment and wait on it for this rank:
		// it cannot take part again (nor go over the transport).
		if err := c.collErr(); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: rank %d, as the communicator's shared memory was being set up: %w", ErrAbandoned, c.Rank(), st.setupErr)
	}
	if !st.tried {
		var g *collSeg
		var h *hierState
		var err error
		switch {
		case c.segEligible():
			g, err = setupSeg(ctx, c, c.collTransport(), c.st.id)
		case c.hierEligible():
			h = c.newHier()
			if h.local.Size() > 1 {
				g, err = setupSeg(ctx, c, h.local, c.st.id^uint64(h.host+1)<<40)
			}
		}
		st.tried, st.seg, st.hier, st.setupErr = true, g, h, err
		if err != nil {
			return nil, nil, err
		}
	}
	if st.seg == nil && st.hier == nil {
		return nil, nil, nil
	}
	if st.seg != nil {
		if a := st.seg.abandoned.Load(); a != 0 {
			return nil, nil, fmt.Errorf("%w: rank %d", ErrAbandoned, a-1)
		}
	}
	// ULFM: a collective starts on no communicator with a known failed
	// member, as a step over the transport does not (sendPlanLocked).
	if err := c.collErr(); err != nil {
		st.closeOn(err)
		return nil, nil, err
	}
	st.users++
	return st.seg, st.hier, nil
}

// releaseSeg gives back the segment acquireSeg returned; err is the
// collective's outcome. A communicator that is revoked or lost a member
// never runs a collective again: its segment is freed.
func (c *Comm) releaseSeg(err error) {
	st := &c.st.seg
	st.mu.Lock()
	defer st.mu.Unlock()
	st.users--
	st.closeOn(err)
}

// closeOn frees the segment if err says that the communicator will never
// run a collective again (under mu).
func (st *segState) closeOn(err error) {
	if errors.Is(err, ErrRevoked) || errors.Is(err, ErrProcFailed) || errors.Is(err, ErrFinalized) || errors.Is(err, ErrEvicted) {
		st.closed = true
	}
	st.freeLocked()
}

// freeLocked unmaps the segment once closed and unused.
func (st *segState) freeLocked() {
	if st.closed && st.users == 0 && st.seg != nil {
		unmapSegment(st.seg.mem)
		st.seg = nil
	}
}

// closeSegs frees the segments of every communicator of the session (as
// it ends: their waits fail, and each is unmapped when its last leaves).
func (s *Session) closeSegs() {
	s.mu.Lock()
	states := make([]*commState, 0, len(s.comms))
	for _, c := range s.comms {
		states = append(states, c)
	}
	s.mu.Unlock()
	for _, c := range states {
		st := &c.seg
		st.mu.Lock()
		st.closed = true
		st.freeLocked()
		st.mu.Unlock()
	}
}

// segEligible reports whether c's collectives may use a segment: every
// member on this host, no replication, shared memory allowed.
func (c *Comm) segEligible() bool {
	s := c.s
	p := c.Size()
	if !segSupported || s.collHost == nil || s.rep != nil || p < 2 || p > segMaxRanks {
		return false
	}
	for _, n := range c.st.members {
		if int(n) >= len(s.collHost) || s.collHost[n] != s.collHost[s.self] {
			return false
		}
	}
	return true
}

// setupSeg makes the segment of c's ranks that t reaches (all of c, or
// those of this host), and id names, with each of them (see above), or
// reports that some rank could not (nil, nil).
func setupSeg(ctx context.Context, c *Comm, t coll.Transport, id uint64) (*collSeg, error) {
	p, slot := t.Size(), segSlotBytes(t.Size())
	_, _, size := segLayout(p, slot)
	var mem []byte
	fd := -1
	where := []int64{0, 0, 0} // ok, pid, fd
	if t.Rank() == 0 && !c.s.collNoShm {
		var err error
		if fd, mem, err = createSegment(size); err != nil {
			c.s.log.Warn("comm: no shared memory for the collectives of a communicator; they go over the transport", "err", err)
		} else {
			writeSegHeader(mem, p, slot, id)
			where = []int64{1, int64(segPid()), int64(fd)}
		}
	}
	defer func() {
		if fd >= 0 {
			closeSegmentFD(fd) // every rank has mapped it, or given up
		}
	}()
	fail := func(err error) (*collSeg, error) {
		if mem != nil {
			if err != nil && ctx.Err() != nil {
				// The others may have finished the setup and wait on
				// the segment for this rank.
				newCollSeg(c, t, mem, slot).abandon()
			}
			unmapSegment(mem)
		}
		return nil, err
	}
	if err := coll.Bcast(ctx, t, where, 0); err != nil {
		return fail(err)
	}
	if t.Rank() != 0 && where[0] == 1 && !c.s.collNoShm {
		var err error
		if mem, err = openSegment(int(where[1]), int(where[2]), size); err == nil {
			if err = checkSegHeader(mem, p, slot, id); err != nil {
				unmapSegment(mem)
				mem = nil
			}
		}
		if err != nil {
			c.s.log.Warn("comm: cannot map the collectives' shared memory; they go over the transport", "err", err)
		}
	}
	ok := []int64{0}
	if mem != nil {
		ok[0] = 1
	}
	if err := coll.Allreduce(ctx, t, ok, ok, coll.Min[int64]()); err != nil {
		return fail(err)
	}
	if ok[0] == 0 {
		return fail(nil)
	}
	g := newCollSeg(c, t, mem, slot)
	g.home.goIfQuiet(p)
	if c.s.wholeProcess {
		settleAfterSetup()
	}
	return g, nil
}

// allreduceShared runs Allreduce on c's segment; ok is false when c has
// none (the caller then uses the transport).
func allreduceShared[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op[T]) (ok bool, err error) {
	g, h, err := c.acquireSeg(ctx)
	switch {
	case err != nil:
		return true, err
	case h != nil:
		if !op.Commutative() && !h.contiguous {
			c.releaseSeg(nil)
			return false, nil // rank order needs the transport's algorithms
		}
		err = allreduceHier(ctx, h, g, send, recv, op)
	case g != nil:
		err = coll.AllreduceShared(ctx, g, g.self, g.p, send, recv, op)
	default:
		return false, nil
	}
	c.releaseSeg(err)
	return true, err
}

// barrierShared runs Barrier on c's segment; ok is false when c has none
// covering all its ranks (the caller then uses the transport).
func barrierShared(ctx context.Context, c *Comm) (ok bool, err error) {
	return onOneHostSeg(ctx, c, func(g *collSeg) error { return coll.BarrierShared(ctx, g) })
}

// bcastShared runs Bcast on c's segment; ok is false when c has none
// covering all its ranks (the caller then uses the transport).
func bcastShared[T Elem](ctx context.Context, c *Comm, buf []T, root int) (ok bool, err error) {
	return onOneHostSeg(ctx, c, func(g *collSeg) error { return coll.BcastShared(ctx, g, g.self, g.p, buf, root) })
}

// onOneHostSeg runs op on c's segment when it covers all c's ranks (one
// host); ok is false when c has none, or only a host's part of one.
func onOneHostSeg(ctx context.Context, c *Comm, op func(*collSeg) error) (ok bool, err error) {
	g, h, err := c.acquireSeg(ctx)
	switch {
	case err != nil:
		return true, err
	case g == nil && h == nil:
		return false, nil
	case h != nil:
		c.releaseSeg(nil)
		return false, nil
	}
	err = op(g)
	c.releaseSeg(err)
	return true, err
}

// hostsOf numbers the hosts of the processes at addrs: a process's number
// is the first process's with the same IP (or, for loopback addresses,
// the first loopback one's), as localIndex groups them; an address
// without an IP is a host of its own.
func hostsOf(addrs []string) []int {
	hosts := make([]int, len(addrs))
	first := make(map[string]int)
	for r, a := range addrs {
		hosts[r] = r
		ip := hostIP(a)
		if ip == nil {
			continue
		}
		key := string(ip.To16())
		if ip.IsLoopback() {
			key = "loopback"
		}
		if q, ok := first[key]; ok {
			hosts[r] = q
		} else {
			first[key] = r
		}
	}
	return hosts
}
