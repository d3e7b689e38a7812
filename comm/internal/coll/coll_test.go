package coll

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm/internal/coll/colltest"
)

var _ Preposter = (*colltest.Endpoint)(nil)

var seedFlag = flag.Uint64("coll.seed", 0, "seed of the randomized collective tests (0: from the clock)")

// newRNG returns the test's random source and logs how to replay it.
func newRNG(t testing.TB) *rand.Rand {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./comm/internal/coll -run '^%s$' -coll.seed=%d)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, 0x636f6c6c))
}

// safetyNet bounds a run: a collective that needs it has hung, and the test
// fails (it is never how a run is expected to end).
const safetyNet = 20 * time.Second

// plainTransport makes run hide the Endpoints' optional interfaces
// (EagerSender, RecvIntoer), so that coll takes its fallback paths.
var plainTransport bool

// plain has only Transport's methods.
type plain struct{ t Transport }

func (p plain) Rank() int       { return p.t.Rank() }
func (p plain) Size() int       { return p.t.Size() }
func (p plain) NextSeq() uint64 { return p.t.NextSeq() }
func (p plain) Send(ctx context.Context, to, tag int, data []byte) error {
	return p.t.Send(ctx, to, tag, data)
}
func (p plain) Recv(ctx context.Context, from, tag int) ([]byte, error) {
	return p.t.Recv(ctx, from, tag)
}

// newNet makes the communicators of run (a test may switch it to
// colltest.NewSync; tests do not run in parallel).
var newNet = colltest.New

// run runs fn on every rank of a fresh p-rank in-memory communicator and
// fails the test if any rank hit the safety net or left messages unreceived.
func run(t *testing.T, p int, what string, fn func(ctx context.Context, ep Transport) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	net, err := newNet(p)
	if err != nil {
		t.Fatal(err)
	}
	errs := net.Run(func(ep *colltest.Endpoint) error {
		if plainTransport {
			return fn(ctx, plain{ep})
		}
		return fn(ctx, ep)
	})
	for r, err := range errs {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: rank %d hung until the safety net (%v): %v", what, r, safetyNet, err)
		}
	}
	for r := 0; r < p; r++ {
		if n := net.Endpoint(r).Pending(); n != 0 && errs[r] == nil {
			t.Errorf("%s: rank %d has %d unreceived messages after the collective", what, r, n)
		}
		if pending, written := net.Endpoint(r).Unreclaimed(); pending != 0 || written != 0 {
			t.Errorf("%s: rank %d left %d lent sends unreclaimed and changed %d before reclaiming them", what, r, pending, written)
		}
	}
	return errs
}

// runOK is run that also requires every rank to succeed.
func runOK(t *testing.T, p int, what string, fn func(ctx context.Context, ep Transport) error) {
	t.Helper()
	for r, err := range run(t, p, what, fn) {
		if err != nil {
			t.Fatalf("%s: rank %d: %v", what, r, err)
		}
	}
}

// randCount returns an element count: often 0, 1 or around p and its
// multiples (± 1), sometimes up to a few thousand.
func randCount(rng *rand.Rand, p int) int {
	switch rng.IntN(6) {
	case 0:
		return rng.IntN(2)
	case 1:
		return max(0, p*(1+rng.IntN(3))+rng.IntN(3)-1)
	case 2:
		return rng.IntN(3000)
	default:
		return rng.IntN(40)
	}
}

func randVec[T Elem](rng *rand.Rand, n int, gen func(*rand.Rand) T) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = gen(rng)
	}
	return v
}

func randCounts(rng *rand.Rand, p int) []int {
	counts := make([]int, p)
	for i := range counts {
		if rng.IntN(4) != 0 {
			counts[i] = rng.IntN(12)
		}
	}
	return counts
}

func sum(counts []int) int {
	s := 0
	for _, c := range counts {
		s += c
	}
	return s
}

// refReduce is the naive rank-order reduction x₀ ⊕ x₁ ⊕ … of data[lo:hi].
func refReduce[T Elem](data [][]T, lo, hi int, op Op[T]) []T {
	acc := slices.Clone(data[lo])
	for r := lo + 1; r < hi; r++ {
		op.fn(acc, slices.Clone(data[r]))
	}
	return acc
}

func equal[T Elem](t *testing.T, what string, rank int, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: rank %d got %v, want %v", what, rank, clip(got), clip(want))
	}
}

func clip[T any](s []T) any {
	if len(s) > 16 {
		return fmt.Sprintf("%v… (%d elements)", s[:16], len(s))
	}
	return s
}

// matMul2x2 is a non-commutative, associative, element-wise operator: each
// element packs a 2×2 matrix of 16-bit entries (int64) multiplied mod 2¹⁶.
func matMul2x2() Op[int64] {
	return NewOp("matmul", func(inout, in []int64) {
		for i := range inout {
			a, b := uint64(inout[i]), uint64(in[i])
			a0, a1, a2, a3 := a&0xffff, a>>16&0xffff, a>>32&0xffff, a>>48
			b0, b1, b2, b3 := b&0xffff, b>>16&0xffff, b>>32&0xffff, b>>48
			c0 := (a0*b0 + a1*b2) & 0xffff
			c1 := (a0*b1 + a1*b3) & 0xffff
			c2 := (a2*b0 + a3*b2) & 0xffff
			c3 := (a2*b1 + a3*b3) & 0xffff
			inout[i] = int64(c0 | c1<<16 | c2<<32 | c3<<48)
		}
	}, false)
}

// concat is a non-commutative, associative, element-wise operator on int32:
// an element is a string of base-16 digits, its length in the top 5 bits
// (saturating at 6, the digits it keeps: the last 6, in the low 24 bits).
func concat() Op[int32] {
	return NewOp("concat", func(inout, in []int32) {
		for i := range inout {
			la, lb := inout[i]>>24, in[i]>>24
			digits := (inout[i]&0xffffff)<<(4*lb) | in[i]&0xffffff
			inout[i] = min(la+lb, 6)<<24 | digits&0xffffff
		}
	}, false)
}

func TestNonCommutativeOpsAreOrderSensitive(t *testing.T) {
	// The operators of the randomized tests must detect a swapped order, or
	// the rank-order checks could not fail.
	m := matMul2x2()
	a, b := []int64{1 | 2<<16 | 3<<32 | 4<<48}, []int64{5 | 6<<16 | 7<<32 | 8<<48}
	ab, ba := slices.Clone(a), slices.Clone(b)
	m.fn(ab, slices.Clone(b))
	m.fn(ba, slices.Clone(a))
	if ab[0] == ba[0] || ab[0] != int64(19|22<<16|43<<32|50<<48) {
		t.Fatalf("matmul: ab = %x, ba = %x", ab[0], ba[0])
	}
	c := concat()
	x, y := []int32{1<<24 | 0x3}, []int32{2<<24 | 0x45}
	c.fn(x, y)
	if x[0] != 3<<24|0x345 {
		t.Fatalf("concat(3, 45) = %x, want 3000345", x[0])
	}
}
