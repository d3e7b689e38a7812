package coll

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/comm/internal/coll/colltest"
)

// opCase is an operator with a generator of inputs for which its results are
// exact whatever the combination order (small integers for float sums, ±1
// and ±2 for float products).
type opCase[T Elem] struct {
	op  Op[T]
	gen func(*rand.Rand) T
}

// suite checks every collective, with every algorithm it can choose, against
// the naive reference for one element type: trials random sizes 1–33 with
// every root, random counts (including 0 and non-multiples of the size) and
// random operators from ops.
func suite[T Elem](t *testing.T, trials int, gen func(*rand.Rand) T, ops []opCase[T]) {
	rng := newRNG(t)
	for trial := 0; trial < trials; trial++ {
		p := 1 + rng.IntN(33)
		if trial == 0 {
			p = 1
		}
		n := randCount(rng, p)
		oc := ops[rng.IntN(len(ops))]
		name := fmt.Sprintf("trial %d: p=%d n=%d op=%s", trial, p, n, oc.op.Name())
		checkBcast(t, rng, name, p, n, gen)
		checkReduce(t, rng, name, p, n, oc)
		checkAllreduce(t, rng, name, p, n, oc)
		checkGatherScatter(t, rng, name, p, gen)
		checkAllgather(t, rng, name, p, gen)
		checkAlltoall(t, rng, name, p, gen)
		checkReduceScatter(t, rng, name, p, oc)
		checkScan(t, rng, name, p, n, oc)
	}
}

func checkBcast[T Elem](t *testing.T, rng *rand.Rand, name string, p, n int, gen func(*rand.Rand) T) {
	// Every root, each with one of the algorithms in turn (the entry point,
	// -1, included), so that the cost stays linear in p.
	algs := []bcastAlg{bcastBinomial, bcastScatterDoubling, bcastScatterRing, -1}
	off := rng.IntN(len(algs))
	for root := 0; root < p; root++ {
		alg := algs[(root+off)%len(algs)]
		want := randVec(rng, n, gen)
		out := make([][]T, p)
		what := fmt.Sprintf("%s: bcast alg %d root %d", name, alg, root)
		runOK(t, p, what, func(ctx context.Context, ep Transport) error {
			buf := make([]T, n)
			if ep.Rank() == root {
				copy(buf, want)
			}
			out[ep.Rank()] = buf
			if alg < 0 {
				return Bcast(ctx, ep, buf, root)
			}
			c := begin(ctx, ep, "bcast")
			return c.done(bcastBytes(c, AsBytes(buf), root, alg))
		})
		for r := range out {
			equal(t, what, r, out[r], want)
		}
	}
}

func checkReduce[T Elem](t *testing.T, rng *rand.Rand, name string, p, n int, oc opCase[T]) {
	algs := []reduceAlg{reduceBinomial, reduceRabenseifner, -1}
	off := rng.IntN(len(algs))
	for root := 0; root < p; root++ {
		alg := algs[(root+off)%len(algs)]
		data := make([][]T, p)
		for r := range data {
			data[r] = randVec(rng, n, oc.gen)
		}
		want := refReduce(data, 0, p, oc.op)
		var got []T
		what := fmt.Sprintf("%s: reduce alg %d root %d", name, alg, root)
		runOK(t, p, what, func(ctx context.Context, ep Transport) error {
			send := slices.Clone(data[ep.Rank()])
			var recv []T
			if ep.Rank() == root {
				recv = make([]T, n)
				got = recv
			}
			defer func() { equal(t, what+" (send modified)", ep.Rank(), send, data[ep.Rank()]) }()
			if alg < 0 {
				return Reduce(ctx, ep, send, recv, oc.op, root)
			}
			c := begin(ctx, ep, "reduce")
			return c.done(reduce(c, send, recv, oc.op, root, alg))
		})
		equal(t, what, root, got, want)
	}
}

func checkAllreduce[T Elem](t *testing.T, rng *rand.Rand, name string, p, n int, oc opCase[T]) {
	for _, alg := range []allreduceAlg{allreduceDoubling, allreduceRabenseifner, allreduceRing, allreduceFlat, -1} {
		// In place, and from a separate input into a buffer that holds
		// other values (the fused first step of Rabenseifner's must not
		// read it, nor write the input).
		for _, inPlace := range []bool{true, false} {
			data := make([][]T, p)
			for r := range data {
				data[r] = randVec(rng, n, oc.gen)
			}
			want := refReduce(data, 0, p, oc.op)
			out := make([][]T, p)
			what := fmt.Sprintf("%s: allreduce alg %d in place %v", name, alg, inPlace)
			runOK(t, p, what, func(ctx context.Context, ep Transport) error {
				send := slices.Clone(data[ep.Rank()])
				buf := send
				if !inPlace {
					buf = randVec(rng2(ep.Rank()), n, oc.gen)
					defer func() { equal(t, what+" (send modified)", ep.Rank(), send, data[ep.Rank()]) }()
				}
				out[ep.Rank()] = buf
				if alg < 0 {
					return Allreduce(ctx, ep, send, buf, oc.op)
				}
				c := begin(ctx, ep, "allreduce")
				src := send
				if inPlace {
					src = nil
				}
				return c.done(allreduce(c, buf, src, oc.op, alg))
			})
			for r := range out {
				equal(t, what, r, out[r], want)
			}
		}
	}
}

// rng2 is a generator of its own for a rank's goroutine (the test's is
// not safe for concurrent use); its values only fill buffers that the
// result must overwrite.
func rng2(rank int) *rand.Rand { return rand.New(rand.NewPCG(uint64(rank), 99)) }

func checkGatherScatter[T Elem](t *testing.T, rng *rand.Rand, name string, p int, gen func(*rand.Rand) T) {
	k := randCount(rng, p) % 50
	counts := randCounts(rng, p)
	displs := make([]int, p+1)
	for i, c := range counts {
		displs[i+1] = displs[i] + c
	}
	// Every root, each with one of Gather, Scatter, Gatherv, Scatterv in
	// turn, so that the cost stays linear in p.
	off := rng.IntN(4)
	for root := 0; root < p; root++ {
		// Gather and Scatter: fixed block k; Gatherv and Scatterv: counts
		// per rank, some zero.
		data := make([][]T, p)
		var all []T
		for r := range data {
			data[r] = randVec(rng, k, gen)
			all = append(all, data[r]...)
		}
		allv := randVec(rng, displs[p], gen)
		out := make([][]T, p)
		var got []T
		switch (root + off) % 4 {
		case 0:
			what := fmt.Sprintf("%s: gather k=%d root %d", name, k, root)
			runOK(t, p, what, func(ctx context.Context, ep Transport) error {
				var recv []T
				if ep.Rank() == root {
					recv = make([]T, p*k)
					got = recv
				}
				return Gather(ctx, ep, data[ep.Rank()], recv, root)
			})
			equal(t, what, root, got, all)
		case 1:
			what := fmt.Sprintf("%s: scatter k=%d root %d", name, k, root)
			runOK(t, p, what, func(ctx context.Context, ep Transport) error {
				var send []T
				if ep.Rank() == root {
					send = all
				}
				out[ep.Rank()] = make([]T, k)
				return Scatter(ctx, ep, send, out[ep.Rank()], root)
			})
			for r := range out {
				equal(t, what, r, out[r], data[r])
			}
		case 2:
			what := fmt.Sprintf("%s: gatherv counts=%v root %d", name, counts, root)
			runOK(t, p, what, func(ctx context.Context, ep Transport) error {
				r := ep.Rank()
				var recv []T
				var cs []int
				if r == root {
					recv = make([]T, displs[p])
					got = recv
					cs = counts
				}
				return Gatherv(ctx, ep, allv[displs[r]:displs[r+1]], recv, cs, root)
			})
			equal(t, what, root, got, allv)
		case 3:
			what := fmt.Sprintf("%s: scatterv counts=%v root %d", name, counts, root)
			runOK(t, p, what, func(ctx context.Context, ep Transport) error {
				r := ep.Rank()
				var send []T
				var cs []int
				if r == root {
					send, cs = allv, counts
				}
				out[r] = make([]T, counts[r])
				return Scatterv(ctx, ep, send, cs, out[r], root)
			})
			for r := range out {
				equal(t, what, r, out[r], allv[displs[r]:displs[r+1]])
			}
		}
	}
}

func checkAllgather[T Elem](t *testing.T, rng *rand.Rand, name string, p int, gen func(*rand.Rand) T) {
	for _, alg := range []allgatherAlg{allgatherDoubling, allgatherBruck, allgatherRing, -1} {
		for _, variable := range []bool{false, true} {
			counts := randCounts(rng, p)
			if !variable {
				k := randCount(rng, p) % 50
				for i := range counts {
					counts[i] = k
				}
			}
			displs := make([]int, p+1)
			for i, c := range counts {
				displs[i+1] = displs[i] + c
			}
			all := randVec(rng, displs[p], gen)
			out := make([][]T, p)
			what := fmt.Sprintf("%s: allgather alg %d counts %v", name, alg, counts)
			runOK(t, p, what, func(ctx context.Context, ep Transport) error {
				r := ep.Rank()
				send := all[displs[r]:displs[r+1]]
				out[r] = make([]T, displs[p])
				switch {
				case alg < 0 && variable:
					return Allgatherv(ctx, ep, send, out[r], counts)
				case alg < 0:
					return Allgather(ctx, ep, send, out[r])
				}
				c := begin(ctx, ep, "allgather")
				copy(out[r][displs[r]:], send)
				bd := make([]int, p+1)
				for i := range bd {
					bd[i] = displs[i] * SizeOf[T]()
				}
				return c.done(allgatherBytes(c, AsBytes(out[r]), bd, alg))
			})
			for r := range out {
				equal(t, what, r, out[r], all)
			}
		}
	}
}

func checkAlltoall[T Elem](t *testing.T, rng *rand.Rand, name string, p int, gen func(*rand.Rand) T) {
	// m[i][j]: the block rank i sends rank j.
	for _, alg := range []alltoallAlg{alltoallPairwise, alltoallBruck, -1, -2} {
		variable := alg == -2
		k := randCount(rng, p) % 20
		m := make([][][]T, p)
		for i := range m {
			m[i] = make([][]T, p)
			for j := range m[i] {
				n := k
				if variable {
					n = rng.IntN(6)
				}
				m[i][j] = randVec(rng, n, gen)
			}
		}
		out := make([][]T, p)
		what := fmt.Sprintf("%s: alltoall alg %d k=%d", name, alg, k)
		runOK(t, p, what, func(ctx context.Context, ep Transport) error {
			r := ep.Rank()
			var send []T
			sc, rc := make([]int, p), make([]int, p)
			for j := 0; j < p; j++ {
				send = append(send, m[r][j]...)
				sc[j], rc[j] = len(m[r][j]), len(m[j][r])
			}
			out[r] = make([]T, sum(rc))
			switch alg {
			case -2:
				return Alltoallv(ctx, ep, send, sc, out[r], rc)
			case -1:
				return Alltoall(ctx, ep, send, out[r])
			}
			c := begin(ctx, ep, "alltoall")
			return c.done(alltoallBytes(c, AsBytes(send), AsBytes(out[r]), k*SizeOf[T](), alg))
		})
		for r := range out {
			var want []T
			for i := 0; i < p; i++ {
				want = append(want, m[i][r]...)
			}
			equal(t, what, r, out[r], want)
		}
	}
}

func checkReduceScatter[T Elem](t *testing.T, rng *rand.Rand, name string, p int, oc opCase[T]) {
	for _, alg := range []reduceScatterAlg{reduceScatterAllreduce, reduceScatterPairwise, -1, -2} {
		counts := randCounts(rng, p)
		if alg == -2 { // ReduceScatterBlock
			k := randCount(rng, p) % 30
			for i := range counts {
				counts[i] = k
			}
		}
		displs := make([]int, p+1)
		for i, c := range counts {
			displs[i+1] = displs[i] + c
		}
		data := make([][]T, p)
		for r := range data {
			data[r] = randVec(rng, displs[p], oc.gen)
		}
		want := refReduce(data, 0, p, oc.op)
		out := make([][]T, p)
		what := fmt.Sprintf("%s: reducescatter alg %d counts %v", name, alg, counts)
		runOK(t, p, what, func(ctx context.Context, ep Transport) error {
			r := ep.Rank()
			out[r] = make([]T, counts[r])
			switch alg {
			case -1:
				return ReduceScatter(ctx, ep, data[r], out[r], counts, oc.op)
			case -2:
				return ReduceScatterBlock(ctx, ep, data[r], out[r], oc.op)
			}
			c := begin(ctx, ep, "reducescatter")
			return c.done(reduceScatter(c, data[r], out[r], displs, oc.op, alg))
		})
		for r := range out {
			equal(t, what, r, out[r], want[displs[r]:displs[r+1]])
		}
	}
}

func checkScan[T Elem](t *testing.T, rng *rand.Rand, name string, p, n int, oc opCase[T]) {
	for _, inclusive := range []bool{true, false} {
		data := make([][]T, p)
		for r := range data {
			data[r] = randVec(rng, n, oc.gen)
		}
		sentinel := randVec(rng, n, oc.gen)
		out := make([][]T, p)
		what := fmt.Sprintf("%s: scan inclusive=%v", name, inclusive)
		runOK(t, p, what, func(ctx context.Context, ep Transport) error {
			r := ep.Rank()
			out[r] = slices.Clone(sentinel)
			if inclusive {
				return Scan(ctx, ep, data[r], out[r], oc.op)
			}
			return Exscan(ctx, ep, data[r], out[r], oc.op)
		})
		for r := range out {
			var want []T
			switch {
			case inclusive:
				want = refReduce(data, 0, r+1, oc.op)
			case r == 0:
				want = sentinel // Exscan leaves rank 0's recv alone
			default:
				want = refReduce(data, 0, r, oc.op)
			}
			equal(t, what, r, out[r], want)
		}
	}
}

func smallInt[T Elem](lo, hi int) func(*rand.Rand) T {
	return func(rng *rand.Rand) T { return T(lo + rng.IntN(hi-lo+1)) }
}

func unitOrTwo[T Elem](rng *rand.Rand) T { return T([]int{-2, -1, 1, 2}[rng.IntN(4)]) }

// The randomized suites: one per element type (P2P-MPI §3.3, Table 1: every
// collective of the table, and the size-aware algorithms that replace its
// entries, against a naive reference).
func TestCollectivesInt32(t *testing.T) {
	g := smallInt[int32](-1000, 1000)
	suite(t, 6, g, []opCase[int32]{
		{Sum[int32](), g}, {Prod[int32](), g}, {Min[int32](), g}, {Max[int32](), g},
		{BAnd[int32](), g}, {BOr[int32](), g}, {BXor[int32](), g},
		{concat(), func(rng *rand.Rand) int32 { return 1<<24 | rng.Int32N(16) }},
	})
}

func TestCollectivesInt64(t *testing.T) {
	g := func(rng *rand.Rand) int64 { return rng.Int64() }
	suite(t, 6, g, []opCase[int64]{{Sum[int64](), g}, {Max[int64](), g}, {BXor[int64](), g}, {matMul2x2(), g}})
}

func TestCollectivesUint8(t *testing.T) {
	g := smallInt[uint8](0, 255)
	suite(t, 3, g, []opCase[uint8]{{Sum[uint8](), g}, {Min[uint8](), g}, {BOr[uint8](), g}})
}

func TestCollectivesFloat32(t *testing.T) {
	g := smallInt[float32](-8, 8)
	suite(t, 3, g, []opCase[float32]{{Sum[float32](), g}, {Max[float32](), g}, {Prod[float32](), unitOrTwo[float32]}})
}

func TestCollectivesFloat64(t *testing.T) {
	g := smallInt[float64](-8, 8)
	suite(t, 4, g, []opCase[float64]{{Sum[float64](), g}, {Min[float64](), g}, {Prod[float64](), unitOrTwo[float64]}})
}

// TestCollectivesRendezvous runs a suite over a transport whose Send waits
// for the receiver: no algorithm may rely on buffered sends (both sides of
// every exchange send and receive at once).
func TestCollectivesRendezvous(t *testing.T) {
	newNet = colltest.NewSync
	defer func() { newNet = colltest.New }()
	g := smallInt[int64](-100, 100)
	suite(t, 3, g, []opCase[int64]{{Sum[int64](), g}, {matMul2x2(), g}})
}

// TestCollectivesUnpaced runs a suite over a transport whose peers may
// answer a step before this rank sent it (a replicated rank's): the
// allgather's receives are posted only after their step's exchange.
func TestCollectivesUnpaced(t *testing.T) {
	newNet = colltest.NewUnpaced
	defer func() { newNet = colltest.New }()
	g := smallInt[float64](-8, 8)
	suite(t, 4, g, []opCase[float64]{{Sum[float64](), g}, {Max[float64](), g}})
}

// TestCollectivesPlainTransport runs a suite over a Transport without the
// optional interfaces: exchanges send from a second goroutine and messages
// arrive through Recv (the fallback paths).
func TestCollectivesPlainTransport(t *testing.T) {
	plainTransport = true
	defer func() { plainTransport = false }()
	g := smallInt[float64](-8, 8)
	suite(t, 3, g, []opCase[float64]{{Sum[float64](), g}, {Max[float64](), g}})
}
