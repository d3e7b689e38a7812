package comm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// netTransport is a transport.Transport for scripted tests: Send appends the
// frame to the test's network, which delivers frames when and in the order
// the test chooses (FIFO per pair, as the real transports).
type netTransport struct {
	self core.NodeID
	net  *scriptNet
}

func (t *netTransport) Self() core.NodeID            { return t.self }
func (t *netTransport) Addr() string                 { return fmt.Sprint("script:", t.self) }
func (t *netTransport) SetPeer(core.NodeID, string)  {}
func (t *netTransport) RemovePeer(core.NodeID)       {}
func (t *netTransport) SetHandler(transport.Handler) {}
func (t *netTransport) Close() error                 { return nil }
func (t *netTransport) Send(_ context.Context, to core.NodeID, f wire.Frame) error {
	f.Src, f.Dst = t.self, to
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if !t.net.dead[t.self] {
		k := [2]core.NodeID{t.self, to}
		t.net.links[k] = append(t.net.links[k], f)
		t.net.sent[t.self]++
	}
	return nil
}

// scriptNet holds the frames in flight between scripted sessions.
type scriptNet struct {
	mu    sync.Mutex
	links map[[2]core.NodeID][]wire.Frame
	dead  map[core.NodeID]bool
	sent  map[core.NodeID]int
	slow  map[[2]core.NodeID]bool
}

// pick removes and returns the head frame of a random non-empty link.
func (n *scriptNet) pick(rng *rand.Rand) (wire.Frame, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var keys [][2]core.NodeID
	for k, fs := range n.links {
		if len(fs) > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return wire.Frame{}, false
	}
	slices.SortFunc(keys, func(a, b [2]core.NodeID) int {
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		return int(a[1]) - int(b[1])
	})
	// Links are slow or fast, as drawn from the seed: a slow link's frames
	// wait long, so that stale messages arrive late.
	var k [2]core.NodeID
	for {
		k = keys[rng.IntN(len(keys))]
		if w, ok := n.slow[k]; !ok {
			n.slow[k] = rng.IntN(4) == 0
		} else if !w || rng.IntN(30) == 0 {
			break
		}
	}
	f := n.links[k][0]
	n.links[k] = n.links[k][1:]
	return f, true
}

// crash kills node x: frames to it are dropped, and of those it sent, a
// random prefix per link stays in flight (the rest is lost with it).
func (n *scriptNet) crash(x core.NodeID, rng *rand.Rand) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dead[x] = true
	for k, fs := range n.links {
		switch {
		case k[1] == x:
			delete(n.links, k)
		case k[0] == x:
			n.links[k] = fs[:rng.IntN(len(fs)+1)]
		}
	}
}

// AgreeSchedule checks the fault-tolerant agreement (Agree) under one
// random schedule drawn from seed: 2–9 in-process sessions over a scripted
// network that delivers frames in a random order (FIFO per pair, some links
// slow), coordinators and other ranks crashing in every phase, each
// survivor learning the crashes in order after its own delay, some calling
// Agree late. It returns an error unless every survivor decided, every
// process that decided (crashed ones included: agreement is uniform)
// decided the same value, the decided failed set holds only crashed ranks,
// and the value is the AND of the flags outside it. It is the randomized
// test of package comm, exported so that a command can run it over many
// seeds (`cohort sim swarm --protocol agree`); calls may run in parallel.
func AgreeSchedule(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0xa9ee))
	n := 2 + rng.IntN(8)
	net := &scriptNet{links: map[[2]core.NodeID][]wire.Frame{}, dead: map[core.NodeID]bool{}, sent: map[core.NodeID]int{}, slow: map[[2]core.NodeID]bool{}}
	ss := make([]*Session, n)
	for r := range n {
		ss[r] = newSession(&netTransport{self: core.NodeID(r), net: net}, n, options{})
	}
	flags := make([]int64, n)
	for r := range flags {
		flags[r] = int64(rng.Uint32()) | 1<<40
	}
	// Crashes: the first coordinators most of the time, plus a random
	// rank; at least one process survives.
	var victims []int
	for r := 0; r < n-1 && rng.IntN(3) > 0; r++ {
		victims = append(victims, r)
	}
	if x := rng.IntN(n); rng.IntN(2) == 0 && !slices.Contains(victims, x) && len(victims) < n-1 {
		victims = append(victims, x)
	}
	// A victim crashes once it has sent a random number of frames (so
	// coordinators die in every phase: gathering, accepting, deciding), or
	// at a random step if it sends fewer.
	crashAt := make(map[int]int)   // victim → step
	crashSent := make(map[int]int) // victim → frames sent
	for _, v := range victims {
		crashAt[v] = rng.IntN(40 * n)
		crashSent[v] = rng.IntN(3 * n)
	}
	// Each survivor learns the crashes in the order they happen, each after
	// its own delay.
	type notice struct{ at, rank, victim int }
	var notices []notice
	var crashed []int // in crash order
	started := make([]bool, n)
	insts := make([]*agreeInst, n)
	startAt := make([]int, n)
	for r := range startAt {
		startAt[r] = rng.IntN(6 * n)
	}
	learnt := make([]int, n) // how many of crashed each rank knows
	for step := 0; ; step++ {
		progress := false
		for r := range n {
			if !started[r] && step >= startAt[r] && !net.dead[core.NodeID(r)] {
				in, err := ss[r].World().startAgree(flags[r])
				if err != nil {
					return err
				}
				started[r], insts[r], progress = true, in, true
			}
		}
		for _, v := range victims {
			net.mu.Lock()
			sent := net.sent[core.NodeID(v)]
			net.mu.Unlock()
			if !net.dead[core.NodeID(v)] && (crashAt[v] <= step || crashSent[v] <= sent) {
				net.crash(core.NodeID(v), rng)
				crashed = append(crashed, v)
				for r := range n {
					notices = append(notices, notice{at: step + 1 + rng.IntN(4*n), rank: r, victim: v})
				}
				progress = true
			}
		}
		// Deliver due notices in crash order per rank.
		for r := range n {
			for learnt[r] < len(crashed) {
				v := crashed[learnt[r]]
				i := slices.IndexFunc(notices, func(x notice) bool { return x.rank == r && x.victim == v })
				if notices[i].at > step {
					break
				}
				learnt[r]++
				progress = true
				if !net.dead[core.NodeID(r)] {
					ss[r].fail([]int{v}, uint64(learnt[r]+1))
				}
			}
		}
		if f, ok := net.pick(rng); ok {
			progress = true
			if !net.dead[f.Dst] {
				ss[f.Dst].dataPath(f)
			}
		}
		pending := false
		for r := range n {
			if !started[r] && !net.dead[core.NodeID(r)] || learnt[r] < len(victims) {
				pending = true
			}
		}
		if !progress && !pending {
			break
		}
		if step > 100000 {
			return fmt.Errorf("no quiescence after %d steps", step)
		}
	}
	// Every survivor decided, and every process that decided (crashed ones
	// included: agreement is uniform) decided the same value.
	var dec *agreeValue
	for r := range n {
		ss[r].mu.Lock()
		in := ss[r].World().st.agree[1]
		ok := in != nil && in.decided
		var v agreeValue
		if ok {
			v = in.dec
		}
		ss[r].mu.Unlock()
		if !ok {
			if net.dead[core.NodeID(r)] {
				continue
			}
			return fmt.Errorf("n=%d victims %v: rank %d did not decide", n, victims, r)
		}
		if dec == nil {
			dec = &v
		} else if v.Flag != dec.Flag || !slices.Equal(v.Failed, dec.Failed) {
			return fmt.Errorf("n=%d victims %v: rank %d decided %+v, another %+v", n, victims, r, v, *dec)
		}
	}
	want := int64(-1)
	for r := range n {
		if !slices.Contains(dec.Failed, r) {
			want &= flags[r]
		} else if !slices.Contains(victims, r) {
			return fmt.Errorf("n=%d victims %v: decided failed set %v holds a live rank", n, victims, dec.Failed)
		}
	}
	if dec.Flag != want {
		return fmt.Errorf("n=%d victims %v: decided %x, the AND outside %v is %x", n, victims, dec.Flag, dec.Failed, want)
	}
	return nil
}
