// Package ep is the kernel of the NAS Parallel Benchmark EP ("embarrassingly
// parallel", NPB 3.x): 2^(M+1) uniform pseudorandom numbers are paired into
// 2^M points of the square (-1, 1)²; the points inside the unit disc are turned
// into Gaussian deviates by the Marsaglia polar method, their sums are
// accumulated and they are tallied in the square annuli l ≤ max(|X|, |Y|) < l+1.
//
// The work is cut into 2^(M-16) batches of 2^16 pairs; batch k starts from
// the seed s·a^(2^17·k) (s = 271828183, a = 5^13), so batches are independent
// and can run anywhere in any order. [Batch] computes one, [Sums.Add]
// combines them, and [Verify] checks the totals against the official values
// with the benchmark's relative tolerance 1e-8:
//
//   - the NPB 3.3 sums of the signed deviates (sx, sy),
//   - the NPB 3.4 sums of their absolute values and the number of Gaussian
//     pairs gc = Σ q[l].
//
// Typical use:
//
//	c, _ := ep.ClassByName("S")
//	var total ep.Sums
//	for k := 0; k < c.Batches(); k++ {
//		b := ep.Batch(k)
//		total.Add(&b)
//	}
//	err := ep.Verify(c, total) // nil: VERIFICATION SUCCESSFUL
package ep

import (
	"errors"
	"fmt"
	"math"

	"github.com/cohort-mp/cohort/examples/npb/internal/nasrand"
)

// Benchmark constants (NPB ep.f / ep.c).
const (
	MK      = 16        // log2 of the pairs in a batch
	NK      = 1 << MK   // pairs in a batch
	NQ      = 10        // annuli tallied
	Seed    = 271828183 // s
	Epsilon = 1e-8      // relative tolerance of the verification
	batchA  = 2 * NK    // random numbers per batch
	mult    = nasrand.A // a = 5^13
	seedU   = uint64(Seed)
)

// Class is a problem size with its official verification values.
type Class struct {
	Name   string
	M      int     // 2^M pairs
	SX, SY float64 // NPB 3.3: sums of the deviates
	AX, AY float64 // NPB 3.4: sums of their absolute values
	GC     uint64  // number of Gaussian pairs (NPB 3.4)
}

// Classes are the classes S, W, A, B, C with the values of NPB 3.3 (signed
// sums) and NPB 3.4 (absolute sums and gc).
var Classes = []Class{
	{"S", 24, -3.247834652034740e+3, -6.958407078382297e+3, 1.051299420395306e+07, 1.051517131857535e+07, 13176389},
	{"W", 25, -2.863319731645753e+3, -6.320053679109499e+3, 2.102505525182392e+07, 2.103162209578822e+07, 26354769},
	{"A", 28, -4.295875165629892e+3, -1.580732573678431e+4, 1.682235632304711e+08, 1.682195123368299e+08, 210832767},
	{"B", 30, 4.033815542441498e+4, -2.660669192809235e+4, 6.728927543423024e+08, 6.728951822504275e+08, 843345606},
	{"C", 32, 4.764367927995374e+4, -8.084072988043731e+4, 2.691444083862931e+09, 2.691519118724585e+09, 3373275903},
}

// ErrClass is returned for an unknown class name.
var ErrClass = errors.New("ep: unknown class")

// ErrVerification is returned by Verify when a value is off.
var ErrVerification = errors.New("ep: verification failed")

// ClassByName returns the class called name ("S", "W", "A", "B", "C").
func ClassByName(name string) (Class, error) {
	for _, c := range Classes {
		if c.Name == name {
			return c, nil
		}
	}
	return Class{}, fmt.Errorf("%w %q (want S, W, A, B or C)", ErrClass, name)
}

// Batches returns the number of batches of the class: 2^(M-MK).
func (c Class) Batches() int { return 1 << (c.M - MK) }

// Sums are the results of one or more batches. The counts are exact
// integers, so they add up the same in any order.
type Sums struct {
	SX, SY float64 // sums of the deviates X, Y
	AX, AY float64 // sums of |X|, |Y|
	Q      [NQ]uint64
}

// Add adds o to s.
func (s *Sums) Add(o *Sums) {
	s.SX += o.SX
	s.SY += o.SY
	s.AX += o.AX
	s.AY += o.AY
	for i := range s.Q {
		s.Q[i] += o.Q[i]
	}
}

// GC returns the number of Gaussian pairs, Σ Q.
func (s *Sums) GC() uint64 {
	var gc uint64
	for _, q := range s.Q {
		gc += q
	}
	return gc
}

// Floats returns s as 14 float64 values (SX, SY, AX, AY, Q[0..9]), the form
// in which the parallel program reduces it; the counts are below 2^53 and
// so exact in a float64.
func (s *Sums) Floats() []float64 {
	v := []float64{s.SX, s.SY, s.AX, s.AY}
	for _, q := range s.Q {
		v = append(v, float64(q))
	}
	return v
}

// FloatsLen is the length of Floats.
const FloatsLen = 4 + NQ

// SumsFromFloats is the inverse of Floats.
func SumsFromFloats(v []float64) (Sums, error) {
	if len(v) != FloatsLen {
		return Sums{}, fmt.Errorf("ep: %d values, want %d", len(v), FloatsLen)
	}
	s := Sums{SX: v[0], SY: v[1], AX: v[2], AY: v[3]}
	for i := range s.Q {
		q := v[4+i]
		if q < 0 || q != math.Trunc(q) || q >= 1<<53 {
			return Sums{}, fmt.Errorf("ep: count %v is not a count", q)
		}
		s.Q[i] = uint64(q)
	}
	return s, nil
}

// batchMultiplier is a^(2·NK) mod 2^46: the jump from one batch to the next.
var batchMultiplier = nasrand.Pow(mult, batchA)

// Batch computes batch k (0 ≤ k < Batches of the class; a batch does not
// depend on the class). It allocates nothing and runs in about 2^17 steps
// of the generator.
func Batch(k int) Sums {
	x := nasrand.Mul(seedU, nasrand.Pow(batchMultiplier, uint64(k)))
	var s Sums
	for range NK {
		// randlc by value: a local state keeps the loop free of memory
		// traffic (and of race-detector instrumentation).
		x = nasrand.Mul(x, mult)
		x1 := 2*nasrand.Float(x) - 1
		x = nasrand.Mul(x, mult)
		x2 := 2*nasrand.Float(x) - 1
		t1 := x1*x1 + x2*x2
		if t1 <= 1 {
			t2 := math.Sqrt(-2 * math.Log(t1) / t1)
			t3 := x1 * t2
			t4 := x2 * t2
			a3, a4 := math.Abs(t3), math.Abs(t4)
			s.Q[int(math.Max(a3, a4))]++
			s.SX += t3
			s.SY += t4
			s.AX += a3
			s.AY += a4
		}
	}
	return s
}

// Run computes every batch of the class in order on the calling goroutine.
func Run(c Class) Sums {
	var total Sums
	for k := range c.Batches() {
		b := Batch(k)
		total.Add(&b)
	}
	return total
}

// Verification reports the relative errors of a result.
type Verification struct {
	ErrSX, ErrSY, ErrAX, ErrAY float64
	GC                         uint64
}

// Verify checks s against the official values of c: the signed and absolute
// sums within relative error Epsilon and gc exactly. It returns the errors
// and nil, or an error wrapping ErrVerification that says what is off.
func Verify(c Class, s Sums) (Verification, error) {
	rel := func(got, want float64) float64 { return math.Abs((got - want) / want) }
	v := Verification{
		ErrSX: rel(s.SX, c.SX), ErrSY: rel(s.SY, c.SY),
		ErrAX: rel(s.AX, c.AX), ErrAY: rel(s.AY, c.AY),
		GC: s.GC(),
	}
	for _, e := range []struct {
		name      string
		err       float64
		got, want float64
	}{{"sx", v.ErrSX, s.SX, c.SX}, {"sy", v.ErrSY, s.SY, c.SY}, {"sum |x|", v.ErrAX, s.AX, c.AX}, {"sum |y|", v.ErrAY, s.AY, c.AY}} {
		if !(e.err <= Epsilon) { // also catches NaN
			return v, fmt.Errorf("%w: class %s %s = %.15e, want %.15e (relative error %.2e > %.0e)", ErrVerification, c.Name, e.name, e.got, e.want, e.err, Epsilon)
		}
	}
	if v.GC != c.GC {
		return v, fmt.Errorf("%w: class %s gc = %d, want %d", ErrVerification, c.Name, v.GC, c.GC)
	}
	return v, nil
}
