// Package chaos is a deterministic in-process simulation for the
// fault-tolerance state machines of the N-Queens programs (packages steal
// and master): it delivers their messages in a random order, hands out
// failure notices late and in any order, and kills random participants at
// random steps — all drawn from one seed, so that any run can be replayed.
//
// The network it models is the one the programs get from comm once a rank
// has died: messages between live ranks arrive (in any order: the machines
// must not rely on FIFO), messages to a dead rank are lost, messages a rank
// sent before it died may still arrive after its death, and every survivor
// eventually learns of every death, each at its own time.
//
// Use:
//
//	rep, err := chaos.Run(chaos.Config{Seed: seed, MaxKills: 2, Protected: []int{0}}, nodes)
//	// err != nil: a node failed, the run deadlocked or ran out of steps;
//	// rep.Count is the count reported by the first node that finished.
package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Envelope is a message to rank To.
type Envelope[M any] struct {
	To  int
	Msg M
}

// Node is a participant as the simulation drives it.
type Node[M any] interface {
	Start() []Envelope[M]
	// Work does one step of local work; busy is false when there was none.
	Work() (outs []Envelope[M], busy bool)
	Receive(from int, m M) []Envelope[M]
	Failed(rank int) []Envelope[M]
	// Result reports the final count once this node knows it.
	Result() (count uint64, done bool)
	// Err reports a node that cannot go on (for example a lost root).
	Err() error
}

// Config drives one run.
type Config struct {
	Seed       uint64
	MaxKills   int     // at most this many ranks are killed
	KillChance float64 // probability that a step kills a rank, while kills remain
	Protected  []int   // ranks never killed
	MaxSteps   int     // the run fails after this many steps (0: 10,000,000)
	// Wire, if set, is applied to every message as it is delivered (an
	// encode/decode round trip).
	Wire func(any) (any, error)
}

// Report describes a finished run.
type Report struct {
	Steps     int
	Delivered int   // messages delivered
	Lost      int   // messages sent to dead ranks
	Killed    []int // ranks killed, in order
	KillSteps []int // the step of each kill
	Finisher  int   // the rank that first reported the result
	Count     uint64
}

// Errors.
var (
	ErrDeadlock = errors.New("chaos: nothing left to do and no node finished")
	ErrSteps    = errors.New("chaos: step budget exhausted")
	ErrNode     = errors.New("chaos: a node gave up")
)

type inflight[M any] struct {
	from, to int
	msg      M
}

type notice struct{ observer, dead int }

// Run drives nodes (rank i is nodes[i]) until one reports a result.
func Run[M any](cfg Config, nodes []Node[M]) (Report, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xc4a05))
	maxSteps := cfg.MaxSteps
	if maxSteps == 0 {
		maxSteps = 10_000_000
	}
	n := len(nodes)
	dead := make([]bool, n)
	var msgs []inflight[M]
	var notices []notice
	var rep Report

	send := func(from int, outs []Envelope[M]) {
		for _, o := range outs {
			if o.To < 0 || o.To >= n || dead[o.To] {
				rep.Lost++
				continue
			}
			msgs = append(msgs, inflight[M]{from: from, to: o.To, msg: o.Msg})
		}
	}
	check := func(r int) (bool, error) {
		if err := nodes[r].Err(); err != nil {
			return false, fmt.Errorf("%w: rank %d: %w", ErrNode, r, err)
		}
		if c, ok := nodes[r].Result(); ok {
			rep.Finisher, rep.Count = r, c
			return true, nil
		}
		return false, nil
	}

	for r := range nodes {
		send(r, nodes[r].Start())
	}
	idleRounds := 0
	for rep.Steps = 0; rep.Steps < maxSteps; rep.Steps++ {
		// A kill?
		if len(rep.Killed) < cfg.MaxKills && rng.Float64() < cfg.KillChance {
			var cands []int
			for r := range n {
				if !dead[r] && !slices.Contains(cfg.Protected, r) {
					cands = append(cands, r)
				}
			}
			if len(cands) > 1 || (len(cands) == 1 && liveCount(dead) > 1) {
				v := cands[rng.IntN(len(cands))]
				dead[v] = true
				rep.Killed = append(rep.Killed, v)
				rep.KillSteps = append(rep.KillSteps, rep.Steps)
				for r := range n {
					if !dead[r] {
						notices = append(notices, notice{observer: r, dead: v})
					}
				}
				continue
			}
		}
		// Otherwise one of: deliver a message, deliver a notice, work.
		total := len(msgs) + len(notices) + 1
		pick := rng.IntN(total)
		var r int
		switch {
		case pick < len(msgs):
			m := msgs[pick]
			msgs = slices.Delete(msgs, pick, pick+1)
			if dead[m.to] {
				rep.Lost++
				continue
			}
			r = m.to
			msg := m.msg
			if cfg.Wire != nil {
				v, err := cfg.Wire(msg)
				if err != nil {
					return rep, fmt.Errorf("chaos: wire round trip of %+v: %w", msg, err)
				}
				msg = v.(M)
			}
			rep.Delivered++
			send(r, nodes[r].Receive(m.from, msg))
			idleRounds = 0
		case pick < len(msgs)+len(notices):
			i := pick - len(msgs)
			nt := notices[i]
			notices = slices.Delete(notices, i, i+1)
			if dead[nt.observer] {
				continue
			}
			r = nt.observer
			send(r, nodes[r].Failed(nt.dead))
			idleRounds = 0
		default:
			var live []int
			for x := range n {
				if !dead[x] {
					live = append(live, x)
				}
			}
			if len(live) == 0 {
				return rep, fmt.Errorf("%w: every rank is dead", ErrDeadlock)
			}
			r = live[rng.IntN(len(live))]
			outs, busy := nodes[r].Work()
			send(r, outs)
			if busy || len(outs) > 0 {
				idleRounds = 0
			} else if len(msgs) == 0 && len(notices) == 0 {
				idleRounds++
				if idleRounds > 100*n {
					return rep, ErrDeadlock
				}
			}
		}
		if ok, err := check(r); ok || err != nil {
			return rep, err
		}
	}
	return rep, fmt.Errorf("%w after %d steps", ErrSteps, rep.Steps)
}

func liveCount(dead []bool) int {
	c := 0
	for _, d := range dead {
		if !d {
			c++
		}
	}
	return c
}

// Machine is the shape of the state machines of packages steal and master:
// the methods of Node, with messages to send in the machine's own type O.
type Machine[M, O any] interface {
	Start() []O
	Work() ([]O, bool)
	Receive(from int, m M) []O
	Failed(rank int) []O
	Result() (uint64, bool)
	Err() error
}

// Adapt makes a Node of a Machine; route says where an O goes and what it
// carries.
func Adapt[M, O any](m Machine[M, O], route func(O) (to int, msg M)) Node[M] {
	return adapted[M, O]{m: m, route: route}
}

type adapted[M, O any] struct {
	m     Machine[M, O]
	route func(O) (int, M)
}

func (a adapted[M, O]) wrap(outs []O) []Envelope[M] {
	env := make([]Envelope[M], len(outs))
	for i, o := range outs {
		env[i].To, env[i].Msg = a.route(o)
	}
	return env
}

func (a adapted[M, O]) Start() []Envelope[M] { return a.wrap(a.m.Start()) }
func (a adapted[M, O]) Work() ([]Envelope[M], bool) {
	outs, busy := a.m.Work()
	return a.wrap(outs), busy
}
func (a adapted[M, O]) Receive(from int, m M) []Envelope[M] { return a.wrap(a.m.Receive(from, m)) }
func (a adapted[M, O]) Failed(r int) []Envelope[M]          { return a.wrap(a.m.Failed(r)) }
func (a adapted[M, O]) Result() (uint64, bool)              { return a.m.Result() }
func (a adapted[M, O]) Err() error                          { return a.m.Err() }

// Seeds returns the seeds of count runs: replay alone if it is not 0, else
// consecutive seeds from a random base, which it logs.
func Seeds(tb interface{ Logf(string, ...any) }, replay uint64, count int) []uint64 {
	if replay != 0 {
		return []uint64{replay}
	}
	base := rand.Uint64()
	tb.Logf("base seed %d; replay one run with -seed <seed>", base)
	out := make([]uint64, count)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}
