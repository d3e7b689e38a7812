package topo

import (
	"math/bits"
	"testing"
)

// bitset is a fixed-size set of small ints used by the tests' simulations.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int)      { b[i>>6] |= 1 << (i & 63) }
func (b bitset) has(i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func (b bitset) clear() {
	for i := range b {
		b[i] = 0
	}
}

// or adds the members of c to b (same size).
//
//go:norace
func (b bitset) or(c bitset) {
	for i := range b {
		b[i] |= c[i]
	}
}

// The helpers marked go:norace run in the tests' hot loops on memory that
// only the test goroutine touches; the race detector's instrumentation would
// make them several times slower for nothing.
//
//go:norace
func (b bitset) count() int {
	c := 0
	for _, w := range b {
		c += bits.OnesCount64(w)
	}
	return c
}

// wordUp returns word i of src shifted towards higher indices by k bits (bit
// j of the result is bit j-k of src; bits shifted past the end are lost).
//
//go:norace
func wordUp(src bitset, i, k int) uint64 {
	ws, bs := k>>6, uint(k&63)
	j := i - ws
	if j < 0 {
		return 0
	}
	v := src[j] << bs
	if bs != 0 && j >= 1 {
		v |= src[j-1] >> (64 - bs)
	}
	return v
}

// wordDown returns word i of src shifted towards lower indices by k bits
// (bit j of the result is bit j+k of src).
//
//go:norace
func wordDown(src bitset, i, k int) uint64 {
	ws, bs := k>>6, uint(k&63)
	j := i + ws
	if j >= len(src) {
		return 0
	}
	v := src[j] >> bs
	if bs != 0 && j+1 < len(src) {
		v |= src[j+1] << (64 - bs)
	}
	return v
}

// rotate sets out (which must not share memory with src) to the n-bit set
// src rotated by k, 0 ≤ k < n: bit (j+k) mod n of out is bit j of src.
//
//go:norace
func rotate(out, src bitset, k, n int) {
	for i := range out {
		out[i] = wordUp(src, i, k) | wordDown(src, i, n-k)
	}
	if r := n & 63; r != 0 {
		out[len(out)-1] &= 1<<r - 1
	}
}

func TestRotateAgainstNaive(t *testing.T) {
	for _, n := range []int{1, 2, 63, 64, 65, 127, 128, 129, 200} {
		src, out := newBitset(n), newBitset(n)
		for i := 0; i < n; i += 3 {
			src.set(i)
		}
		src.set(n - 1)
		for k := 0; k < n; k++ {
			rotate(out, src, k, n)
			for j := 0; j < n; j++ {
				if out.has((j+k)%n) != src.has(j) {
					t.Fatalf("n=%d k=%d: bit %d", n, k, j)
				}
			}
			if out.count() != src.count() {
				t.Fatalf("n=%d k=%d: count %d, want %d", n, k, out.count(), src.count())
			}
		}
	}
}
