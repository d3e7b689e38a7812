//go:build !amd64 || race

package hotsync

import "sync/atomic"

// StoreRelease32 stores v at p: the atomic Store off amd64 and under the
// race detector; see store_tso.go.
func StoreRelease32(p *atomic.Uint32, v uint32) { p.Store(v) }

// StoreRelease64 stores v at p; see StoreRelease32.
func StoreRelease64(p *atomic.Uint64, v uint64) { p.Store(v) }

// StoreReleasePtr stores v at p; see StoreRelease32.
func StoreReleasePtr[T any](p *atomic.Pointer[T], v *T) { p.Store(v) }
