// Package nasrand is the pseudorandom number generator of the NAS Parallel
// Benchmarks (randlc and vranlc of NPB 3.x): the linear congruential
// generator
//
//	x_{k+1} = a · x_k mod 2^46,  returning x_{k+1} · 2^-46 in (0, 1),
//
// with the multiplier a = 5^13 = 1220703125. NPB computes it in double
// precision by splitting the operands into 23-bit halves so that it is exact
// on any IEEE machine; here the product is taken modulo 2^64 in a uint64 and
// masked to 46 bits, which is the same number (2^46 divides 2^64), so the
// sequences are bit for bit those of the reference code.
//
// A state is a uint64 holding x_k (odd, 0 < x_k < 2^46). Jumping ahead by n
// numbers multiplies the state by a^n mod 2^46 ([Pow]), which is how the
// benchmarks give every batch or every process its own starting seed.
package nasrand

// A is the multiplier of the NPB generator, 5^13.
const A uint64 = 1220703125

const (
	bits46 = 46
	mask46 = uint64(1)<<bits46 - 1
	r46    = 1.0 / (1 << bits46)
)

// Randlc advances *x by one step with multiplier a and returns the new state
// scaled to (0, 1): NPB's randlc(x, a).
func Randlc(x *uint64, a uint64) float64 {
	*x = (*x * a) & mask46
	return float64(*x) * r46
}

// Vranlc fills y with the next len(y) numbers of the sequence: NPB's
// vranlc(n, x, a, y).
func Vranlc(y []float64, x *uint64, a uint64) {
	s := *x
	for i := range y {
		s = (s * a) & mask46
		y[i] = float64(s) * r46
	}
	*x = s
}

// Float returns the state x scaled to (0, 1), as Randlc returns it.
func Float(x uint64) float64 { return float64(x) * r46 }

// Mul returns a·b mod 2^46.
func Mul(a, b uint64) uint64 { return (a * b) & mask46 }

// Pow returns a^n mod 2^46 by binary exponentiation.
func Pow(a, n uint64) uint64 {
	r := uint64(1)
	a &= mask46
	for n > 0 {
		if n&1 == 1 {
			r = Mul(r, a)
		}
		a = Mul(a, a)
		n >>= 1
	}
	return r
}

// Skip returns the state reached from seed after n steps with multiplier a.
func Skip(seed, a, n uint64) uint64 { return Mul(seed, Pow(a, n)) }
