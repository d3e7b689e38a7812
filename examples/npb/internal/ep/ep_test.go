package ep

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// classSBatches computes the batches of class S once for the tests that
// recombine them.
var classSBatches = sync.OnceValue(func() []Sums {
	c, _ := ClassByName("S")
	out := make([]Sums, c.Batches())
	for k := range out {
		out[k] = Batch(k)
	}
	return out
})

// NPB 3.x EP verification (ep.f/ep.c "verify"): class S and W pass with the
// official values.
func TestVerifyClassS(t *testing.T) {
	c, _ := ClassByName("S")
	var s Sums
	for _, b := range classSBatches() {
		s.Add(&b)
	}
	v, err := Verify(c, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("class S: sx %.15e sy %.15e gc %d q %v", s.SX, s.SY, v.GC, s.Q)
}

func TestVerifyClassW(t *testing.T) { verifyClass(t, "W") }

func verifyClass(t *testing.T, name string) {
	c, err := ClassByName(name)
	if err != nil {
		t.Fatal(err)
	}
	s := Run(c)
	v, err := Verify(c, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("class %s: sx %.15e sy %.15e gc %d q %v (relative errors %.1e %.1e %.1e %.1e)", name, s.SX, s.SY, v.GC, s.Q, v.ErrSX, v.ErrSY, v.ErrAX, v.ErrAY)
}

// Batches may be computed in any order (as when survivors redo a dead
// rank's batches): the counts are identical and the sums within 1e-12.
func TestBatchOrderIndependent(t *testing.T) {
	c, _ := ClassByName("S")
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	batches := classSBatches()
	var shuffled Sums
	for _, k := range rng.Perm(c.Batches()) {
		shuffled.Add(&batches[k])
	}
	if _, err := Verify(c, shuffled); err != nil {
		t.Fatal(err)
	}
}

// A wrong result is rejected: one batch missing, one batch twice, a
// perturbed sum.
func TestVerifyRejects(t *testing.T) {
	c, _ := ClassByName("S")
	batches := classSBatches()
	var full, missing Sums
	for k := range batches {
		full.Add(&batches[k])
		if k != 17 {
			missing.Add(&batches[k])
		}
	}
	twice := full
	twice.Add(&batches[17])
	off := full
	off.SX *= 1 + 1e-7
	for name, s := range map[string]Sums{"missing batch": missing, "batch twice": twice, "sx off": off} {
		if _, err := Verify(c, s); !errors.Is(err, ErrVerification) {
			t.Errorf("%s: Verify error %v, want ErrVerification", name, err)
		}
	}
}

func TestFloatsRoundTrip(t *testing.T) {
	b := Batch(3)
	got, err := SumsFromFloats(b.Floats())
	if err != nil || got != b {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, b)
	}
	if _, err := SumsFromFloats([]float64{1}); err == nil {
		t.Error("short slice accepted")
	}
	bad := b.Floats()
	bad[5] = 0.5
	if _, err := SumsFromFloats(bad); err == nil {
		t.Error("fractional count accepted")
	}
}

func TestClassByName(t *testing.T) {
	if _, err := ClassByName("Z"); !errors.Is(err, ErrClass) {
		t.Errorf("ClassByName(Z) error %v", err)
	}
}

// BenchmarkClass runs whole classes; class A is verified here only.
func BenchmarkClass(b *testing.B) {
	for _, name := range []string{"S", "W", "A"} {
		c, _ := ClassByName(name)
		b.Run("class="+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Verify(c, Run(c)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
