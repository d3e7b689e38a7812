package sim

import (
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Pause models a live process whose event loop stops for a while (a long
// garbage-collection pause, a descheduled process on an overloaded host, a
// SIGSTOP): from At for For, Node's machine is not called at all; the
// messages that reach it and the timers that fall due meanwhile are held
// and handed to it when the pause ends, at that time (so its timers fire
// late and its Env.Now shows it): first every held timer, in deadline
// order, then every held message, in arrival order. That is an order a
// real host's loop may take after a stall (it fires every due timer when
// it wakes, before it reads its inbox), and the harder one for a failure
// detector, whose deadlines expire before it sees the messages that would
// have met them. It sends nothing while paused. Its peers see a silent
// node that then comes back.
type Pause struct {
	Node    core.NodeID
	At, For time.Duration
}

// Start implements Fault.
func (f Pause) Start() time.Duration { return f.At }

func (f Pause) String() string {
	return fmt.Sprintf("pause %v for %v at %v", f.Node, f.For, f.At)
}

func (f Pause) validate(n int, _ Factory) error {
	if err := checkNode(n, f.Node); err != nil {
		return err
	}
	if f.For <= 0 {
		return fmt.Errorf("%w: pause of %v (want > 0)", ErrBadFault, f.For)
	}
	return checkWindow(f.At, f.At+f.For, false)
}

func (f Pause) schedule(w *World, _ Factory) {
	w.At(f.At, func() {
		if w.Alive(f.Node) {
			w.logFault("pause %v for %v", f.Node, f.For)
		}
		w.Pause(f.Node, f.For)
	})
}

// Pause stops node id's machine now for d (see [Pause]); a pause of a
// paused node extends it if it ends later. Pausing a crashed node does
// nothing; a crash ends the pause and drops what was held.
func (w *World) Pause(id core.NodeID, d time.Duration) {
	n := w.nodes[id]
	if !n.alive || d <= 0 {
		return
	}
	w.hash(0xB0, uint64(id), uint64(d))
	n.paused = true
	inc := n.inc
	// Each pause schedules its own end; an end that finds a later pause
	// still running leaves the node paused.
	until := w.now + d
	if n.pauseEnd > until {
		return
	}
	n.pauseEnd = until
	w.At(until, func() {
		if n.inc != inc || n.pauseEnd != until || !n.paused {
			return
		}
		w.resume(id)
	})
}

// Paused reports whether id is paused now.
func (w *World) Paused(id core.NodeID) bool {
	return int(id) < len(w.nodes) && w.nodes[id].paused
}

// resume ends id's pause: the held events reach the machine now, before
// anything that happens later: timers (and a start) first, then messages,
// each kind in the order it was queued.
func (w *World) resume(id core.NodeID) {
	n := w.nodes[id]
	n.paused = false
	held := n.held
	n.held = nil
	w.hash(0xB1, uint64(id), uint64(len(held)))
	for _, msgs := range []bool{false, true} {
		for _, e := range held {
			if isMsg := e.kind == evDeliver || e.kind == evArrive; isMsg == msgs {
				w.dispatch(e)
			}
		}
	}
}
