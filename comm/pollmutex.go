package comm

import (
	"runtime"
	"sync/atomic"
	"time"
)

// pollMutex is a mutual exclusion lock for short critical sections on the
// message path (the session's matching engine and credit): its Lock is one
// compare-and-swap, as sync.Mutex's, but its Unlock is a release store
// (storeRelease32), where sync.Mutex's is an atomic add that must learn
// whether a waiter sleeps. On amd64 that store is a plain move: it does
// not wait for the store buffer to drain, and each message takes this
// lock three times (its send, its receive's posting and its delivery).
//
// The price is that nobody is woken: a waiter polls the lock, first by
// loads, then giving way to the process's other goroutines (one holding
// the lock may have been preempted on this processor) and to the host's
// other threads (with more ranks than cores, the holder may wait for
// this core), then by sleeps of growing length, so a waiter behind a
// long holder (a failure handled, the session's end) costs little CPU. A
// lock whose holders may block (a socket's write) is not one of these.
//
// Unlock's store orders the critical section's loads and stores before
// it (x86 keeps stores in order and never lets a store pass an earlier
// load; Go's compiler moves neither across a store), and Lock's
// compare-and-swap is a full barrier: the next holder sees everything
// the last one did. Under the race detector and off amd64 the store is
// atomic.Uint32's Store, which the detector sees as a release.
type pollMutex struct {
	state atomic.Uint32 // 1 while held
}

// Lock takes m, polling while another holds it.
func (m *pollMutex) Lock() {
	if !m.state.CompareAndSwap(0, 1) {
		m.lockSlow()
	}
}

// TryLock takes m if nobody holds it, and reports whether it did.
func (m *pollMutex) TryLock() bool {
	return m.state.Load() == 0 && m.state.CompareAndSwap(0, 1)
}

// Unlock releases m, which the caller holds.
func (m *pollMutex) Unlock() {
	if m.state.Load() == 0 {
		panic("comm: unlock of an unlocked pollMutex")
	}
	storeRelease32(&m.state, 0)
}

// Polling steps of lockSlow: loads, then yields, then sleeps from
// pollMutexSleep doubling to pollMutexSleepMax.
const (
	pollMutexLoads    = 64
	pollMutexYields   = 64
	pollMutexSleep    = 5 * time.Microsecond
	pollMutexSleepMax = time.Millisecond
)

func (m *pollMutex) lockSlow() {
	sleep := pollMutexSleep
	for i := 0; ; i++ {
		switch {
		case i < pollMutexLoads:
		case i < pollMutexLoads+pollMutexYields:
			if i&1 == 0 {
				runtime.Gosched()
			} else {
				osYield()
			}
		default:
			time.Sleep(sleep)
			sleep = min(2*sleep, pollMutexSleepMax)
		}
		if m.state.Load() == 0 && m.state.CompareAndSwap(0, 1) {
			return
		}
	}
}
