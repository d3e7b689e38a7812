package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// ErrBadFault is returned (wrapped) by [Plan.Apply] for a fault that cannot
// be applied: a node id outside the world, a window that ends before it
// starts, a probability outside [0, 1], a recovery with no machine.
var ErrBadFault = errors.New("sim: bad fault")

// Factory builds the machine that runs as node id, for nodes that restart.
type Factory func(id core.NodeID) core.Machine

// Fault is one injected failure, as plain data: [Crash], [Recover], [Pause],
// [CrashRandom], [Cut], [Heal], [Partition], [Loss], [DelaySpike] and
// [HealAll]. Its String says what it does and when, so that a failing run
// can print its whole [Plan].
type Fault interface {
	fmt.Stringer
	// Start is the time the fault takes effect.
	Start() time.Duration
	// validate checks the fault against a world of n nodes.
	validate(n int, factory Factory) error
	// schedule arranges for the fault to happen in w.
	schedule(w *World, factory Factory)
}

// Crash stops Node at At (see [World.Crash]).
type Crash struct {
	Node core.NodeID
	At   time.Duration
}

// Recover restarts Node at At with a fresh machine from Restart, or from the
// factory given to [Plan.Apply] when Restart is nil. A node that is alive at
// At is left alone.
type Recover struct {
	Node    core.NodeID
	At      time.Duration
	Restart func() core.Machine
}

// CrashRandom crashes K nodes at At, drawn uniformly among the nodes alive
// then with the world's random source ([World.Rand]); fewer if fewer live.
type CrashRandom struct {
	K  int
	At time.Duration
}

// Cut drops every message between A and B, both ways, from At until Until
// (or until a [Heal] or [HealAll] when Until is 0): a partial partition, in
// which A and B still reach every other node. With OneWay it drops only the
// messages from A to B, and those from B to A are delivered. Cuts overlap
// per direction: a direction is healed when no cut holds it any more.
type Cut struct {
	A, B      core.NodeID
	At, Until time.Duration
	OneWay    bool
}

// Heal ends every cut between A and B at At, one-way cuts either way
// included.
type Heal struct {
	A, B core.NodeID
	At   time.Duration
}

// Partition splits the nodes into Groups, plus one group of the nodes named
// in none, from At until Until (or until [HealAll] when Until is 0). While
// several partitions overlap, two nodes can talk only if every one of them
// puts the two on the same side.
type Partition struct {
	Groups    [][]core.NodeID
	At, Until time.Duration
}

// Loss loses each message sent in [From, Until) with probability P. While
// windows overlap, the largest P applies.
type Loss struct {
	P           float64
	From, Until time.Duration
}

// DelaySpike adds Extra to every message sent in [From, Until) between the
// given nodes (see [Spike] for A and B; both nil means every message).
// Overlapping spikes add up.
type DelaySpike struct {
	Extra       time.Duration
	From, Until time.Duration
	A, B        []core.NodeID
}

// HealAll ends, at At, every partition, cut, loss window and delay spike:
// the start of a liveness phase. Crashed nodes stay crashed.
type HealAll struct {
	At time.Duration
}

// Start implements Fault.
func (f Crash) Start() time.Duration       { return f.At }
func (f Recover) Start() time.Duration     { return f.At }
func (f CrashRandom) Start() time.Duration { return f.At }
func (f Cut) Start() time.Duration         { return f.At }
func (f Heal) Start() time.Duration        { return f.At }
func (f Partition) Start() time.Duration   { return f.At }
func (f Loss) Start() time.Duration        { return f.From }
func (f DelaySpike) Start() time.Duration  { return f.From }
func (f HealAll) Start() time.Duration     { return f.At }

func (f Crash) String() string { return fmt.Sprintf("crash %v at %v", f.Node, f.At) }
func (f Recover) String() string {
	return fmt.Sprintf("recover %v at %v", f.Node, f.At)
}
func (f CrashRandom) String() string { return fmt.Sprintf("crash %d random at %v", f.K, f.At) }
func (f Cut) String() string {
	if f.Until == 0 {
		return fmt.Sprintf("cut %s at %v", f.link(), f.At)
	}
	return fmt.Sprintf("cut %s in [%v,%v)", f.link(), f.At, f.Until)
}

// link names the cut's link: a-b both ways, a->b one way.
func (f Cut) link() string {
	if f.OneWay {
		return fmt.Sprintf("%v->%v", f.A, f.B)
	}
	return fmt.Sprintf("%v-%v", f.A, f.B)
}
func (f Heal) String() string { return fmt.Sprintf("heal %v-%v at %v", f.A, f.B, f.At) }
func (f Partition) String() string {
	var b strings.Builder
	b.WriteString("partition ")
	for _, g := range f.Groups {
		b.WriteString(nodeSet(g))
		b.WriteString("|")
	}
	b.WriteString("rest")
	if f.Until == 0 {
		fmt.Fprintf(&b, " at %v", f.At)
	} else {
		fmt.Fprintf(&b, " in [%v,%v)", f.At, f.Until)
	}
	return b.String()
}
func (f Loss) String() string {
	return fmt.Sprintf("loss %.3g%% in [%v,%v)", f.P*100, f.From, f.Until)
}
func (f DelaySpike) String() string {
	return "delay " + Spike(f).String()
}
func (f HealAll) String() string { return fmt.Sprintf("heal all at %v", f.At) }

// nodeSet prints ids compactly as sorted ranges, {n1-n4,n9}, eliding the
// middle of long sets (a run is replayed from its seed, not from this text).
func nodeSet(ids []core.NodeID) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	s = slices.Compact(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, s[i].String())
		} else {
			parts = append(parts, fmt.Sprintf("%v-%v", s[i], s[j]))
		}
		i = j + 1
	}
	const keep = 12
	if len(parts) > keep {
		n := len(parts) - keep
		parts = append(parts[:keep/2:keep/2], append([]string{fmt.Sprintf("…%d ranges…", n)}, parts[len(parts)-keep/2:]...)...)
	}
	return fmt.Sprintf("{%s (%d)}", strings.Join(parts, ","), len(s))
}

func checkNode(n int, ids ...core.NodeID) error {
	for _, id := range ids {
		if int64(id) >= int64(n) {
			return fmt.Errorf("%w: node %v outside a world of %d nodes", ErrBadFault, id, n)
		}
	}
	return nil
}

func checkWindow(from, until time.Duration, open bool) error {
	if from < 0 {
		return fmt.Errorf("%w: negative time %v", ErrBadFault, from)
	}
	if until == 0 && open {
		return nil
	}
	if until <= from {
		return fmt.Errorf("%w: window [%v,%v) ends before it starts", ErrBadFault, from, until)
	}
	return nil
}

func (f Crash) validate(n int, _ Factory) error {
	if err := checkWindow(f.At, 0, true); err != nil {
		return err
	}
	return checkNode(n, f.Node)
}

func (f Recover) validate(n int, factory Factory) error {
	if err := checkWindow(f.At, 0, true); err != nil {
		return err
	}
	if f.Restart == nil && factory == nil {
		return fmt.Errorf("%w: %v has no Restart and the plan has no factory", ErrBadFault, f)
	}
	return checkNode(n, f.Node)
}

func (f CrashRandom) validate(int, Factory) error {
	if f.K < 0 {
		return fmt.Errorf("%w: crash of %d nodes", ErrBadFault, f.K)
	}
	return checkWindow(f.At, 0, true)
}

func (f Cut) validate(n int, _ Factory) error {
	if err := checkWindow(f.At, f.Until, true); err != nil {
		return err
	}
	return checkNode(n, f.A, f.B)
}

func (f Heal) validate(n int, _ Factory) error {
	if err := checkWindow(f.At, 0, true); err != nil {
		return err
	}
	return checkNode(n, f.A, f.B)
}

func (f Partition) validate(n int, _ Factory) error {
	if err := checkWindow(f.At, f.Until, true); err != nil {
		return err
	}
	seen := map[core.NodeID]bool{}
	for _, g := range f.Groups {
		if err := checkNode(n, g...); err != nil {
			return err
		}
		for _, id := range g {
			if seen[id] {
				return fmt.Errorf("%w: %v is in two groups of one partition", ErrBadFault, id)
			}
			seen[id] = true
		}
	}
	return nil
}

func (f Loss) validate(int, Factory) error {
	if !(f.P >= 0 && f.P <= 1) {
		return fmt.Errorf("%w: loss probability %v outside [0,1]", ErrBadFault, f.P)
	}
	return checkWindow(f.From, f.Until, false)
}

func (f DelaySpike) validate(n int, _ Factory) error {
	if f.Extra < 0 {
		return fmt.Errorf("%w: negative delay %v", ErrBadFault, f.Extra)
	}
	if f.A == nil && f.B != nil {
		return fmt.Errorf("%w: delay spike with B but no A", ErrBadFault)
	}
	if err := checkNode(n, f.A...); err != nil {
		return err
	}
	if err := checkNode(n, f.B...); err != nil {
		return err
	}
	return checkWindow(f.From, f.Until, false)
}

func (f HealAll) validate(int, Factory) error { return checkWindow(f.At, 0, true) }

// Plan is a list of faults to inject into one run.
type Plan []Fault

// String lists the faults, one per line.
func (p Plan) String() string {
	if len(p) == 0 {
		return "no faults"
	}
	lines := make([]string, len(p))
	for i, f := range p {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// HealedAt is the time of the plan's last [HealAll] (the start of its
// liveness phase), or -1 if it has none.
func (p Plan) HealedAt() time.Duration {
	at := time.Duration(-1)
	for _, f := range p {
		if h, ok := f.(HealAll); ok {
			at = max(at, h.At)
		}
	}
	return at
}

// Apply schedules every fault of p in w, in plan order for faults at the
// same time. Nodes must have been added already. factory builds the machine
// of a restarting node (it may be nil if every Recover has its own Restart).
// Apply checks the whole plan first and schedules nothing if a fault is bad.
// The world remembers the plan, so a checker's violation can print it.
func (p Plan) Apply(w *World, factory Factory) error {
	for i, f := range p {
		if f == nil {
			return fmt.Errorf("%w: fault %d is nil", ErrBadFault, i)
		}
		if err := f.validate(w.Len(), factory); err != nil {
			return fmt.Errorf("fault %d (%v): %w", i, f, err)
		}
	}
	fs := w.faultState()
	fs.plan = append(fs.plan, p...)
	for _, f := range p {
		f.schedule(w, factory)
	}
	return nil
}

// Plan returns every fault applied to w so far, in Apply order.
func (w *World) Plan() Plan {
	if w.faults == nil {
		return nil
	}
	return slices.Clone(w.faults.plan)
}

// FaultLog returns what the applied faults did, one line each, in time
// order, with the choices made at run time (the victims of a CrashRandom).
func (w *World) FaultLog() []string {
	if w.faults == nil {
		return nil
	}
	return slices.Clone(w.faults.log)
}

// faultState is the part of the world's network state owned by faults:
// windows that overlap are combined here and the result pushed into the
// world's loss, cuts and partition.
type faultState struct {
	plan   Plan
	log    []string
	nextID int
	parts  map[int]Partition
	losses map[int]float64
	cuts   map[uint64]map[int]bool // directed pair -> ids of the active Cut faults that drop it
	spikes *spiky
}

func (w *World) faultState() *faultState {
	if w.faults == nil {
		w.faults = &faultState{parts: map[int]Partition{}, losses: map[int]float64{}, cuts: map[uint64]map[int]bool{}}
	}
	return w.faults
}

func (w *World) logFault(format string, args ...any) {
	fs := w.faultState()
	fs.log = append(fs.log, fmt.Sprintf("%v: ", w.now)+fmt.Sprintf(format, args...))
}

func (f Crash) schedule(w *World, _ Factory) {
	w.At(f.At, func() {
		if w.Alive(f.Node) {
			w.logFault("crash %v", f.Node)
		}
		w.Crash(f.Node)
	})
}

func (f Recover) schedule(w *World, factory Factory) {
	w.At(f.At, func() {
		if w.Alive(f.Node) {
			w.logFault("recover %v: already alive", f.Node)
			return
		}
		var m core.Machine
		if f.Restart != nil {
			m = f.Restart()
		} else {
			m = factory(f.Node)
		}
		w.logFault("recover %v", f.Node)
		w.Recover(f.Node, m)
	})
}

func (f CrashRandom) schedule(w *World, _ Factory) {
	w.At(f.At, func() {
		var live []core.NodeID
		for i := range w.Len() {
			if w.Alive(core.NodeID(i)) {
				live = append(live, core.NodeID(i))
			}
		}
		k := min(f.K, len(live))
		r := w.Rand()
		for i := range k {
			j := i + r.IntN(len(live)-i)
			live[i], live[j] = live[j], live[i]
		}
		victims := live[:k]
		slices.Sort(victims)
		w.logFault("crash random %s", nodeSet(victims))
		for _, id := range victims {
			w.Crash(id)
		}
	})
}

// directions lists the directed pairs the cut drops.
func (f Cut) directions() [][2]core.NodeID {
	if f.OneWay || f.A == f.B {
		return [][2]core.NodeID{{f.A, f.B}}
	}
	return [][2]core.NodeID{{f.A, f.B}, {f.B, f.A}}
}

func (f Cut) schedule(w *World, _ Factory) {
	fs := w.faultState()
	fs.nextID++
	id := fs.nextID
	dirs := f.directions()
	w.At(f.At, func() {
		for _, d := range dirs {
			k := pairKey(d[0], d[1])
			if fs.cuts[k] == nil {
				fs.cuts[k] = map[int]bool{}
			}
			fs.cuts[k][id] = true
			w.CutOneWay(d[0], d[1])
		}
		w.logFault("cut %s", f.link())
	})
	if f.Until == 0 {
		return
	}
	w.At(f.Until, func() {
		var healed [][2]core.NodeID
		for _, d := range dirs {
			k := pairKey(d[0], d[1])
			if !fs.cuts[k][id] {
				continue // healed already
			}
			delete(fs.cuts[k], id)
			if len(fs.cuts[k]) == 0 {
				delete(fs.cuts, k)
				w.HealOneWay(d[0], d[1])
				healed = append(healed, d)
			}
		}
		switch {
		case len(healed) == 2:
			w.logFault("heal %v-%v", f.A, f.B)
		case len(healed) == 1:
			w.logFault("heal %v->%v", healed[0][0], healed[0][1])
		}
	})
}

func (f Heal) schedule(w *World, _ Factory) {
	fs := w.faultState()
	w.At(f.At, func() {
		delete(fs.cuts, pairKey(f.A, f.B))
		delete(fs.cuts, pairKey(f.B, f.A))
		w.Heal(f.A, f.B)
		w.logFault("heal %v-%v", f.A, f.B)
	})
}

func (f Partition) schedule(w *World, _ Factory) {
	fs := w.faultState()
	fs.nextID++
	id := fs.nextID
	w.At(f.At, func() {
		fs.parts[id] = f
		w.applyPartitions()
		w.logFault("partition %d starts", id)
	})
	if f.Until != 0 {
		w.At(f.Until, func() {
			if _, ok := fs.parts[id]; ok {
				delete(fs.parts, id)
				w.applyPartitions()
				w.logFault("partition %d heals", id)
			}
		})
	}
}

// applyPartitions sets the world's groups to the meet of the active
// partitions: two nodes share a group iff every partition puts them on the
// same side.
func (w *World) applyPartitions() {
	fs := w.faults
	if len(fs.parts) == 0 {
		w.group = nil
		return
	}
	ids := make([]int, 0, len(fs.parts))
	for id := range fs.parts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	label := make([]int32, w.Len())
	side := make([]int32, w.Len())
	for _, id := range ids {
		clear(side)
		for gi, g := range fs.parts[id].Groups {
			for _, n := range g {
				side[n] = int32(gi + 1)
			}
		}
		relabel := map[[2]int32]int32{}
		for i := range label {
			k := [2]int32{label[i], side[i]}
			l, ok := relabel[k]
			if !ok {
				l = int32(len(relabel))
				relabel[k] = l
			}
			label[i] = l
		}
	}
	w.group = label
}

func (f Loss) schedule(w *World, _ Factory) {
	fs := w.faultState()
	fs.nextID++
	id := fs.nextID
	w.At(f.From, func() {
		fs.losses[id] = f.P
		w.applyLoss()
		w.logFault("loss %.3g%% starts", f.P*100)
	})
	w.At(f.Until, func() {
		if _, ok := fs.losses[id]; ok {
			delete(fs.losses, id)
			w.applyLoss()
			w.logFault("loss %.3g%% ends", f.P*100)
		}
	})
}

func (w *World) applyLoss() {
	p := 0.0
	for _, l := range w.faults.losses {
		p = math.Max(p, l)
	}
	w.SetLoss(p)
}

// A spike is a window of the network's own, so it is installed at Apply
// time; HealAll cuts it short.
func (f DelaySpike) schedule(w *World, _ Factory) {
	fs := w.faultState()
	if fs.spikes == nil {
		n := WithSpikes(w.cfg.Network)
		switch s := n.(type) {
		case *spiky:
			fs.spikes = s
		case *spikyRouter:
			fs.spikes = s.spiky
		}
		w.useNetwork(n)
	}
	fs.spikes.add(Spike(f))
}

func (f HealAll) schedule(w *World, _ Factory) {
	fs := w.faultState()
	w.At(f.At, func() {
		clear(fs.parts)
		clear(fs.losses)
		clear(fs.cuts)
		w.HealAll()
		w.SetLoss(0)
		if fs.spikes != nil {
			for i := range fs.spikes.spikes {
				if sp := &fs.spikes.spikes[i]; sp.From <= w.now {
					sp.Until = min(sp.Until, w.now)
				}
			}
		}
		w.logFault("heal all")
	})
}
