package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// swarmRun is a heartbeat-detector world under a swarm plan, with the two
// generic checkers: completeness (crash-detected, from the liveness phase)
// and accuracy (no-false-failure, once the healed network has had a timeout
// to settle).
type swarmRun struct {
	n               int
	period, timeout time.Duration
	horizon, live   time.Duration
	net             func(seed uint64) Network
	lazy            bool
	opts            SwarmOptions
	extra           Plan
}

func defaultSwarmRun() swarmRun {
	opts := DefaultSwarmOptions()
	opts.RecoverProb = 0.3
	return swarmRun{
		n: 16, period: 50 * ms, timeout: 200 * ms, horizon: 4 * time.Second, live: 2 * time.Second,
		net:  func(uint64) Network { return Uniform(100*time.Microsecond, 2*ms) },
		opts: opts,
	}
}

func (r swarmRun) bound() time.Duration { return r.timeout + 3*r.period }

func (r swarmRun) world(seed uint64) (*World, Plan) {
	w := New(Config{Seed: seed, Network: r.net(seed)})
	factory := func(core.NodeID) core.Machine {
		h := newHeartbeat(r.n, r.period, r.timeout)
		h.lazy = r.lazy
		return h
	}
	for i := range r.n {
		w.Add(factory(core.NodeID(i)))
	}
	plan := append(Swarm(seed, r.n, r.horizon, r.opts), r.extra...)
	if err := plan.Apply(w, factory); err != nil {
		panic(err)
	}
	w.AddChecker(&CrashDetected{Bound: r.bound(), After: plan.HealedAt()})
	w.AddChecker(NewNoFalseFailure(plan.HealedAt()+r.timeout+r.period, 0, r.timeout+r.period))
	w.SetReplay("go test ./sim -run " + "TestSwarmCheckers -seed=%d")
	return w, plan
}

func (r swarmRun) run(seed uint64) (*World, error) {
	w, _ := r.world(seed)
	if err := w.RunChecked(r.horizon + r.live); err != nil {
		return w, err
	}
	return w, w.Finish()
}

// TestSwarmCheckers runs a correct detector through swarm plans (each with
// at least one crash): both checkers must stay quiet.
func TestSwarmCheckers(t *testing.T) {
	r := defaultSwarmRun()
	r.extra = Plan{Crash{Node: core.NodeID(r.n - 1), At: r.horizon / 2}}
	for _, seed := range simtest.Seeds(t, 12) {
		w, err := r.run(seed)
		if err != nil {
			t.Fatal(err)
		}
		if w.Alive(core.NodeID(r.n - 1)) {
			t.Fatalf("seed %d: the extra crash did not happen", seed)
		}
	}
}

// TestCrashDetectedCatchesLazyDetector: a detector that never declares a
// failure breaks completeness, and the violation says when, where, under
// which seed and plan, and how to replay it.
func TestCrashDetectedCatchesLazyDetector(t *testing.T) {
	r := defaultSwarmRun()
	r.lazy = true
	r.opts = SwarmOptions{} // no other fault
	r.extra = Plan{Crash{Node: 5, At: time.Second}}
	const seed = 77
	w, err := r.run(seed)
	var v *Violation
	if !errors.As(err, &v) || !errors.Is(err, ErrInvariant) {
		t.Fatalf("got %v, want a *Violation", err)
	}
	deadline := r.horizon + r.bound() // the clock starts at the liveness phase
	if v.Checker != "crash-detected" || v.At != deadline || v.Node != 0 || v.Seed != seed {
		t.Fatalf("violation %q at %v on %v seed %d, want crash-detected at %v on n0 seed %d", v.Checker, v.At, v.Node, v.Seed, deadline, seed)
	}
	if w.Now() != deadline || w.Step() {
		t.Fatalf("world did not stop at the violation: now %v", w.Now())
	}
	msg := err.Error()
	for _, want := range []string{"seed: 77", "crash n5 at 1s", "heal all at 4s", "replay: go test ./sim -run TestSwarmCheckers -seed=77", "n5 crashed at 1s but 15 live node(s) {n0-n4,n6-n15 (15)}", "1s: crash n5"} {
		if !strings.Contains(msg, want) {
			t.Errorf("violation message lacks %q:\n%s", want, msg)
		}
	}
	t.Logf("a violation reads:\n%s", msg)
}

// TestNoFalseFailureCatchesTwitchyDetector: a timeout shorter than the
// heartbeat period declares live, connected nodes failed.
func TestNoFalseFailureCatchesTwitchyDetector(t *testing.T) {
	r := defaultSwarmRun()
	r.opts = SwarmOptions{}
	r.timeout = 20 * ms
	_, err := r.run(3)
	var v *Violation
	if !errors.As(err, &v) || v.Checker != "no-false-failure" {
		t.Fatalf("got %v, want a no-false-failure violation", err)
	}
	if v.At < r.horizon+r.timeout+r.period || !strings.Contains(v.Err.Error(), "is alive") {
		t.Fatalf("violation %v at %v", v.Err, v.At)
	}
}

// counter records what a checker is shown, and fails on a chosen message.
type counter struct {
	seen   map[ObsKind]int
	failOn int // sequence number of the delivered ping that breaks it; -1 never
}

func (c *counter) Name() string { return "counter" }
func (c *counter) Check(_ *World, o Obs) error {
	c.seen[o.Kind]++
	if m, ok := o.Msg.(sized); ok && m.Seq == c.failOn {
		return fmt.Errorf("message %d delivered", m.Seq)
	}
	return nil
}

func TestCheckerSeesEverythingOnce(t *testing.T) {
	w, nodes := scripted(Constant(ms), 2)
	nodes[0].sends = []send{{at: 0, to: 1, seq: 1}, {at: 10 * ms, to: 1, seq: 2}, {at: 20 * ms, to: 1, seq: 3}}
	c := &counter{seen: map[ObsKind]int{}, failOn: 2}
	w.AddChecker(c)
	if err := (Plan{Crash{Node: 0, At: 30 * ms}, Recover{Node: 0, At: 40 * ms}}).Apply(w, idle); err != nil {
		t.Fatal(err)
	}
	err := w.RunChecked(time.Second)
	var v *Violation
	if !errors.As(err, &v) || v.At != 11*ms || v.Node != 1 || v.Replay != "-seed=1" {
		t.Fatalf("got %v, want a violation at 11ms on n1", err)
	}
	if w.Now() != 11*ms || nodes[1].got[len(nodes[1].got)-1].seq != 2 {
		t.Fatalf("run went on after the violation: now %v, got %v", w.Now(), nodes[1].got)
	}
	// A clean run sees every delivery, crash, recovery and the end once.
	w, nodes = scripted(Constant(ms), 2)
	nodes[0].sends = []send{{at: 0, to: 1, seq: 1}, {at: 10 * ms, to: 1, seq: 2}}
	c = &counter{seen: map[ObsKind]int{}, failOn: -1}
	w.AddChecker(c)
	if err := (Plan{Crash{Node: 0, At: 30 * ms}, Recover{Node: 0, At: 40 * ms}}).Apply(w, idle); err != nil {
		t.Fatal(err)
	}
	if err := w.RunChecked(time.Second); err != nil {
		t.Fatal(err)
	}
	w.Finish()
	w.Finish()
	want := map[ObsKind]int{ObsDeliver: 2, ObsCrash: 1, ObsRecover: 1, ObsEnd: 1}
	if fmt.Sprint(c.seen) != fmt.Sprint(want) {
		t.Fatalf("checker saw %v, want %v", c.seen, want)
	}
}

func TestReplayCommand(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"go test ./fd -run TestSwarm -seed=%d", "go test ./fd -run TestSwarm -seed=42"},
		{"COHORT_SEED=%d go test ./member", "COHORT_SEED=42 go test ./member"},
		{"go test ./stable -run TestX", "go test ./stable -run TestX -seed=42"},
		{"", "-seed=42"},
	} {
		if got := ReplayCommand(tc.format, 42); got != tc.want {
			t.Errorf("ReplayCommand(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
}
