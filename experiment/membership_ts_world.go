package experiment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/model"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/topo"
)

// blueGeneTorus returns the BlueGene/L partition that holds n nodes: the
// 8×8×8 midplane of the paper's experiments (§5: an entire midplane was
// allocated, so the interconnect is a torus, not a mesh) up to 512 nodes,
// then partitions of 2, 4, … midplanes, doubling the smallest dimension
// (x first): 16×8×8, 16×16×8, 16×16×16, 32×16×16, 32×32×16, 32×32×32 and
// 64×32×32, the full 65,536-node machine. Ranks are placed in order, x
// fastest (sim.Torus), L per hop.
func blueGeneTorus(n int, perHop time.Duration) sim.Torus {
	t := sim.BlueGeneL()
	t.PerHop = perHop
	for t.X*t.Y*t.Z < n {
		switch {
		case t.X <= t.Y && t.X <= t.Z:
			t.X *= 2
		case t.Y <= t.Z:
			t.Y *= 2
		default:
			t.Z *= 2
		}
	}
	return t
}

// failOracle is the failure detector of one node, reduced to an oracle: at
// At it declares Victim failed (core.Failed), as the paper's timeout
// detector would once the victim stops answering (§2.2, §3.4). It sits below
// the member machine in a core.Stack, which hands the verdict to the
// member's Handle.
type failOracle struct {
	env    core.Env
	at     time.Duration
	victim core.NodeID
}

type oracleFire struct{}

func (o *failOracle) Start(env core.Env) {
	o.env = env
	o.env.SetTimer(o.at-env.Now(), oracleFire{})
}
func (o *failOracle) Receive(core.NodeID, core.Msg) {}
func (o *failOracle) Handle(core.Event)             {}
func (o *failOracle) Fire(core.Timer)               { o.env.Emit(core.Failed{Node: o.victim}) }

// tsRun is one simulation: n members, fan-out a, network net.
type tsRun struct {
	net  tsNet
	a, n int
}

// tsResult is what one simulation measured.
type tsResult struct {
	victim, reporter core.NodeID
	height           int           // of the survivors' tree
	ts               time.Duration // Stabilized.At − Began; -1 if never
	began            time.Duration
	installed        time.Duration // last survivor installing the new view, from Began; -1 if not all did
	installs         int
	starts, aborts   int
	members          int // Stabilized.Members
	prepares, acks   int
	commits, reports int
	reportAcks       int
	other            int
	critical         time.Duration // logpStabilization; -1 for the switch
	distance         time.Duration // distance model for this victim (torus); 0 otherwise
	maxHops          int           // largest parent–child hop count (torus)
	maxContention    int           // switch
	events           uint64
	torus            string
}

func (e *membershipTS) switchConfig() sim.SwitchConfig {
	cfg := sim.DefaultSwitchConfig()
	cfg.Base = e.tcp
	cfg.PerNode = e.perNode
	return cfg
}

// baseLatency is the L of the base model drawn for network n: TCP's for
// base-tcp and the switch, BG/L's for base-bgl and the torus.
func (e *membershipTS) baseLatency(n tsNet) time.Duration {
	if n == tsBaseTCP || n == tsSwitch {
		return e.tcp
	}
	return e.latency
}

// isBase reports whether n is one of the two constant-latency networks.
func (n tsNet) isBase() bool { return n == tsBaseTCP || n == tsBaseBGL }

// tsWorld is one simulation of the sweep, built and not yet run.
type tsWorld struct {
	w         *sim.World
	sw        *sim.Switch // the switch network, nil otherwise
	torus     sim.Torus   // the torus network, zero otherwise
	ids       []core.NodeID
	res       *tsResult
	survivors int
}

// newWorld builds the simulation of run r: n members of one group (they
// share its initial view, so the world holds O(n) bytes), the victim's
// crash at tsFailAt and its parent's oracle, and the hooks that fill the
// result.
func (e *membershipTS) newWorld(seed uint64, r tsRun) (*tsWorld, error) {
	pick := rand.New(rand.NewPCG(seed, 0x7473)) // "ts"
	victim := core.NodeID(1 + pick.IntN(r.n-1))
	// Node ids are tree positions in the initial view (ids sorted, §3.2):
	// the victim's parent is the node that talks to it.
	reporter := core.NodeID((int(victim) - 1) / r.a)
	res := &tsResult{victim: victim, reporter: reporter, ts: -1, installed: -1, critical: -1}
	tw := &tsWorld{res: res, survivors: r.n - 1}

	var network sim.Network
	switch r.net {
	case tsBaseTCP, tsBaseBGL:
		network = sim.Constant(e.baseLatency(r.net))
	case tsTorus:
		tw.torus = blueGeneTorus(r.n, e.latency)
		if err := tw.torus.Validate(); err != nil {
			return nil, err
		}
		network = tw.torus
		res.torus = fmt.Sprintf("%d×%d×%d", tw.torus.X, tw.torus.Y, tw.torus.Z)
	case tsSwitch:
		var err error
		if tw.sw, err = sim.NewSwitch(e.switchConfig()); err != nil {
			return nil, err
		}
		network = tw.sw
	}
	w := sim.New(sim.Config{Seed: seed, Network: network, RecvOverhead: e.ocp, NoTrace: true})
	tw.w = w
	tw.ids = make([]core.NodeID, r.n)
	for i := range tw.ids {
		tw.ids[i] = core.NodeID(i)
	}
	w.CrashAt(tsFailAt, victim)
	group, err := member.NewGroup(tsMemberConfig(r.a), tw.ids) // one initial view, shared by the n machines
	if err != nil {
		return nil, err
	}
	for i := range r.n {
		m := group.New()
		if core.NodeID(i) == reporter {
			w.Add(core.NewStack(&failOracle{at: tsFailAt, victim: victim}, m))
		} else {
			w.Add(m)
		}
	}
	var epoch uint64
	stabilized := false
	w.OnEmit(func(at time.Duration, id core.NodeID, ev core.Event) {
		switch x := ev.(type) {
		case member.StabilizationStarted:
			res.starts++
		case member.StabilizationAborted:
			res.aborts++
		case member.Stabilized:
			if !stabilized {
				stabilized = true
				epoch = x.Epoch
				res.began, res.ts, res.members = x.Began, x.At-x.Began, x.Members
			}
		case member.ViewInstalled:
			if stabilized && x.Epoch == epoch {
				res.installs++
				if res.installs == tw.survivors {
					res.installed = at - res.began
				}
			}
		}
	})
	w.OnSend(func(_ time.Duration, _, _ core.NodeID, m core.Msg) {
		switch m.(type) {
		case *member.Prepare:
			res.prepares++
		case *member.Ack:
			res.acks++
		case *member.Commit:
			res.commits++
		case *member.Report:
			res.reports++
		case *member.ReportAck:
			res.reportAcks++
		default:
			res.other++
		}
	})
	return tw, nil
}

// run runs the simulation until every survivor installed the view (or
// nothing is left to do, or an hour of virtual time: the protocol is
// stuck).
func (tw *tsWorld) run(ctx context.Context) error {
	limit := tsFailAt + time.Hour
	for steps := 0; tw.res.installs < tw.survivors; steps++ {
		if steps&(1<<14-1) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !tw.w.Step() || tw.w.Now() > limit {
			break
		}
	}
	tw.res.events = tw.w.Stats().Events
	if tw.sw != nil {
		tw.res.maxContention = tw.sw.MaxContention()
	}
	return nil
}

func (e *membershipTS) runOne(ctx context.Context, seed uint64, r tsRun) (tsResult, error) {
	tw, err := e.newWorld(seed, r)
	if err != nil {
		return tsResult{}, err
	}
	if err := tw.run(ctx); err != nil {
		return *tw.res, err
	}
	res, ids, torus, victim, reporter := *tw.res, tw.ids, tw.torus, tw.res.victim, tw.res.reporter

	// The survivors' view: the initial one without the victim (§3.4: its
	// successors move up one position).
	alive := slices.DeleteFunc(slices.Clone(ids), func(id core.NodeID) bool { return id == victim })
	tree, err := topo.NewRadix(len(alive), r.a)
	if err != nil {
		return res, err
	}
	res.height = tree.Height()
	switch r.net {
	case tsBaseTCP, tsBaseBGL:
		l := e.baseLatency(r.net)
		res.critical, err = logpStabilization(alive, r.a, func(_, _ core.NodeID) time.Duration { return l }, 0, e.ocp, reporter)
	case tsTorus:
		res.critical, err = logpStabilization(alive, r.a, func(a, b core.NodeID) time.Duration {
			d, _ := torus.Transit(a, b, 0, 0, nil)
			return d
		}, 0, e.ocp, reporter)
		if err != nil {
			return res, err
		}
		hops := model.LevelMaxHops(tree, func(p, c int) int { return torus.Hops(alive[p], alive[c]) })
		for _, h := range hops {
			res.maxHops = max(res.maxHops, h)
		}
		res.distance, err = model.DistanceStabilizationTime(e.latency, e.ocp, hops)
	}
	return res, err
}

// tsHeap is the heap one world holds, in bytes: started (every member
// installed the initial view) and after the run (the crash handled, every
// survivor in the new view, the world still referenced).
type tsHeap struct {
	n              int
	started, after float64
}

// tsWorldHeap measures the heap of the world of run r (seed 1). It calls
// runtime.GC, so it must not run beside other worlds.
func (e *membershipTS) tsWorldHeap(ctx context.Context, r tsRun) (tsHeap, error) {
	h := tsHeap{n: r.n}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := float64(ms.HeapAlloc)
	tw, err := e.newWorld(1, r)
	if err != nil {
		return h, err
	}
	tw.w.RunUntil(0)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	h.started = float64(ms.HeapAlloc) - before
	if err := tw.run(ctx); err != nil {
		return h, err
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	h.after = float64(ms.HeapAlloc) - before
	runtime.KeepAlive(tw)
	if tw.res.installs != tw.survivors {
		return h, fmt.Errorf("experiment: heap measurement at n = %d: %d of %d survivors installed the view", r.n, tw.res.installs, tw.survivors)
	}
	return h, nil
}
