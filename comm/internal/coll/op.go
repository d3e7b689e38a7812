package coll

// Op is a reduction operator over T. The zero Op is invalid (collectives
// return ErrOp). Build one with Sum, Prod, Min, Max, BAnd, BOr, BXor or NewOp.
//
// Order: a reduction over ranks 0..n-1 computes x₀ ⊕ x₁ ⊕ … ⊕ xₙ₋₁ with the
// operands in rank order. The operator must be associative; when it is not
// commutative (NewOp with commutative=false) every algorithm combines partial
// results only in rank order, and never reorders them.
type Op[T Elem] struct {
	name        string
	fn          func(inout, in []T)
	commutative bool
}

// NewOp returns a user-defined operator. fn(inout, in) must set
// inout[i] = inout[i] ⊕ in[i] for every i, where inout holds the partial
// result of lower ranks (the left operand) and in that of higher ranks (the
// right operand); both slices have the same length. fn must not modify in:
// it may be the caller's send buffer or another rank's input in a shared
// segment. fn must not keep either slice. commutative tells coll it may
// also combine in any order; say false when unsure. fn must be associative.
func NewOp[T Elem](name string, fn func(inout, in []T), commutative bool) Op[T] {
	return Op[T]{name: name, fn: fn, commutative: commutative}
}

// Name returns the operator's name ("sum", or the name given to NewOp).
func (o Op[T]) Name() string { return o.name }

// Commutative reports whether the operator may be applied in any order.
func (o Op[T]) Commutative() bool { return o.commutative }

// Valid reports whether o has a function (the zero Op does not).
func (o Op[T]) Valid() bool { return o.fn != nil }

// left sets a = a ⊕ b, where a is the lower ranks' operand.
func (o Op[T]) left(a, b []T) { o.fn(a, b) }

// right sets b = a ⊕ b, where a is the lower ranks' operand; a is scratch
// (it may be overwritten).
func (o Op[T]) right(a, b []T) {
	if o.commutative {
		o.fn(b, a)
		return
	}
	o.fn(a, b)
	copy(b, a)
}

// Sum is element-wise addition (wrapping for integers).
func Sum[T Elem]() Op[T] {
	fn := func(inout, in []T) {
		in = in[:len(inout)]
		for i := range inout {
			inout[i] += in[i]
		}
	}
	if f, ok := any(addFloat64).(func(inout, in []T)); ok {
		fn = f // T is float64: the vector loop (sum_amd64.s), same bits
	}
	return Op[T]{name: "sum", commutative: true, fn: fn}
}

// Prod is element-wise multiplication (wrapping for integers).
func Prod[T Elem]() Op[T] {
	return Op[T]{name: "prod", commutative: true, fn: func(inout, in []T) {
		in = in[:len(inout)]
		for i := range inout {
			inout[i] *= in[i]
		}
	}}
}

// Min is the element-wise minimum. For floats a NaN operand is kept only if
// it comes first (comparisons with NaN are false).
func Min[T Elem]() Op[T] {
	return Op[T]{name: "min", commutative: true, fn: func(inout, in []T) {
		in = in[:len(inout)]
		for i := range inout {
			if in[i] < inout[i] {
				inout[i] = in[i]
			}
		}
	}}
}

// Max is the element-wise maximum (NaN as for Min).
func Max[T Elem]() Op[T] {
	return Op[T]{name: "max", commutative: true, fn: func(inout, in []T) {
		in = in[:len(inout)]
		for i := range inout {
			if in[i] > inout[i] {
				inout[i] = in[i]
			}
		}
	}}
}

// BAnd is the element-wise bitwise AND.
func BAnd[T Integer]() Op[T] {
	return Op[T]{name: "band", commutative: true, fn: func(inout, in []T) {
		in = in[:len(inout)]
		for i := range inout {
			inout[i] &= in[i]
		}
	}}
}

// BOr is the element-wise bitwise OR.
func BOr[T Integer]() Op[T] {
	return Op[T]{name: "bor", commutative: true, fn: func(inout, in []T) {
		in = in[:len(inout)]
		for i := range inout {
			inout[i] |= in[i]
		}
	}}
}

// BXor is the element-wise bitwise exclusive OR.
func BXor[T Integer]() Op[T] {
	return Op[T]{name: "bxor", commutative: true, fn: func(inout, in []T) {
		in = in[:len(inout)]
		for i := range inout {
			inout[i] ^= in[i]
		}
	}}
}
