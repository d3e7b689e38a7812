package coll

import "testing"

// TestPickAllreduce checks the size thresholds of the allreduce algorithms
// (doc.go's table).
func TestPickAllreduce(t *testing.T) {
	for _, tc := range []struct {
		n, bytes, p int
		commutative bool
		eager       bool
		want        allreduceAlg
	}{
		{1, 8, 4, true, true, allreduceFlat},
		{128, AllreduceFlatBytes, AllreduceFlatRanks, false, true, allreduceFlat},
		{1, 8, 4, true, false, allreduceDoubling},                     // sends first only when eager
		{1, 8, 2, true, true, allreduceDoubling},                      // one round either way
		{1, 8, AllreduceFlatRanks + 1, true, true, allreduceDoubling}, // too many sends per rank
		{129, AllreduceFlatBytes + 8, 4, true, true, allreduceDoubling},
		{1 << 17, 1 << 20, 4, true, true, allreduceRabenseifner},
		{1 << 17, 1 << 20, 6, true, true, allreduceRing},
	} {
		if got := pickAllreduce(tc.n, tc.bytes, tc.p, tc.commutative, tc.eager); got != tc.want {
			t.Errorf("pickAllreduce(n=%d, %d B, p=%d, commutative %v, eager %v) = %d, want %d",
				tc.n, tc.bytes, tc.p, tc.commutative, tc.eager, got, tc.want)
		}
	}
}
