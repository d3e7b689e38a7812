package replicatest

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/sim"
)

// Config is one run's configuration.
type Config struct {
	Seed     uint64
	Ranks    int // logical ranks N
	Replicas int // replicas per rank R
	Steps    int // length of the job's global script
	// KillRank is the rank that loses every replica, or −1: then at most
	// R−1 replicas of each rank crash.
	KillRank int
	// Crashes lists the processes that crash, with the time.
	Crashes []Crash
	// Replay is the replay command, with %d for the seed.
	Replay string
	// Logf, if set, receives one line of statistics per run.
	Logf func(format string, args ...any)
}

// Crash is one process crash of a run.
type Crash struct {
	Phys core.NodeID
	At   time.Duration
}

// ConfigFor draws a run from seed: 2–5 ranks, 1–4 replicas, a script of
// 40–200 steps; in one run of four every replica of one rank crashes
// (and 0…R−1 of each other rank), otherwise 0…R−1 replicas per rank.
// Crashes fall while the programs run (within 10 ms + 1.2 ms per step
// of a rank's share of the script).
func ConfigFor(seed uint64) Config {
	r := rand.New(rand.NewPCG(seed, 0x7265706c))
	c := Config{
		Seed:     seed,
		Ranks:    2 + r.IntN(4),
		Replicas: 1 + r.IntN(4),
		Steps:    40 + r.IntN(161),
		KillRank: -1,
		Replay:   "go test ./replica -run 'TestSwarm$' -seed=%d",
	}
	if r.IntN(4) == 0 {
		c.KillRank = r.IntN(c.Ranks)
	}
	lay := replica.Layout{Ranks: c.Ranks, Replicas: c.Replicas}
	// A rank's program takes about 1.1 ms per step, plus its waits.
	span := 10 + 12*c.Steps/(10*c.Ranks)
	for rank := range c.Ranks {
		n := r.IntN(c.Replicas) // 0…R−1
		if rank == c.KillRank {
			n = c.Replicas
		}
		for _, j := range r.Perm(c.Replicas)[:n] {
			at := time.Duration(2000+r.IntN(span*1000)) * time.Microsecond
			c.Crashes = append(c.Crashes, Crash{Phys: lay.Phys(rank, j), At: at})
		}
	}
	return c
}

// Swarm runs one seed (ConfigFor(seed)); a panic is reported as an error.
// Each call builds its own world: calls may run in parallel.
func Swarm(seed uint64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("seed %d: panic: %v\n%s\nreplay: go test ./replica -run 'TestSwarm$' -seed=%d", seed, r, debug.Stack(), seed)
		}
	}()
	return Run(ConfigFor(seed))
}

func memberConfig() member.Config { return membertest.SimConfig(2) }

// The layers of a process's stack.
const (
	layerOracle  = 0
	layerMember  = 1
	layerReplica = 2
	layerApp     = 3
)

// oracle is a failure detector told by the harness whom to declare.
type oracle struct {
	env      core.Env
	declared map[core.NodeID]bool
}

type declare struct{ node core.NodeID }

func (o *oracle) Start(env core.Env)            { o.env, o.declared = env, map[core.NodeID]bool{} }
func (o *oracle) Receive(core.NodeID, core.Msg) {}
func (o *oracle) Fire(core.Timer)               {}
func (o *oracle) Handle(e core.Event) {
	if d, ok := e.(declare); ok && !o.declared[d.node] {
		o.declared[d.node] = true
		o.env.Emit(core.Failed{Node: d.node})
	}
}

// LayerOf returns the replica layer of process p in a run's world.
func LayerOf(w *sim.World, p core.NodeID) *replica.Layer {
	return w.Node(p).(*process).Stack.Layer(layerReplica).(*replica.Layer)
}

func appOf(w *sim.World, p core.NodeID) *app {
	return w.Node(p).(*process).Stack.Layer(layerApp).(*app)
}

// process is a node's stack behind a model of a host's death: the
// simulator delivers what a crashed node sent before it died, but a real
// host that dies takes with it what sat in its socket buffers. So a
// message from a crashed sender that arrives later than a cut-off (0–2 ms
// after the crash, drawn per pair from the seed) is lost: each receiver
// loses a suffix of the dead sender's stream (TCP stays FIFO), and the
// receivers of one send may get it or not independently.
//
// It also models a transport that places a Data's payload straight into
// the application's buffer (comm's placer): half the Data it receives
// (drawn from the seed) are reserved with Layer.ReserveNext when they can
// be, as a reader does on seeing a frame's header, and their payload
// "arrives" only at the process's next message or timer, so that copies
// and later messages arrive meanwhile. The reservation then ends as a
// reader's does: committed (the read completed); or released, the message
// then lost if its sender has crashed since (the connection broke in the
// middle of the read) or otherwise received as usual (nowhere to place
// it).
type process struct {
	*core.Stack
	id core.NodeID
	w  *sim.World
	ck *checker
	// placing is the Data whose payload is being placed, from placingFrom.
	placing     *replica.Data
	placingFrom core.NodeID
	draws       uint64
}

func (p *process) Receive(from core.NodeID, m core.Msg) {
	p.settle()
	if at, dead := p.ck.crashedAt[from]; dead && p.w.Now() >= at+cutoff(p.ck.c.Seed, from, p.id) {
		p.ck.lost++
		return
	}
	if d, ok := m.(*replica.Data); ok && p.draw()%2 == 0 && p.layer().ReserveNext(from, d) {
		p.placing, p.placingFrom = d, from
		return
	}
	p.Stack.Receive(from, m)
}

// Fire settles a placement first, as Receive does.
func (p *process) Fire(t core.Timer) {
	p.settle()
	p.Stack.Fire(t)
}

func (p *process) layer() *replica.Layer { return p.Stack.Layer(layerReplica).(*replica.Layer) }

func (p *process) draw() uint64 {
	p.draws++
	return mix(p.ck.c.Seed+p.draws*0x9e3779b97f4a7c15, p.placingFrom, p.id)
}

// settled drains the events a placement's end emitted through the stack.
type settled struct{}

// settle ends the placement in progress, if any.
func (p *process) settle() {
	d, from := p.placing, p.placingFrom
	if d == nil {
		return
	}
	p.placing = nil
	_, dead := p.ck.crashedAt[from]
	switch {
	case dead && p.w.Now() >= p.ck.crashedAt[from]+cutoff(p.ck.c.Seed, from, p.id):
		p.layer().ReleaseReserved(d)
		p.ck.lost++
	case p.draw()%4 == 0:
		p.layer().ReleaseReserved(d)
		p.Stack.Handle(settled{})
		p.Stack.Receive(from, d)
		return
	default:
		p.layer().CommitReserved(d)
	}
	p.Stack.Handle(settled{})
}

// Run runs the job described by c and checks it (see the package
// documentation).
func Run(c Config) error {
	lay := replica.Layout{Ranks: c.Ranks, Replicas: c.Replicas}
	rcfg := replica.DefaultConfig(lay)
	rcfg.AckEvery = 4
	rcfg.AckDelay = time.Millisecond
	w := sim.New(sim.Config{Seed: c.Seed, Network: sim.Uniform(100*time.Microsecond, 4*time.Millisecond), Lane: lane})
	prog := script(c)
	ids := make([]core.NodeID, lay.Size())
	for i := range ids {
		ids[i] = core.NodeID(i)
	}
	g, err := member.NewGroup(memberConfig(), ids)
	if err != nil {
		return err
	}
	ck := newChecker(c, lay, prog)
	for p := range ids {
		l, err := replica.New(rcfg)
		if err != nil {
			return err
		}
		rank := lay.Rank(core.NodeID(p))
		a := &app{rank: rank, ranks: c.Ranks, prog: prog.of[rank], control: c.Seed%2 == 1}
		w.Add(&process{Stack: core.NewStack(&oracle{}, g.New(), l, a), id: core.NodeID(p), w: w, ck: ck})
	}
	w.AddChecker(ck)
	replay := c.Replay
	if replay == "" {
		replay = "go test ./replica -run 'TestSwarm$' -seed=%d"
	}
	w.SetReplay(replay)
	for _, x := range c.Crashes {
		w.CrashAt(x.At, x.Phys)
	}
	if err := w.RunChecked(5 * time.Second); err != nil {
		return err
	}
	if c.Logf != nil {
		var tot replica.Stats
		var last time.Duration
		for p := range ids {
			st := LayerOf(w, core.NodeID(p)).Stats()
			tot.Delivered += st.Delivered
			tot.Placed += st.Placed
			tot.Duplicates += st.Duplicates
			tot.Resent += st.Resent
			tot.Takeovers += st.Takeovers
			tot.Skipped += st.Skipped
			tot.Decisions += st.Decisions
			tot.Commits += st.Commits
			if a := appOf(w, core.NodeID(p)); a.done {
				last = max(last, a.doneAt)
			}
		}
		c.Logf("seed %d: %d×%d, %d steps, kill %d, %d crashes, %d messages lost with their sender: %d delivered (%d placed), %d duplicates, %d resent, %d takeovers, %d skipped, %d decisions, %d commits; programs done by %v",
			c.Seed, c.Ranks, c.Replicas, c.Steps, c.KillRank, len(c.Crashes), ck.lost, tot.Delivered, tot.Placed, tot.Duplicates, tot.Resent, tot.Takeovers, tot.Skipped, tot.Decisions, tot.Commits, last)
	}
	if err := ck.end(w); err != nil {
		return fmt.Errorf("seed %d (%d ranks × %d replicas, %d steps, kill rank %d, crashes %v): %w\nreplay: %s",
			c.Seed, c.Ranks, c.Replicas, c.Steps, c.KillRank, c.Crashes, err, fmt.Sprintf(replay, c.Seed))
	}
	return w.Finish()
}

// ---- the program ----

type opKind uint8

const (
	opSend opKind = iota
	opRecv
	opDecide
	opCompute
)

// step is one step of a rank's program: send to peer, receive message seq
// of the channel from peer (wait until it is delivered, or peer failed),
// decide, or compute.
type step struct {
	op   opKind
	peer int
	seq  uint64
}

// program is the job's script projected on each rank, and the number of
// messages each channel carries.
type program struct {
	of    [][]step // by rank
	sends [][]uint64
}

// script draws the job's global script from the seed and projects it on
// each rank. A receive comes after its send in the global order, so the
// projections cannot deadlock: the first blocked step in global order
// would wait for an earlier step, which is done.
func script(c Config) program {
	r := rand.New(rand.NewPCG(c.Seed, 0x70726f67))
	p := program{of: make([][]step, c.Ranks), sends: make([][]uint64, c.Ranks)}
	for i := range p.sends {
		p.sends[i] = make([]uint64, c.Ranks)
	}
	type msg struct {
		src int
		seq uint64
	}
	pending := make([][]msg, c.Ranks) // by destination
	recv := func(dst, i int) {
		m := pending[dst][i]
		pending[dst] = slices.Delete(pending[dst], i, i+1)
		p.of[dst] = append(p.of[dst], step{op: opRecv, peer: m.src, seq: m.seq})
	}
	for range c.Steps {
		rank := r.IntN(c.Ranks)
		switch x := r.IntN(20); {
		case x < 4 && len(pending[rank]) > 0:
			recv(rank, r.IntN(len(pending[rank])))
		case x < 13:
			dst := r.IntN(c.Ranks)
			p.sends[rank][dst]++
			p.of[rank] = append(p.of[rank], step{op: opSend, peer: dst})
			pending[dst] = append(pending[dst], msg{src: rank, seq: p.sends[rank][dst]})
		case x < 17:
			p.of[rank] = append(p.of[rank], step{op: opDecide})
		default:
			p.of[rank] = append(p.of[rank], step{op: opCompute})
		}
	}
	for dst := range pending {
		for len(pending[dst]) > 0 {
			recv(dst, r.IntN(len(pending[dst])))
		}
	}
	return p
}

// app runs a rank's program at one replica: each step after a compute time
// drawn from the process's own source (0.2–2 ms), blocking on receives and
// decisions.
type app struct {
	env   core.Env
	rank  int
	ranks int
	prog  []step
	// control: the program's channels are control channels (odd seeds),
	// carried in the other lane (lane).
	control bool

	pc        int
	blocked   bool
	delivered []uint64 // by source rank
	failed    []bool
	decisions uint64
	digest    uint64 // folds in every decided value
	done      bool
	doneAt    time.Duration
	finished  bool // replica.Finished came (after Finish at the end)
}

type stepTimer struct{}

func (a *app) Start(env core.Env) {
	a.env = env
	a.delivered = make([]uint64, a.ranks)
	a.failed = make([]bool, a.ranks)
	a.next()
}

func (a *app) next() {
	if a.pc >= len(a.prog) {
		if !a.done {
			a.done, a.doneAt = true, a.env.Now()
			a.env.Emit(replica.Finish{})
		}
		return
	}
	a.env.SetTimer(200*time.Microsecond+time.Duration(a.env.Rand().Int64N(int64(1800*time.Microsecond))), stepTimer{})
}

func (a *app) Receive(core.NodeID, core.Msg) {}

func (a *app) Fire(core.Timer) { a.run() }

// run executes the current step; it returns with a timer set for the next
// one, or blocked.
func (a *app) run() {
	s := a.prog[a.pc]
	switch s.op {
	case opSend:
		payload := fmt.Appendf(nil, "%d→%d step %d decisions %d:%x", a.rank, s.peer, a.pc, a.decisions, a.digest)
		a.env.Emit(replica.Send{Comm: 0, Dst: s.peer, Tag: int64(a.pc), Payload: payload, Control: a.control})
	case opRecv:
		if a.delivered[s.peer] < s.seq && !a.failed[s.peer] {
			a.blocked = true
			return
		}
	case opDecide:
		a.blocked = true
		// Each replica proposes its own value: only the protocol makes
		// them agree.
		a.env.Emit(replica.Decide{K: a.decisions + 1, Value: fmt.Appendf(nil, "%v@%v", a.env.Self(), a.env.Now())})
		return
	}
	a.pc++
	a.next()
}

func (a *app) Handle(e core.Event) {
	switch x := e.(type) {
	case replica.Delivered:
		a.delivered[x.Src] = x.Seq
	case replica.RankFailed:
		a.failed[x.Rank] = true
	case replica.Finished:
		a.finished = true
		return
	case replica.Decided:
		if x.K != a.decisions+1 || a.pc >= len(a.prog) || a.prog[a.pc].op != opDecide {
			panic(fmt.Sprintf("replicatest: %v: decision %d announced at step %d, want decision %d", a.env.Self(), x.K, a.pc, a.decisions+1))
		}
		a.decisions = x.K
		h := fnv.New64a()
		h.Write(x.Value)
		a.digest = a.digest*31 + h.Sum64()
		a.blocked = false
		a.pc++
		a.next()
		return
	default:
		return
	}
	if a.blocked && a.prog[a.pc].op == opRecv {
		a.blocked = false
		a.run()
	}
}

// lane puts the layer's Data in one lane of a link and every other
// message (a control channel's data among them) in another, as
// transport/tcp carries Data in its data queue and the rest in its
// control lane; the membership's and the detector's messages share the
// control lane.
func lane(m core.Msg) int {
	if m.Kind() == replica.KindData {
		return 0
	}
	return 1
}
