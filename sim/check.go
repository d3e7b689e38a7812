package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// ErrInvariant is matched (errors.Is) by every [*Violation].
var ErrInvariant = errors.New("sim: invariant violated")

// ObsKind says what an [Obs] reports.
type ObsKind uint8

const (
	// ObsDeliver: message Msg from From was delivered to Node.
	ObsDeliver ObsKind = iota
	// ObsEmit: Node emitted Event.
	ObsEmit
	// ObsCrash: Node crashed.
	ObsCrash
	// ObsRecover: Node restarted with a fresh machine.
	ObsRecover
	// ObsEnd: the run is over ([World.Finish]); Node is core.None.
	ObsEnd
)

var obsNames = [...]string{"deliver", "emit", "crash", "recover", "end"}

func (k ObsKind) String() string {
	if int(k) < len(obsNames) {
		return obsNames[k]
	}
	return fmt.Sprintf("obs%d", uint8(k))
}

// Obs is one observation handed to a [Checker]. Msg and Event are the very
// values the machines handled: a checker must not modify them.
type Obs struct {
	Kind  ObsKind
	At    time.Duration
	Node  core.NodeID
	From  core.NodeID // sender, for ObsDeliver
	Msg   core.Msg    // for ObsDeliver
	Event core.Event  // for ObsEmit
}

// Checker is an invariant checked during a run. Check is called, in the
// world's deterministic order, for every message delivered to a live node
// (after the machine's Receive returns its events are not yet seen), every
// event a node emits, every crash and recovery, and once at the end of the
// run. A non-nil error is a violation: the world stops (Run and Step return
// at once) and [World.Err] reports it. A checker may schedule its own
// deadline checks with [World.At]; an error it reports from there goes
// through [World.Violate].
type Checker interface {
	// Name identifies the invariant in reports.
	Name() string
	// Check inspects one observation.
	Check(w *World, o Obs) error
}

// NodeError names the node at fault in a violation (when it is not the node
// of the observation, as for a deadline check).
type NodeError struct {
	Node core.NodeID
	Err  error
}

func (e *NodeError) Error() string { return fmt.Sprintf("%v: %v", e.Node, e.Err) }
func (e *NodeError) Unwrap() error { return e.Err }

// Violatef returns a [*NodeError] for node with a formatted message.
func Violatef(node core.NodeID, format string, args ...any) error {
	return &NodeError{Node: node, Err: fmt.Errorf(format, args...)}
}

// Violation is the error of a broken invariant: everything needed to see
// what happened and to replay it.
type Violation struct {
	Checker string
	Err     error
	Seed    uint64
	At      time.Duration
	Node    core.NodeID
	// Plan is every fault applied to the world; FaultLog what they did up
	// to the violation (with the victims of random crashes).
	Plan     Plan
	FaultLog []string
	// Replay is the command that replays the run (see [World.SetReplay]).
	Replay string
}

func (v *Violation) Error() string {
	var b strings.Builder
	reason := v.Err
	var ne *NodeError
	if errors.As(reason, &ne) && ne.Node == v.Node {
		reason = ne.Err // the node is already named
	}
	fmt.Fprintf(&b, "sim: invariant %q violated at %v on %v: %v\n", v.Checker, v.At, v.Node, reason)
	fmt.Fprintf(&b, "  seed: %d\n", v.Seed)
	b.WriteString("  plan:\n")
	for _, line := range strings.Split(v.Plan.String(), "\n") {
		fmt.Fprintf(&b, "    %s\n", line)
	}
	if len(v.FaultLog) > 0 {
		b.WriteString("  faults so far:\n")
		for _, line := range v.FaultLog {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	fmt.Fprintf(&b, "  replay: %s", v.Replay)
	return b.String()
}

func (v *Violation) Unwrap() error { return v.Err }

// Is makes errors.Is(v, ErrInvariant) true.
func (v *Violation) Is(target error) bool { return target == ErrInvariant }

// ReplayCommand returns the command that replays seed, from a format such
// as "go test ./fd -run TestSwarm -seed=%d". A format without a verb gets
// " -seed=<seed>" appended; an empty one gives "-seed=<seed>".
func ReplayCommand(format string, seed uint64) string {
	switch {
	case format == "":
		return fmt.Sprintf("-seed=%d", seed)
	case strings.Contains(format, "%"):
		return fmt.Sprintf(format, seed)
	}
	return fmt.Sprintf("%s -seed=%d", format, seed)
}

type checkState struct {
	checkers []Checker
	replay   string
	err      *Violation
	ended    bool
}

// AddChecker registers c on w: from now on it sees every delivery, emitted
// event, crash and recovery.
func (w *World) AddChecker(c Checker) {
	if w.checks == nil {
		w.checks = &checkState{}
		w.OnDeliver(func(at time.Duration, from, to core.NodeID, m core.Msg) {
			w.observe(Obs{Kind: ObsDeliver, At: at, Node: to, From: from, Msg: m})
		})
		w.OnEmit(func(at time.Duration, id core.NodeID, e core.Event) {
			w.observe(Obs{Kind: ObsEmit, At: at, Node: id, From: core.None, Event: e})
		})
		w.onLife = append(w.onLife, func(at time.Duration, id core.NodeID, alive bool) {
			k := ObsCrash
			if alive {
				k = ObsRecover
			}
			w.observe(Obs{Kind: k, At: at, Node: id, From: core.None})
		})
	}
	w.checks.checkers = append(w.checks.checkers, c)
	if a, ok := c.(attacher); ok {
		a.attach(w)
	}
}

// attacher is a checker that starts watching the world when it is added.
type attacher interface{ attach(w *World) }

// SetReplay sets the format of the replay command that violations print;
// see [ReplayCommand].
func (w *World) SetReplay(format string) {
	if w.checks == nil {
		w.checks = &checkState{}
	}
	w.checks.replay = format
}

func (w *World) observe(o Obs) {
	cs := w.checks
	if cs.err != nil {
		return
	}
	for _, c := range cs.checkers {
		if err := c.Check(w, o); err != nil {
			w.violate(c.Name(), o.Node, err)
			return
		}
	}
}

// Violate records a violation of the named invariant found outside Check
// (in a deadline scheduled with At) and stops the world. Only the first
// violation of a run is kept.
func (w *World) Violate(checker string, err error) {
	w.violate(checker, core.None, err)
}

func (w *World) violate(checker string, node core.NodeID, err error) {
	if w.checks == nil {
		w.checks = &checkState{}
	}
	if w.checks.err != nil {
		return
	}
	var ne *NodeError
	if errors.As(err, &ne) {
		node = ne.Node
	}
	w.checks.err = &Violation{
		Checker:  checker,
		Err:      err,
		Seed:     w.cfg.Seed,
		At:       w.now,
		Node:     node,
		Plan:     w.Plan(),
		FaultLog: w.FaultLog(),
		Replay:   ReplayCommand(w.checks.replay, w.cfg.Seed),
	}
	w.halted = true
}

// Err returns the first violation of the run as a [*Violation], or nil.
func (w *World) Err() error {
	if w.checks == nil || w.checks.err == nil {
		return nil
	}
	return w.checks.err
}

// RunChecked runs like RunUntil and returns the first violation, if any.
func (w *World) RunChecked(until time.Duration) error {
	w.RunUntil(until)
	return w.Err()
}

// Finish ends the run for the checkers: each gets an ObsEnd observation
// (once, even if Finish is called again), and Finish returns the first
// violation of the run.
func (w *World) Finish() error {
	if w.checks != nil && !w.checks.ended && w.checks.err == nil {
		w.checks.ended = true
		w.observe(Obs{Kind: ObsEnd, At: w.now, Node: core.None, From: core.None})
	}
	return w.Err()
}
