// Package slot holds a transport's handler: installed once, replaceable,
// and waited for by reader goroutines that have a frame before the owner
// has installed one.
package slot

import (
	"sync"
	"sync/atomic"

	"github.com/cohort-mp/cohort/transport"
)

// Slot holds a [transport.Handler]. The zero value is not usable; call New.
type Slot struct {
	h     atomic.Pointer[box]
	ready chan struct{}
	once  sync.Once
}

type box struct{ h transport.Handler }

// New returns an empty slot.
func New() *Slot { return &Slot{ready: make(chan struct{})} }

// Set installs h (replacing any earlier handler) and releases the waiters.
func (s *Slot) Set(h transport.Handler) {
	s.h.Store(&box{h})
	s.once.Do(func() { close(s.ready) })
}

// Get returns the handler, or nil if none is installed yet.
func (s *Slot) Get() transport.Handler {
	if b := s.h.Load(); b != nil {
		return b.h
	}
	return nil
}

// Wait returns the handler, waiting for one to be installed; it returns nil
// if stop1 or stop2 is closed first (a nil channel never stops the wait).
func (s *Slot) Wait(stop1, stop2 <-chan struct{}) transport.Handler {
	select {
	case <-s.ready:
		return s.Get()
	case <-stop1:
		return nil
	case <-stop2:
		return nil
	}
}
