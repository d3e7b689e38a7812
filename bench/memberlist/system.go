package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var discardLogger = log.New(io.Discard, "", 0)

// system is one membership implementation running n nodes in this process.
type system interface {
	// start starts n nodes and returns once every one of them sees all n.
	start(n int) error
	// traffic returns the messages and bytes sent so far by all nodes,
	// including crashed ones.
	traffic() (msgs, bytes uint64)
	// crash stops the live node at index i (of live()) without a goodbye
	// and returns its name.
	crash(i int) string
	// live is the number of live nodes.
	live() int
	// detected returns the first time any node declared victim failed
	// (zero if none yet).
	detected(victim string) time.Time
	// agreed reports whether every live node excludes victim (and, for
	// cohort, all have installed the same view), and when the last of
	// them did.
	agreed(victim string) (bool, time.Time)
	// replace starts one new node and returns once every node sees all
	// live nodes.
	replace() error
	// falseDeaths counts declarations of failure about nodes that were
	// not crashed, so far.
	falseDeaths() int
	// changed is signalled (closed) at every membership event.
	changed() <-chan struct{}
	// inject sets the fault model on the node at live index i (a loss
	// probability and a delay on its outgoing messages); false if the
	// system cannot.
	inject(i int, loss float64, delay time.Duration) bool
	// settle is how long the system needs after it formed to reach its
	// steady traffic (the quiet window starts after it).
	settle() time.Duration
	// views returns every live node's membership, in live order.
	views() []nodeView
	// whole reports whether every live node counts exactly the live
	// nodes as members (cohort: and all have installed one same view).
	whole() bool
	// cut drops every message from the live node at index a to the one
	// at index b and, unless oneWay, from b to a, on top of the cuts
	// already made; heal ends every cut.
	cut(a, b int, oneWay bool)
	heal()
	// sent returns how many messages the live node at index i has sent
	// to each other node so far, by name.
	sent(i int) map[string]uint64
	// setWatcher routes the suspicions and failure declarations of every
	// node to w from now on (nil: nowhere).
	setWatcher(w *watcher)
	close()
}

// events records the membership events of one system: who declared whom
// failed when, with a broadcast channel for waiters.
type events struct {
	mu       sync.Mutex
	notify   chan struct{}
	crashed  map[string]bool
	declared map[string]time.Time // victim → first declaration anywhere
	falses   map[string]bool      // victims declared while alive
}

func newEvents() *events {
	return &events{notify: make(chan struct{}), crashed: map[string]bool{},
		declared: map[string]time.Time{}, falses: map[string]bool{}}
}

// declare records that some node declared victim failed (or excluded it).
func (e *events) declare(victim string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.declared[victim]; !ok {
		e.declared[victim] = at
	}
	if !e.crashed[victim] {
		e.falses[victim] = true
	}
	e.pokeLocked()
}

func (e *events) poke() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pokeLocked()
}

func (e *events) pokeLocked() {
	close(e.notify)
	e.notify = make(chan struct{})
}

func (e *events) changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.notify
}

// markCrashed records that victim is crashed from now on: its first
// detection is the first declaration after this call (an earlier false
// declaration, since refuted, does not count).
func (e *events) markCrashed(victim string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.crashed[victim] = true
	delete(e.declared, victim)
}

func (e *events) first(victim string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.declared[victim]
}

func (e *events) falseCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.falses)
}

// waitFor waits until cond holds, re-checking at every event of s (and at
// least every 50 ms, for conditions that poll a library's state), or
// until the deadline.
func waitFor(s system, deadline time.Duration, cond func() bool) error {
	timeout := time.After(deadline)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ch := s.changed()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-timeout:
			return fmt.Errorf("not within %v", deadline)
		}
	}
}

// usage is the process's CPU time and bytes written through write(2) so
// far (/proc/self/io wchar; cohort's TCP frames are written that way).
type usage struct {
	cpu   time.Duration
	wchar uint64
}

func readUsage() usage {
	var ru syscall.Rusage
	var u usage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/self/io"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "wchar: "); ok {
				u.wchar, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return u
}
