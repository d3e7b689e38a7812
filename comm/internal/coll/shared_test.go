package coll

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memSegment is a Segment in this process's memory: p ranks' views of
// one set of slots and words, as comm maps one segment into p processes.
type memSegment struct {
	slot     int
	inputs   [2][][]byte
	outputs  [2][]byte
	progress []atomic.Uint64
	bytes    [][2]atomic.Uint64
	small    [][2][LineBytes / 8]uint64 // aligned as a segment's line
}

func newMemSegment(p, slot int) *memSegment {
	m := &memSegment{slot: slot, progress: make([]atomic.Uint64, p), bytes: make([][2]atomic.Uint64, p),
		small: make([][2][LineBytes / 8]uint64, p)}
	for b := range 2 {
		m.outputs[b] = make([]byte, slot)
		for range p {
			m.inputs[b] = append(m.inputs[b], make([]byte, slot))
		}
	}
	return m
}

// memView is rank's view of a memSegment.
type memView struct {
	*memSegment
	rank  int
	round uint64
}

func (v *memView) SlotBytes() int            { return v.slot }
func (v *memView) Input(r, b int) []byte     { return v.inputs[b][r] }
func (v *memView) Small(r, b int) []byte     { return AsBytes(v.small[r][b][:]) }
func (v *memView) Output(b int) []byte       { return v.outputs[b] }
func (v *memView) Bytes(r int, k uint64) int { return int(v.bytes[r][k%2].Load()) }

func (v *memView) Begin() uint64 {
	v.round++
	return v.round - 1
}

func (v *memView) Publish(w uint64, bytes int) {
	v.bytes[v.rank][(w-1)/2%2].Store(uint64(bytes))
	v.progress[v.rank].Store(w)
}

func (v *memView) Await(ctx context.Context, w uint64) error {
	for r := range v.progress {
		for v.progress[r].Load() < w {
			if err := ctx.Err(); err != nil {
				return err
			}
			runtime.Gosched()
		}
	}
	return nil
}

// runShared runs f on p ranks sharing a memSegment with slots of slot
// bytes, and returns their errors.
func runShared(t *testing.T, p, slot int, f func(ctx context.Context, seg Segment, rank int) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := newMemSegment(p, slot)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() { errs[r] = f(ctx, &memView{memSegment: m, rank: r}, r) })
	}
	wg.Wait()
	for r, err := range errs {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("rank %d hung", r)
		}
	}
	return errs
}

// AllreduceShared combines every element in rank order, whatever the
// pieces (small slots make several rounds, split or not), so floats of
// any magnitude come out as the naive reduction's, on every rank.
func TestAllreduceSharedRankOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	input := func(rank, n int) []float64 {
		rng := rand.New(rand.NewPCG(seed, uint64(rank)))
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * 1e9
		}
		return v
	}
	for _, p := range []int{2, 3, 5} {
		for _, slot := range []int{64, SharedSplitBytes, 4 * SharedSplitBytes} {
			// 1281 float64 on 5 ranks: 2,049.6 bytes a rank, 32 lines
			// and a part.
			for _, n := range []int{0, 1, 2, 3, 9, 1023, 1024, 1281, 5000} {
				want := input(0, n)
				for r := 1; r < p; r++ {
					for i, x := range input(r, n) {
						want[i] += x
					}
				}
				errs := runShared(t, p, slot, func(ctx context.Context, seg Segment, rank int) error {
					for range 3 { // rounds reuse both buffers
						got := input(rank, n)
						if err := AllreduceShared(ctx, seg, rank, p, got, got, Sum[float64]()); err != nil {
							return err
						}
						if !slices.Equal(got, want) {
							return fmt.Errorf("p=%d slot=%d n=%d: got %v…, want %v…", p, slot, n, got[:min(n, 3)], want[:min(n, 3)])
						}
					}
					return nil
				})
				for r, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			}
		}
	}
}

// Ranks that pass different lengths all fail with ErrCount, none hangs,
// and the next Allreduce on the segment works.
func TestAllreduceSharedCountMismatch(t *testing.T) {
	const p = 4
	for _, lens := range [][]int{{8, 8, 9, 8}, {1, 5000, 1, 1}, {3000, 3000, 3000, 2999}} {
		errs := runShared(t, p, 8*SharedSplitBytes, func(ctx context.Context, seg Segment, rank int) error {
			v := make([]int64, lens[rank])
			err := AllreduceShared(ctx, seg, rank, p, v, v, Sum[int64]())
			if !errors.Is(err, ErrCount) {
				return fmt.Errorf("lengths %v: %v, want ErrCount", lens, err)
			}
			one := []int64{1}
			if err := AllreduceShared(ctx, seg, rank, p, one, one, Sum[int64]()); err != nil || one[0] != p {
				return fmt.Errorf("allreduce after a mismatch: %v %v", one, err)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	}
}

// BcastShared hands root's vector to every rank, over several rounds.
func TestBcastShared(t *testing.T) {
	const p, slot = 3, 64
	for _, n := range []int{0, 1, 8, 9, 100} {
		for root := range p {
			errs := runShared(t, p, slot, func(ctx context.Context, seg Segment, rank int) error {
				for round := range 3 {
					buf := make([]int64, n)
					if rank == root {
						for i := range buf {
							buf[i] = int64(i*7 + round)
						}
					}
					if err := BcastShared(ctx, seg, rank, p, buf, root); err != nil {
						return err
					}
					for i, x := range buf {
						if x != int64(i*7+round) {
							return fmt.Errorf("n=%d root=%d: element %d = %d", n, root, i, x)
						}
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		}
	}
}

// A piece whose share per rank is whole cache lines but for a remainder
// (2,081 int32 on 5 ranks: 1,664.8 bytes each) is reduced to its last
// element.
func TestAllreduceSharedRemainder(t *testing.T) {
	const p, n = 5, 2081
	errs := runShared(t, p, 4*SharedSplitBytes, func(ctx context.Context, seg Segment, rank int) error {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(i + rank)
		}
		if err := AllreduceShared(ctx, seg, rank, p, v, v, Sum[int32]()); err != nil {
			return err
		}
		for i, x := range v {
			if want := int32(p*i + p*(p-1)/2); x != want {
				return fmt.Errorf("element %d = %d, want %d", i, x, want)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// No rank leaves BarrierShared before every rank has entered it.
func TestBarrierShared(t *testing.T) {
	const p, rounds = 4, 50
	var entered atomic.Int64
	errs := runShared(t, p, 64, func(ctx context.Context, seg Segment, rank int) error {
		for i := range rounds {
			entered.Add(1)
			if err := BarrierShared(ctx, seg); err != nil {
				return err
			}
			if got := entered.Load(); got < int64(p*(i+1)) {
				return fmt.Errorf("barrier %d left with %d entries, want at least %d", i, got, p*(i+1))
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
