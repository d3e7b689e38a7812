//go:build !amd64 || race

package comm

import "sync/atomic"

// storeRelease32, storeRelease64 and storeReleasePtr are the atomic Store off amd64 and
// under the race detector; see store_tso.go.
func storeRelease32(p *atomic.Uint32, v uint32) { p.Store(v) }

func storeRelease64(p *atomic.Uint64, v uint64) { p.Store(v) }

func storeReleasePtr[T any](p *atomic.Pointer[T], v *T) { p.Store(v) }
