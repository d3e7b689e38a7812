package coll

// addFloat64 sets inout[i] += in[i] for every i, two elements per
// instruction (SSE2, which every amd64 processor has): a large Allreduce
// of float64 spends most of its own processor time in this loop, which the
// compiler does not vectorize. Each element is one IEEE addition with
// inout's element as the first operand, as in the scalar loop, so the
// bits are the same.
func addFloat64(inout, in []float64) {
	in = in[:len(inout)]
	if len(inout) > 0 {
		addFloat64SSE2(&inout[0], &in[0], len(inout))
	}
}

//go:noescape
func addFloat64SSE2(dst, src *float64, n int)
