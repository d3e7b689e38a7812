package coll

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSumFloat64SameBits checks Sum[float64]'s vector loop against the
// scalar loop, bit for bit, at every length around its round of eight
// and on values that round differently, NaNs, infinities and zeros of
// both signs included.
func TestSumFloat64SameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64, 1e-300}
	value := func() float64 {
		if rng.IntN(8) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(40)-20))
	}
	sum := Sum[float64]()
	for n := range 41 {
		for range 20 {
			a, b := make([]float64, n), make([]float64, n)
			for i := range a {
				a[i], b[i] = value(), value()
			}
			want := append([]float64(nil), a...)
			for i := range want {
				want[i] += b[i]
			}
			got := append([]float64(nil), a...)
			sum.left(got, b)
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("n = %d, element %d: %v + %v = %v (bits %#x), want %v (bits %#x)",
						n, i, a[i], b[i], got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
				}
			}
		}
	}
}

// BenchmarkSumFloat64 measures Sum[float64] on 256 KiB vectors (a 1 MiB
// Allreduce's block on 4 ranks).
func BenchmarkSumFloat64(b *testing.B) {
	const n = 32 << 10
	x, y := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i] = float64(i), float64(n-i)
	}
	sum := Sum[float64]()
	b.SetBytes(n * 8)
	for b.Loop() {
		sum.left(x, y)
	}
}
