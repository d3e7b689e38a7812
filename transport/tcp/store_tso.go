//go:build amd64 && !race

package tcp

import (
	"sync/atomic"
	"unsafe"
)

// storeOrdered stores v at p, visible to another core only after every
// store before it (a release store). x86 keeps its stores in program
// order and Go's compiler never reorders one store with another, so a
// plain move does: an atomic Store is an exchange there, a locked
// instruction that a record's publication would pay twice per message.
// What must not pass a later load (the tail before the wake-up flag's
// check) still uses Store.
func storeOrdered(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// storeOrdered32 is storeOrdered of a 32-bit word.
func storeOrdered32(p *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(p)) = v }
