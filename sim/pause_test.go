package sim

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// ticker records when its timers fire against when they were due.
type ticker struct {
	env   core.Env
	every time.Duration
	fired [][2]time.Duration // {due, fired}
	got   []arrival
	order []string // "timer" and "msg", in the order handled
}

func (k *ticker) Start(env core.Env) {
	k.env = env
	env.SetTimer(k.every, k.every)
}
func (k *ticker) Fire(t core.Timer) {
	due := t.(time.Duration)
	k.fired = append(k.fired, [2]time.Duration{due, k.env.Now()})
	k.order = append(k.order, "timer")
	k.env.SetTimer(k.every, k.env.Now()+k.every)
}
func (k *ticker) Receive(from core.NodeID, m core.Msg) {
	if x, ok := m.(sized); ok {
		k.got = append(k.got, arrival{from: from, seq: x.Seq, at: k.env.Now()})
		k.order = append(k.order, "msg")
	}
}
func (k *ticker) Handle(core.Event) {}

// A paused node runs nothing for the pause; at its end the overdue timer
// fires, late, and then the held messages arrive in send order.
func TestPauseHoldsEventsInOrder(t *testing.T) {
	w := New(Config{Seed: 1, Network: Constant(time.Millisecond)})
	src := &script{}
	for i := range 5 {
		src.sends = append(src.sends, send{at: time.Duration(10*i+5) * time.Millisecond, to: 1, seq: i})
	}
	w.Add(src)
	k := &ticker{every: 20 * time.Millisecond}
	w.Add(k)
	plan := Plan{Pause{Node: 1, At: 12 * time.Millisecond, For: 40 * time.Millisecond}}
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(100 * time.Millisecond)
	// Sends at 5, 15, 25, 35, 45 ms arrive at 6, 16, 26, 36, 46 ms; the
	// last four are held until 52 ms.
	want := []time.Duration{6, 52, 52, 52, 52}
	if len(k.got) != 5 {
		t.Fatalf("got %v, want 5 messages", k.got)
	}
	for i, a := range k.got {
		if a.seq != i || a.at != want[i]*time.Millisecond {
			t.Errorf("message %d: seq %d at %v, want seq %d at %v", i, a.seq, a.at, i, want[i]*time.Millisecond)
		}
	}
	// The tick due at 20 ms, inside the pause (12..52 ms), fires at 52 ms;
	// the next ones are on time again from there.
	ms := time.Millisecond
	wantFired := [][2]time.Duration{{20 * ms, 52 * ms}, {72 * ms, 72 * ms}, {92 * ms, 92 * ms}}
	if len(k.fired) != len(wantFired) {
		t.Fatalf("timers fired %v, want %v", k.fired, wantFired)
	}
	for i := range wantFired {
		if k.fired[i] != wantFired[i] {
			t.Errorf("timer %d: due %v fired %v, want due %v fired %v", i, k.fired[i][0], k.fired[i][1], wantFired[i][0], wantFired[i][1])
		}
	}
	if want := []string{"msg", "timer", "msg", "msg", "msg", "msg"}; len(k.order) < len(want) || !slices.Equal(k.order[:len(want)], want) {
		t.Errorf("handled %v, want %v first (held timer before held messages)", k.order, want)
	}
	if log := w.FaultLog(); len(log) != 1 {
		t.Errorf("fault log %v, want the pause", log)
	}
}

// A crash during a pause ends it and drops what was held; a pause of a
// crashed node does nothing; a longer pause over a shorter one extends it.
func TestPauseCrashAndOverlap(t *testing.T) {
	w := New(Config{Seed: 1, Network: Constant(time.Millisecond)})
	src := &script{sends: []send{{at: 5 * time.Millisecond, to: 1, seq: 1}, {at: 5 * time.Millisecond, to: 2, seq: 2}}}
	w.Add(src)
	a, b := &ticker{every: time.Second}, &ticker{every: time.Second}
	w.Add(a)
	w.Add(b)
	w.At(time.Millisecond, func() {
		w.Pause(1, 10*time.Millisecond)
		w.Pause(2, 10*time.Millisecond)
		w.Pause(2, 30*time.Millisecond) // extends
	})
	w.CrashAt(8*time.Millisecond, 1)
	w.RunUntil(20 * time.Millisecond)
	if len(a.got) != 0 || w.Paused(1) {
		t.Errorf("crashed node got %v (paused %v), want nothing held or delivered", a.got, w.Paused(1))
	}
	if len(b.got) != 0 || !w.Paused(2) {
		t.Errorf("node paused to 31 ms got %v at 20 ms (paused %v), want nothing yet", b.got, w.Paused(2))
	}
	w.RunUntil(40 * time.Millisecond)
	if len(b.got) != 1 || b.got[0].at != 31*time.Millisecond {
		t.Errorf("node paused to 31 ms got %v, want its message at 31 ms", b.got)
	}
	w.Pause(1, time.Second) // crashed: nothing
	if w.Paused(1) {
		t.Errorf("a crashed node was paused")
	}
	if err := (Plan{Pause{Node: 9, At: 0, For: time.Second}}).Apply(w, nil); !errors.Is(err, ErrBadFault) {
		t.Errorf("pause of a node outside the world: %v, want ErrBadFault", err)
	}
	if err := (Plan{Pause{Node: 1, At: 0, For: 0}}).Apply(w, nil); !errors.Is(err, ErrBadFault) {
		t.Errorf("pause of 0: %v, want ErrBadFault", err)
	}
}
