// Package coretest provides a scripted [core.Env] for unit tests of protocol
// machines: a manual clock, a record of what the machine sent, set and
// emitted, and a helper that fires due timers in order.
package coretest

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Sent is one message a machine sent.
type Sent struct {
	At  time.Duration
	To  core.NodeID
	Msg core.Msg
}

// Pending is a timer that has been set and neither fired nor cancelled.
type Pending struct {
	ID    core.TimerID
	When  time.Duration
	Timer core.Timer
}

// Env is a manual core.Env. The zero value is not usable; call NewEnv.
type Env struct {
	ID      core.NodeID
	T       time.Duration
	Sent    []Sent
	Emitted []core.Event
	pending []Pending
	next    core.TimerID
	rng     *rand.Rand
}

// NewEnv returns an Env for node id whose random source is seeded by seed.
func NewEnv(id core.NodeID, seed uint64) *Env {
	return &Env{ID: id, rng: rand.New(rand.NewPCG(seed, uint64(id)))}
}

func (e *Env) Self() core.NodeID  { return e.ID }
func (e *Env) Now() time.Duration { return e.T }
func (e *Env) Rand() *rand.Rand   { return e.rng }
func (e *Env) Emit(ev core.Event) { e.Emitted = append(e.Emitted, ev) }
func (e *Env) Send(to core.NodeID, m core.Msg) {
	e.Sent = append(e.Sent, Sent{At: e.T, To: to, Msg: m})
}
func (e *Env) Pending() []Pending { return slices.Clone(e.pending) }
func (e *Env) CancelTimer(id core.TimerID) {
	e.pending = slices.DeleteFunc(e.pending, func(p Pending) bool { return p.ID == id })
}

func (e *Env) SetTimer(after time.Duration, t core.Timer) core.TimerID {
	e.next++
	e.pending = append(e.pending, Pending{ID: e.next, When: e.T + after, Timer: t})
	return e.next
}

// TakeSent returns the messages sent so far and forgets them.
func (e *Env) TakeSent() []Sent {
	s := e.Sent
	e.Sent = nil
	return s
}

// TakeEmitted returns the events emitted so far and forgets them.
func (e *Env) TakeEmitted() []core.Event {
	s := e.Emitted
	e.Emitted = nil
	return s
}

// AdvanceTo moves the clock to t, firing every timer due by then on m in
// (time, set order), with the clock at each timer's time.
func (e *Env) AdvanceTo(t time.Duration, m core.Machine) {
	for {
		i := -1
		for j, p := range e.pending {
			if p.When <= t && (i < 0 || p.When < e.pending[i].When) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		p := e.pending[i]
		e.pending = slices.Delete(e.pending, i, i+1)
		if p.When > e.T {
			e.T = p.When
		}
		m.Fire(p.Timer)
	}
	if t > e.T {
		e.T = t
	}
}

// Advance moves the clock forward by d, firing due timers on m.
func (e *Env) Advance(d time.Duration, m core.Machine) { e.AdvanceTo(e.T+d, m) }
