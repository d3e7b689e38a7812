package hotsync

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestMutexExcludes counts increments made under the lock by
// goroutines that contend for it, some of them long enough to reach the
// yields and sleeps of lockSlow, released by Unlock and UnlockFence in
// turn: none is lost.
func TestMutexExcludes(t *testing.T) {
	var m Mutex
	var n int
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m.Lock()
				n++
				if (w+i)%500 == 0 {
					for range 1000 { // a long holder
						n++
						n--
					}
				}
				if i%2 == 0 {
					m.Unlock()
				} else {
					m.UnlockFence()
				}
			}
		}()
	}
	wg.Wait()
	if n != workers*each {
		t.Fatalf("got %d increments, want %d", n, workers*each)
	}
}

func TestMutexTryLock(t *testing.T) {
	var m Mutex
	if !m.TryLock() {
		t.Fatal("TryLock of a free lock failed")
	}
	if m.TryLock() {
		t.Fatal("TryLock of a held lock succeeded")
	}
	m.Unlock()
	m.Lock()
	if m.TryLock() {
		t.Fatal("TryLock of a lock taken by Lock succeeded")
	}
	m.Unlock()
	if !m.TryLock() {
		t.Fatal("TryLock after Unlock failed")
	}
	m.Unlock()
}

// TestMutexWakesSleeper holds the lock until a waiter has gone to
// sleep on it, then releases it: the waiter gets the lock (through the
// token Unlock sends it, or its nap), and the count of sleepers is back
// to 0.
func TestMutexWakesSleeper(t *testing.T) {
	var m Mutex
	m.Lock()
	got := make(chan struct{})
	go func() {
		m.Lock()
		close(got)
		m.Unlock()
	}()
	for m.sleepers.Load() == 0 {
		runtime.Gosched()
	}
	m.Unlock()
	select {
	case <-got:
	case <-time.After(time.Minute):
		t.Fatal("the sleeping waiter never got the lock")
	}
	if n := m.sleepers.Load(); n != 0 {
		t.Fatalf("got %d sleepers after the waiter left, want 0", n)
	}
}
