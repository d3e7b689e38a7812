// Package fault wraps a [transport.Transport] to inject network faults on
// the real path: it drops, delays and duplicates the frames a node sends,
// by rules given as data and drawn from a seeded source, so that a test
// over real TCP (or any transport) can reproduce loss, delay spikes and
// duplicates without root, netns or tc.
//
//	inner, _ := tcp.Listen(cfg)
//	tr, _ := fault.New(inner, fault.Config{Seed: 7, Rules: []fault.Rule{
//		{Drop: 0.05},                                   // 5% loss to everyone
//		{To: []core.NodeID{3}, From: 2 * time.Second,   // a 200 ms spike to node 3
//			Until: 4 * time.Second, Delay: 200 * time.Millisecond},
//	}})
//	h, _ := host.New(stack, host.Config{Transport: tr, ...})
//
// # What a rule does
//
// A rule applies to the frames this node sends to the listed peers (To;
// empty means every peer) of the listed kinds or protocols (Kinds, Protos;
// both empty means every frame) while the wrapper's clock, which starts at
// New, is in [From, Until) (Until 0: no end). Each matching frame is
// dropped with probability Drop; a frame that survives is duplicated with
// probability Duplicate, and both copies are held for Delay plus a uniform
// jitter in [0, Jitter). When several rules match, the drop and duplicate
// probabilities combine as independent events and the delays add up.
//
// Faults are applied where frames leave a node, so a fault on the link
// between a and b in both directions is a rule in a's wrapper and one in
// b's; "node 3 is slow" is a rule To 3 in every other node and a rule To
// every peer in node 3.
//
// # Order and delivery
//
// Delayed frames to one peer keep their order, and a frame sent while
// earlier frames to the same peer are held waits behind them, so the
// per-pair FIFO order of the inner transport is preserved (delay never
// reorders; only Duplicate breaks the "never duplicated" promise, on
// purpose). Held frames are handed to the inner transport by one
// goroutine, which never waits for room in a full queue: a frame that
// finds the inner queue full is dropped and counted, as a congested link
// would. At most MaxHeld frames are held at once; beyond that new frames
// to be delayed are dropped and counted. Inbound frames and hints pass
// through untouched.
//
// The decisions are drawn from one source seeded by Config.Seed, under a
// lock, in the order frames are sent; with concurrent senders that order,
// and so the exact frames hit, depends on scheduling, but the rates and
// windows do not.
package fault

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// ErrBadRule is wrapped by New's error for an invalid rule.
var ErrBadRule = errors.New("fault: invalid rule")

// Rule is one fault, as data. See the package documentation.
type Rule struct {
	To     []core.NodeID // destinations; empty: every peer
	Kinds  []core.Kind   // frame kinds; empty (with Protos empty): every kind
	Protos []core.Proto  // protocols of the frame kinds, as an alternative to Kinds

	From, Until time.Duration // active window on the wrapper's clock; Until 0: no end

	Drop      float64       // probability that a matching frame is lost
	Duplicate float64       // probability that a surviving frame is sent twice
	Delay     time.Duration // added to every surviving matching frame
	Jitter    time.Duration // plus a uniform random delay in [0, Jitter)
}

func (r Rule) String() string {
	s := "frames"
	if len(r.Kinds) > 0 || len(r.Protos) > 0 {
		s = fmt.Sprintf("frames of %v %v", r.Kinds, r.Protos)
	}
	if len(r.To) > 0 {
		s += fmt.Sprintf(" to %v", r.To)
	}
	if r.Until > 0 {
		s += fmt.Sprintf(" in [%v,%v)", r.From, r.Until)
	} else if r.From > 0 {
		s += fmt.Sprintf(" from %v", r.From)
	}
	return fmt.Sprintf("%s: drop %.3g, duplicate %.3g, delay %v+[0,%v)", s, r.Drop, r.Duplicate, r.Delay, r.Jitter)
}

func (r Rule) validate() error {
	switch {
	case r.Drop < 0 || r.Drop > 1:
		return fmt.Errorf("%w: Drop %v outside [0, 1]", ErrBadRule, r.Drop)
	case r.Duplicate < 0 || r.Duplicate > 1:
		return fmt.Errorf("%w: Duplicate %v outside [0, 1]", ErrBadRule, r.Duplicate)
	case r.Delay < 0 || r.Jitter < 0:
		return fmt.Errorf("%w: negative Delay %v or Jitter %v", ErrBadRule, r.Delay, r.Jitter)
	case r.From < 0 || r.Until < 0 || (r.Until > 0 && r.Until <= r.From):
		return fmt.Errorf("%w: window [%v, %v)", ErrBadRule, r.From, r.Until)
	}
	return nil
}

// matches reports whether r applies to a frame of kind k to peer to at
// clock time at.
func (r *Rule) matches(to core.NodeID, k core.Kind, at time.Duration) bool {
	if at < r.From || (r.Until > 0 && at >= r.Until) {
		return false
	}
	if len(r.To) > 0 && !slices.Contains(r.To, to) {
		return false
	}
	if len(r.Kinds) == 0 && len(r.Protos) == 0 {
		return true
	}
	return slices.Contains(r.Kinds, k) || slices.Contains(r.Protos, k.Proto())
}

// Config configures a wrapper.
type Config struct {
	Seed  uint64 // seeds every drop, duplicate and jitter decision
	Rules []Rule
	// MaxHeld bounds the frames held for delay at once. Default 65,536.
	MaxHeld int
}

// DefaultMaxHeld is the default of Config.MaxHeld.
const DefaultMaxHeld = 1 << 16

// Stats counts what the wrapper did.
type Stats struct {
	Sent       uint64 // frames handed to Send
	Dropped    uint64 // lost to a Drop rule
	Duplicated uint64 // sent twice
	Delayed    uint64 // held for a delay (copies included)
	Overflow   uint64 // lost because MaxHeld frames were held or the inner queue was full
}

// Transport is a [transport.Transport] that injects the faults of its
// rules into the frames it sends through the inner transport. It is safe
// for concurrent use.
type Transport struct {
	inner transport.Transport
	start time.Time
	max   int

	mu      sync.Mutex
	rules   []Rule
	rng     *rand.Rand
	held    heldQueue
	seq     uint64
	last    map[core.NodeID]time.Time // release time of the last frame held for each peer
	pending map[core.NodeID]int       // frames held or being released for each peer
	stats   Stats
	closed  bool
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// New wraps inner. The wrapper's clock starts now; it starts one goroutine,
// stopped by Close (which also closes inner).
func New(inner transport.Transport, cfg Config) (*Transport, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: nil inner transport", ErrBadRule)
	}
	for i, r := range cfg.Rules {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("rule %d (%v): %w", i, r, err)
		}
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	t := &Transport{
		inner:   inner,
		start:   time.Now(),
		max:     cfg.MaxHeld,
		rules:   slices.Clone(cfg.Rules),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x6661756c74)),
		last:    map[core.NodeID]time.Time{},
		pending: map[core.NodeID]int{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go t.release()
	return t, nil
}

// Now is the wrapper's clock: the time since New. Rule windows refer to it.
func (t *Transport) Now() time.Duration { return time.Since(t.start) }

// SetRules replaces the rules (validated as by New); the clock goes on.
func (t *Transport) SetRules(rules []Rule) error {
	for i, r := range rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("rule %d (%v): %w", i, r, err)
		}
	}
	t.mu.Lock()
	t.rules = slices.Clone(rules)
	t.mu.Unlock()
	return nil
}

// Stats returns the counters so far.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Self implements transport.Transport.
func (t *Transport) Self() core.NodeID { return t.inner.Self() }

// Addr implements transport.Transport.
func (t *Transport) Addr() string { return t.inner.Addr() }

// SetPeer implements transport.Transport.
func (t *Transport) SetPeer(id core.NodeID, addr string) { t.inner.SetPeer(id, addr) }

// RemovePeer implements transport.Transport; frames held for id are dropped.
func (t *Transport) RemovePeer(id core.NodeID) {
	t.mu.Lock()
	n := len(t.held)
	t.held = slices.DeleteFunc(t.held, func(h heldFrame) bool { return h.to == id })
	heap.Init(&t.held)
	if t.pending[id] -= n - len(t.held); t.pending[id] <= 0 {
		delete(t.pending, id)
		delete(t.last, id)
	}
	t.mu.Unlock()
	t.inner.RemovePeer(id)
}

// Breaker is implemented by a transport whose connections can be broken
// on purpose, as a network fault would (transport/tcp).
type Breaker interface {
	// BreakConns breaks the connections to node id and returns how many
	// it broke.
	BreakConns(id core.NodeID) int
}

// BreakConns breaks the inner transport's connections to node id if it is
// a [Breaker] (a reset, as a middlebox or `ss -K` would do), and returns
// how many it broke (0 for a transport without connections).
func (t *Transport) BreakConns(id core.NodeID) int {
	if b, ok := t.inner.(Breaker); ok {
		return b.BreakConns(id)
	}
	return 0
}

// SetHandler implements transport.Transport: inbound frames and hints pass
// through untouched.
func (t *Transport) SetHandler(h transport.Handler) { t.inner.SetHandler(h) }

// Send implements transport.Transport, applying the rules to f.
func (t *Transport) Send(ctx context.Context, to core.NodeID, f wire.Frame) error {
	now := time.Now()
	at := now.Sub(t.start)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return transport.ErrClosed
	}
	t.stats.Sent++
	var delay time.Duration
	drop, dup := 1.0, 1.0 // probabilities of surviving every rule, of no rule duplicating
	for i := range t.rules {
		r := &t.rules[i]
		if !r.matches(to, f.Kind, at) {
			continue
		}
		drop *= 1 - r.Drop
		dup *= 1 - r.Duplicate
		delay += r.Delay
		if r.Jitter > 0 {
			delay += time.Duration(t.rng.Int64N(int64(r.Jitter)))
		}
	}
	if drop < 1 && t.rng.Float64() >= drop {
		t.stats.Dropped++
		t.mu.Unlock()
		return nil // lost on the way: the sender cannot tell
	}
	copies := 1
	if dup < 1 && t.rng.Float64() >= dup {
		copies = 2
		t.stats.Duplicated++
	}
	release := now.Add(delay)
	if last, ok := t.last[to]; ok && last.After(release) {
		release = last // behind earlier held frames: FIFO per peer
	}
	if !release.After(now) && t.pending[to] == 0 {
		t.mu.Unlock()
		// Nothing held for this peer and no delay: straight through.
		err := t.inner.Send(ctx, to, f)
		if err == nil && copies == 2 {
			err = t.inner.Send(ctx, to, f)
		}
		return err
	}
	if len(t.held)+copies > t.max {
		t.stats.Overflow++
		t.mu.Unlock()
		return nil
	}
	for range copies {
		t.seq++
		heap.Push(&t.held, heldFrame{at: release, seq: t.seq, to: to, f: f})
		t.stats.Delayed++
	}
	t.last[to] = release
	t.pending[to] += copies
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}

// Close stops the release goroutine, drops the held frames and closes the
// inner transport.
func (t *Transport) Close() error {
	t.mu.Lock()
	already := t.closed
	t.closed = true
	t.held = nil
	t.mu.Unlock()
	if !already {
		close(t.done)
		<-t.stopped
	}
	return t.inner.Close()
}

// release hands the held frames to the inner transport when they are due.
func (t *Transport) release() {
	defer close(t.stopped)
	try, cancel := context.WithCancel(context.Background())
	cancel() // a done context: Send never waits for room
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		now := time.Now()
		var due []heldFrame
		for len(t.held) > 0 && !t.held[0].at.After(now) {
			due = append(due, heap.Pop(&t.held).(heldFrame))
		}
		wait := time.Hour
		if len(t.held) > 0 {
			wait = t.held[0].at.Sub(now)
		}
		t.mu.Unlock()
		for _, h := range due {
			err := t.inner.Send(try, h.to, h.f)
			t.mu.Lock()
			if errors.Is(err, transport.ErrQueueFull) {
				t.stats.Overflow++
			}
			if t.pending[h.to]--; t.pending[h.to] <= 0 {
				delete(t.pending, h.to)
				delete(t.last, h.to)
			}
			t.mu.Unlock()
		}
		if len(due) > 0 {
			continue // more may have come due while sending
		}
		timer.Reset(wait)
		select {
		case <-t.done:
			return
		case <-t.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// heldFrame is a frame waiting for its release time.
type heldFrame struct {
	at  time.Time
	seq uint64 // FIFO among equal release times
	to  core.NodeID
	f   wire.Frame
}

type heldQueue []heldFrame

func (q heldQueue) Len() int { return len(q) }
func (q heldQueue) Less(i, j int) bool {
	return q[i].at.Before(q[j].at) || (q[i].at.Equal(q[j].at) && q[i].seq < q[j].seq)
}
func (q heldQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *heldQueue) Push(x any)   { *q = append(*q, x.(heldFrame)) }
func (q *heldQueue) Pop() any {
	old := *q
	h := old[len(old)-1]
	*q = old[:len(old)-1]
	return h
}
