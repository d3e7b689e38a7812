package replicatest

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/sim"
)

type mid struct {
	src, dst int
	seq      uint64
}

// checker holds the invariants of the package documentation.
type checker struct {
	c    Config
	lay  replica.Layout
	prog program

	contents  map[mid][]byte       // the first copy seen of each message
	sent      [][]uint64           // by process, by destination: sends issued
	delivered [][]uint64           // by process, by source: last delivered
	decided   map[[2]uint64][]byte // (rank, k) → value
	decisions []uint64             // by process
	failedAt  [][]int              // by process, by rank: RankFailed count
	out       []bool               // by process: some view excluded it
	crashedAt map[core.NodeID]time.Duration
	lost      int // messages lost with their sender
	log       []string
}

func newChecker(c Config, lay replica.Layout, prog program) *checker {
	ck := &checker{c: c, lay: lay, prog: prog, contents: map[mid][]byte{}, decided: map[[2]uint64][]byte{},
		crashedAt: map[core.NodeID]time.Duration{}}
	n := lay.Size()
	ck.sent = make([][]uint64, n)
	ck.delivered = make([][]uint64, n)
	ck.failedAt = make([][]int, n)
	ck.decisions = make([]uint64, n)
	ck.out = make([]bool, n)
	for p := range n {
		ck.sent[p] = make([]uint64, lay.Ranks)
		ck.delivered[p] = make([]uint64, lay.Ranks)
		ck.failedAt[p] = make([]int, lay.Ranks)
	}
	return ck
}

// Name implements sim.Checker.
func (ck *checker) Name() string { return "replication" }

func (ck *checker) logf(w *sim.World, format string, args ...any) {
	ck.log = append(ck.log, fmt.Sprintf("%v: ", w.Now())+fmt.Sprintf(format, args...))
	if len(ck.log) > 400 {
		ck.log = ck.log[len(ck.log)-300:]
	}
}

// same checks that a copy of message m has the contents of every other.
func (ck *checker) same(node core.NodeID, m mid, payload []byte, what string) error {
	if first, ok := ck.contents[m]; ok {
		if !bytes.Equal(first, payload) {
			return sim.Violatef(node, "same contents: %s %d→%d #%d is %q, another copy %q", what, m.src, m.dst, m.seq, payload, first)
		}
		return nil
	}
	ck.contents[m] = payload
	return nil
}

// gone reports whether process p crashed or was excluded from a view
// (the membership may exclude a live process, as when cascading crashes
// silence its subtree: for the job it is then dead).
func (ck *checker) gone(w *sim.World, p core.NodeID) bool { return !w.Alive(p) || ck.out[p] }

func (ck *checker) allDead(w *sim.World, r int) bool {
	for j := range ck.lay.Replicas {
		if !ck.gone(w, ck.lay.Phys(r, j)) {
			return false
		}
	}
	return true
}

// Check implements sim.Checker.
func (ck *checker) Check(w *sim.World, o sim.Obs) error {
	switch o.Kind {
	case sim.ObsCrash:
		ck.logf(w, "crash %v (rank %d)", o.Node, ck.lay.Rank(o.Node))
		ck.crashedAt[o.Node] = w.Now()
		if ck.out[o.Node] {
			return nil // already out of the views
		}
		// Every live process declares it failed after its own delay.
		for p := range ck.lay.Size() {
			q := core.NodeID(p)
			if !w.Alive(q) {
				continue
			}
			at := w.Now() + oracleDelay(ck.c.Seed, o.Node, q)
			w.At(at, func() {
				if w.Alive(q) {
					w.Node(q).Handle(declare{node: o.Node})
				}
			})
		}
		return nil
	case sim.ObsEmit:
	default:
		return nil
	}
	p := o.Node
	rank := ck.lay.Rank(p)
	switch e := o.Event.(type) {
	case core.MembersChanged:
		in := make([]bool, len(ck.out))
		for _, q := range e.Members {
			in[q] = true
		}
		for q := range in {
			if !in[q] && !ck.out[q] {
				ck.out[q] = true
				if w.Alive(core.NodeID(q)) {
					ck.logf(w, "%v excluded by %v while alive", core.NodeID(q), p)
				}
			}
		}
	case replica.Send:
		ck.sent[p][e.Dst]++
		return ck.same(p, mid{src: rank, dst: e.Dst, seq: ck.sent[p][e.Dst]}, e.Payload, "send")
	case replica.Delivered:
		if want := ck.delivered[p][e.Src] + 1; e.Seq != want {
			return sim.Violatef(p, "order, no duplicate: delivered %d→%d #%d, want #%d", e.Src, rank, e.Seq, want)
		}
		ck.delivered[p][e.Src] = e.Seq
		return ck.same(p, mid{src: e.Src, dst: rank, seq: e.Seq}, e.Payload, "delivery")
	case replica.Decided:
		if want := ck.decisions[p] + 1; e.K != want {
			return sim.Violatef(p, "decisions in order: decided %d, want %d", e.K, want)
		}
		ck.decisions[p] = e.K
		k := [2]uint64{uint64(rank), e.K}
		if v, ok := ck.decided[k]; ok && !bytes.Equal(v, e.Value) {
			return sim.Violatef(p, "same decisions: rank %d decision %d is %q here, %q at another replica", rank, e.K, e.Value, v)
		}
		ck.decided[k] = e.Value
	case replica.RankFailed:
		ck.logf(w, "%v: rank %d failed", p, e.Rank)
		if !ck.allDead(w, e.Rank) {
			return sim.Violatef(p, "RankFailed only when all replicas died: rank %d reported failed with a live replica", e.Rank)
		}
		ck.failedAt[p][e.Rank]++
		if ck.failedAt[p][e.Rank] > 1 {
			return sim.Violatef(p, "RankFailed once: rank %d reported twice", e.Rank)
		}
	case replica.Finished:
		// Every process still in the views has finished its program (its
		// Fin was needed).
		for q := range ck.lay.Size() {
			if !ck.out[q] && !appOf(w, core.NodeID(q)).done {
				return sim.Violatef(p, "Finished while %v, in the views, has not finished its program", core.NodeID(q))
			}
		}
	case replica.ReplicaLost:
		ck.logf(w, "%v: lost %v", p, e.Phys)
		if !ck.gone(w, e.Phys) {
			return sim.Violatef(p, "ReplicaLost %v while it lives in the views", e.Phys)
		}
	}
	return nil
}

// cutoff is how long after its crash what x sent still reaches q: 0–2 ms,
// drawn from the seed.
func cutoff(seed uint64, x, q core.NodeID) time.Duration {
	return time.Duration(mix(seed^0xc07, x, q)%2_000) * time.Microsecond
}

func mix(seed uint64, x, q core.NodeID) uint64 {
	h := seed ^ uint64(x)<<32 ^ uint64(q)*0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	h *= 0x94d049bb133111eb
	return h ^ h>>32
}

// oracleDelay is how long process q takes to declare x failed: 5–40 ms,
// drawn from the seed (not from the world's sources, so the plan does not
// shift the protocol's randomness).
func oracleDelay(seed uint64, x, q core.NodeID) time.Duration {
	return time.Duration(5_000+mix(seed, x, q)%35_000) * time.Microsecond
}

// end checks liveness once the run is over.
func (ck *checker) end(w *sim.World) error {
	var errs []string
	for pi := range ck.lay.Size() {
		p := core.NodeID(pi)
		if ck.gone(w, p) {
			continue
		}
		rank := ck.lay.Rank(p)
		a := appOf(w, p)
		if !a.done {
			errs = append(errs, fmt.Sprintf("%v (rank %d) stuck at step %d of %d (%+v), blocked %v, delivered %v, decisions %d",
				p, rank, a.pc, len(a.prog), a.prog[min(a.pc, len(a.prog)-1)], a.blocked, a.delivered, a.decisions))
		} else if !a.finished {
			errs = append(errs, fmt.Sprintf("%v (rank %d) finished its program but never got Finished: %s", p, rank, LayerOf(w, p).Describe()))
		}
		for s := range ck.lay.Ranks {
			dead := ck.allDead(w, s)
			if !dead && ck.delivered[p][s] != ck.prog.sends[s][rank] {
				errs = append(errs, fmt.Sprintf("%v (rank %d) delivered %d of the %d messages from rank %d", p, rank, ck.delivered[p][s], ck.prog.sends[s][rank], s))
			}
			if dead && ck.failedAt[p][s] != 1 {
				errs = append(errs, fmt.Sprintf("%v never reported rank %d failed", p, s))
			}
		}
		if st := LayerOf(w, p).Stats(); st.Backup != 0 {
			errs = append(errs, fmt.Sprintf("%v holds %d sends in its backup table at the end: %s", p, st.Backup, LayerOf(w, p).Describe()))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("liveness:\n  %s\nrecent events:\n  %s", strings.Join(errs, "\n  "), strings.Join(ck.log[max(0, len(ck.log)-40):], "\n  "))
}
