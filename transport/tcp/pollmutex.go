package tcp

import (
	"runtime"
	"sync/atomic"
	"time"
)

// pollMutex is a mutual exclusion lock whose Unlock is a release store
// (storeOrdered32), where sync.Mutex's is an atomic add that must learn
// whether a waiter sleeps: on amd64 a plain move, which does not wait for
// the store buffer to drain. Its Lock is one compare-and-swap, as
// sync.Mutex's. The small message's path on shared memory takes four of
// them (the peer's and the ring's write locks, the resend log's and the
// peer's delivery lock).
//
// The price is that nobody is woken: a waiter polls the lock, first by
// loads, then giving way to the process's other goroutines (the holder
// may have been preempted on this processor) and to the host's other
// threads (with more ranks than cores, the holder may wait for this
// core), then by sleeps of growing length, so a waiter behind a long
// holder (a writer flushing a socket) costs little CPU.
//
// Unlock's store orders the critical section's loads and stores before
// it (x86 keeps stores in order and never lets a store pass an earlier
// load; Go's compiler moves neither across a store), and Lock's
// compare-and-swap is a full barrier, so the next holder sees everything
// the last one did. What Unlock does not give is a fence for the holder's
// own later loads: code that must not let a load pass its critical
// section's stores (a wake-up flag's check, progress's) keeps a
// sync.Mutex or fences itself.
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
		panic("tcp: unlock of an unlocked pollMutex")
	}
	storeOrdered32(&m.state, 0)
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
