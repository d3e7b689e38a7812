//go:build !amd64

package coll

// addFloat64 sets inout[i] += in[i] for every i (the vector loop is
// amd64's).
func addFloat64(inout, in []float64) {
	in = in[:len(inout)]
	for i := range inout {
		inout[i] += in[i]
	}
}
