package nasrand

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refRandlc is NPB's double-precision randlc (23-bit splitting), transcribed
// as the specification to check the integer version against.
func refRandlc(x *float64, a float64) float64 {
	const r23 = 1.0 / (1 << 23)
	const r46 = r23 * r23
	const t23 = 1 << 23
	const t46 = float64(t23) * t23
	t1 := r23 * a
	a1 := math.Trunc(t1)
	a2 := a - t23*a1
	t1 = r23 * *x
	x1 := math.Trunc(t1)
	x2 := *x - t23*x1
	t1 = a1*x2 + a2*x1
	t2 := math.Trunc(r23 * t1)
	z := t1 - t23*t2
	t3 := t23*z + a2*x2
	t4 := math.Trunc(r46 * t3)
	*x = t3 - t46*t4
	return r46 * *x
}

func TestMatchesDoublePrecisionReference(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for trial := 0; trial < 200; trial++ {
		x0 := rng.Uint64()&mask46 | 1
		a := A
		if trial%2 == 1 {
			a = rng.Uint64()&mask46 | 1
		}
		xi, xf := x0, float64(x0)
		for i := 0; i < 100; i++ {
			gi := Randlc(&xi, a)
			gf := refRandlc(&xf, float64(a))
			if gi != gf || float64(xi) != xf {
				t.Fatalf("x0=%d a=%d step %d: integer %v (%d), reference %v (%v)", x0, a, i, gi, xi, gf, xf)
			}
		}
	}
}

func TestVranlcAndSkip(t *testing.T) {
	const seed = 271828183
	x := uint64(seed)
	y := make([]float64, 1000)
	Vranlc(y, &x, A)
	z := uint64(seed)
	for i := range y {
		if v := Randlc(&z, A); v != y[i] || Float(z) != v {
			t.Fatalf("number %d: vranlc %v, randlc %v", i, y[i], v)
		}
		if s := Skip(seed, A, uint64(i+1)); s != z {
			t.Fatalf("Skip(%d) = %d, stepping gives %d", i+1, s, z)
		}
	}
	if x != z {
		t.Fatalf("vranlc left state %d, want %d", x, z)
	}
	// NPB EP computes a^(2^(mk+1)) by repeated squaring with randlc(t, t).
	sq := A
	for range 17 {
		Randlc(&sq, sq)
	}
	if p := Pow(A, 1<<17); p != sq {
		t.Fatalf("Pow(a, 2^17) = %d, squaring gives %d", p, sq)
	}
}
