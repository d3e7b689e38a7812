package main

import (
	"sync"
	"time"
)

// nodeView is one live node's membership as it stands: the names it
// counts as members.
type nodeView struct {
	name    string
	members map[string]bool
}

// watcher collects, during one partial-partition trial, what the
// detectors said about the two members whose path is cut (a and b) and
// about anyone else. Systems report into it from their event goroutines.
type watcher struct {
	a, b string
	t0   time.Time

	mu           sync.Mutex
	suspicions   int             // suspicions of a or b (memberlist: of anyone, see suspectedAnyone)
	suspectors   map[string]bool // the nodes that raised them
	firstSuspect time.Duration   // -1: none
	declarations int             // failure declarations of a or b
	declarers    map[string]bool
	firstDeclare time.Duration
	others       map[string]bool // members other than a and b declared failed or removed
	// thirdSuspicions counts suspicions of members other than a and b.
	thirdSuspicions int
}

func newWatcher(a, b string, t0 time.Time) *watcher {
	return &watcher{a: a, b: b, t0: t0, suspectors: map[string]bool{}, declarers: map[string]bool{},
		others: map[string]bool{}, firstSuspect: -1, firstDeclare: -1}
}

// suspected records that observer's detector began to suspect subject;
// subject "" means the system does not say whom (memberlist), and the
// suspicion counts as one of the pair's.
func (w *watcher) suspected(observer, subject string, at time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if subject != "" && subject != w.a && subject != w.b {
		w.thirdSuspicions++
		return
	}
	w.suspicions++
	w.suspectors[observer] = true
	if w.firstSuspect < 0 {
		w.firstSuspect = at.Sub(w.t0)
	}
}

// declared records that observer declared subject failed.
func (w *watcher) declared(observer, subject string, at time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if subject != w.a && subject != w.b {
		w.others[subject] = true
		return
	}
	w.declarations++
	w.declarers[observer] = true
	if w.firstDeclare < 0 {
		w.firstDeclare = at.Sub(w.t0)
	}
}
