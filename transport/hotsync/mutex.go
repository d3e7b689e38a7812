package hotsync

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Mutex is a mutual exclusion lock for short critical sections on the
// message path: its Lock is one compare-and-swap, as sync.Mutex's, but its
// Unlock is a release store (StoreRelease32), where sync.Mutex's is an
// atomic add that must learn whether a waiter sleeps. On amd64 that store
// is a plain move: it does not wait for the store buffer to drain. A small
// message on one host takes seven of them: comm's session lock three times
// (its send, its receive's posting and its delivery), and transport/tcp's
// peer write lock, resend log lock, delivery lock and connection read
// lock.
//
// Unlock learns whether a waiter sleeps by a plain load before its
// store. A waiter polls the lock first, by loads, then giving way to the
// process's other goroutines (the holder may have been preempted on this
// processor) and to the host's other threads (with more ranks than
// cores, the holder may wait for this core), then sleeps, counted, until
// an Unlock that sees it wakes it, or for a millisecond in the rare case
// where Unlock's load missed it.
//
// Unlock's store orders the critical section's loads and stores before
// it (x86 keeps stores in order and never lets a store pass an earlier
// load; Go's compiler moves neither across a store), and Lock's
// compare-and-swap is a full barrier: the next holder sees everything
// the last one did. What Unlock does not give is a fence for the holder's
// own later loads: code that must not let a load pass its critical
// section's stores (a wake-up flag's check) releases by UnlockFence,
// keeps a sync.Mutex or fences itself. Under the race detector and off amd64 the store is
// atomic.Uint32's Store, which the detector sees as a release.
type Mutex struct {
	state    atomic.Uint32 // 1 while held
	sleepers atomic.Int32  // waiters asleep on wake, or going to sleep
	wake     atomic.Pointer[chan struct{}]
}

// Lock takes m, polling, then sleeping, while another holds it.
func (m *Mutex) Lock() {
	if !m.state.CompareAndSwap(0, 1) {
		m.lockSlow()
	}
}

// TryLock takes m if nobody holds it, and reports whether it did.
func (m *Mutex) TryLock() bool {
	return m.state.Load() == 0 && m.state.CompareAndSwap(0, 1)
}

// Unlock releases m, which the caller holds, and wakes a sleeping waiter
// if it sees one. Unlike sync.Mutex's, an Unlock of a lock nobody holds
// is not detected (a test of it would keep Unlock from inlining).
func (m *Mutex) Unlock() {
	if m.sleepers.Load() != 0 {
		m.unlockSlow()
		return
	}
	StoreRelease32(&m.state, 0)
}

// unlockSlow is Unlock where a waiter sleeps (see lockSlow for the one
// it may miss). Out of line, so that Unlock stays small enough to
// inline.
//
//go:noinline
func (m *Mutex) unlockSlow() {
	StoreRelease32(&m.state, 0)
	m.wakeOne()
}

// UnlockFence is Unlock for a holder whose later loads must not pass
// its critical section's stores (a wake-up flag's check after an index
// it stored): the store that releases m is an atomic Store, a full
// barrier (one locked instruction, as sync.Mutex's Unlock). It loads the
// count of sleepers after that store, so it misses none.
func (m *Mutex) UnlockFence() {
	m.state.Store(0)
	if m.sleepers.Load() != 0 {
		m.wakeOne()
	}
}

// wakeOne leaves a token for a sleeping waiter, once m is released.
func (m *Mutex) wakeOne() {
	// A token, which a waiter that takes it and finds the lock taken
	// again leaves to the next Unlock.
	if p := m.wake.Load(); p != nil {
		select {
		case *p <- struct{}{}:
		default: // a token is already waiting
		}
	}
}

// Polling steps of lockSlow: loads, then yields, then sleeps on wake
// until woken or for MutexNap, whichever comes first.
const (
	MutexLoads  = 64
	MutexYields = 16
	MutexNap    = time.Millisecond
)

func (m *Mutex) lockSlow() {
	for i := 0; i < MutexLoads+MutexYields; i++ {
		if i >= MutexLoads {
			if i&1 == 0 {
				runtime.Gosched()
			} else {
				Yield()
			}
		}
		if m.state.Load() == 0 && m.state.CompareAndSwap(0, 1) {
			return
		}
	}
	// Asleep, counted: an Unlock that loads the count after this wakes
	// the waiter, as a sync.Mutex's is. One that loaded it before, and
	// whose store this waiter's last try does not yet see, does not:
	// the nap bounds that rare miss.
	wake := m.wakeChan()
	m.sleepers.Add(1)
	defer m.sleepers.Add(-1)
	for !(m.state.Load() == 0 && m.state.CompareAndSwap(0, 1)) {
		select {
		case <-wake:
		case <-time.After(MutexNap):
		}
	}
}

// wakeChan returns the channel sleeping waiters wait on, made by the
// first to sleep.
func (m *Mutex) wakeChan() chan struct{} {
	if p := m.wake.Load(); p != nil {
		return *p
	}
	c := make(chan struct{}, 1)
	if !m.wake.CompareAndSwap(nil, &c) {
		return *m.wake.Load()
	}
	return c
}
