//go:build amd64 && !race

package hotsync

import (
	"sync/atomic"
	"unsafe"
)

// Release stores. x86 keeps its stores in program order, and Go's compiler
// never reorders one store with another, so a plain move is a release
// store there (a core that sees it sees every store made before it),
// where an atomic Store is an exchange, a locked instruction that waits
// for the store buffer to drain (about 4 ns here).
//
// They serve words that one goroutine at a time writes, or whose racing
// writers lose nothing that matters, and that readers load atomically.
// What must not pass a later load (a ring's tail before the check of its
// reader's wake-up flag) still uses the atomic Store. Elsewhere, and
// under the race detector (which must see the words as atomic), they are
// the atomic Store (store_other.go).

// StoreRelease32 stores v at p.
func StoreRelease32(p *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(p)) = v }

// StoreRelease64 stores v at p.
func StoreRelease64(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// StoreReleasePtr stores v at p (a pointer store: the garbage collector's
// write barrier applies, as to any).
func StoreReleasePtr[T any](p *atomic.Pointer[T], v *T) {
	*(*unsafe.Pointer)(unsafe.Pointer(p)) = unsafe.Pointer(v)
}
