//go:build !amd64 || race

package tcp

import "sync/atomic"

// storeOrdered stores v at p, visible to another core only after every
// store before it (a release store); see store_tso.go. Elsewhere, and
// under the race detector (which must see the ring's words as atomic),
// it is an atomic Store.
func storeOrdered(p *atomic.Uint64, v uint64) { p.Store(v) }

func storeOrdered32(p *atomic.Uint32, v uint32) { p.Store(v) }
