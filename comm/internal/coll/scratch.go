package coll

import "sync"

// The collectives' scratch buffers (a half or a block of the vector, kept
// for one call) come from pools of power-of-two size classes and go back
// when the call ends: a large Allreduce in a loop then costs the garbage
// collector nothing per call (not a new half-vector each time), and a
// small one no allocation.
var scratchPools [48]sync.Pool

// scratchClass is the smallest power of two ≥ n bytes.
func scratchClass(n int) int {
	c := 0
	for 1<<c < n {
		c++
	}
	return c
}

// getScratch returns n elements of scratch and the token that puts them
// back (putScratch). An empty, huge or misaligned request is a plain
// allocation (nil token).
func getScratch[T Elem](n int) ([]T, *[]byte) {
	size := n * SizeOf[T]()
	c := scratchClass(size)
	if size == 0 || c >= len(scratchPools) {
		return make([]T, n), nil
	}
	b, _ := scratchPools[c].Get().(*[]byte)
	if b == nil {
		nb := make([]byte, 1<<c)
		b = &nb
	}
	out, err := FromBytes[T]((*b)[:size])
	if err != nil || &AsBytes(out)[0] != &(*b)[0] { // misaligned: FromBytes copied
		return make([]T, n), nil
	}
	return out, b
}

// putScratch returns a buffer of getScratch; the caller no longer uses it.
func putScratch(b *[]byte) {
	if b != nil {
		scratchPools[scratchClass(cap(*b))].Put(b)
	}
}

// callScratch is getScratch for the rest of call c: c.done puts it back.
// A step that fails can leave a receive posted into it, or a send lent
// from it, until done withdraws or reclaims them; put back earlier, the
// buffer could be handed to another call while the transport still
// writes or reads it.
func callScratch[T Elem](c *call, n int) []T {
	s, tok := getScratch[T](n)
	if tok != nil {
		c.scratch = append(c.scratch, tok)
	}
	return s
}
