// Package tracker follows the records of a job (package record) and says
// what they mean: each node's process state and current view, each view's
// installations, one line per view change once every live member has
// installed it, and whether the live nodes agree ([Tracker.Agreement]) or
// who holds which view ([Tracker.Disagreement]). It does no I/O; its
// owners (runner.Job, the live demo) feed it and guard it.
package tracker

import (
	"cmp"
	"fmt"
	"github.com/cohort-mp/cohort/internal/record"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// NodeState is what a [Tracker] knows of one node.
type NodeState struct {
	ID        core.NodeID
	PID       int
	Addr      string
	Join      bool // started as a joiner
	Listening bool
	Killed    bool
	KilledAt  time.Time
	Exited    bool
	ExitCode  int
	// View is the last view the node installed (Epoch 0: none yet), at
	// ViewAt on its wall clock.
	View   member.ViewInstalled
	ViewAt time.Time
	// Exit is the node's final report, if it stopped on request.
	Exit *record.Exit
	// Told holds the addresses its supervisor added to its address book
	// (PeerAdded), by node.
	Told map[core.NodeID]string
}

// Live reports whether the node's process runs: spawned, neither killed
// nor exited.
func (n *NodeState) Live() bool { return !n.Killed && !n.Exited }

// EpochState is what a [Tracker] knows of one view.
type EpochState struct {
	Epoch   uint64
	Members []core.NodeID
	// Installed maps each node that installed the view to when it did
	// (its wall clock).
	Installed   map[core.NodeID]time.Time
	First, Last time.Time
	// Stabilized is the root's report for this view, if it sent one.
	Stabilized *member.Stabilized
	printed    bool
	// settled counts the leading members known to have installed the
	// view or died: both last, so full resumes there (it runs with every
	// record, and a view of n members gets n installations).
	settled int
}

// Tracker follows the records of a job: every node's process state and
// current view, every view's installations and the root's stabilization
// reports. [Tracker.Add] returns the lines that describe what changed, one
// per view once every live member has installed it, so that a reader sees
// one line per view change rather than one per node. A Tracker is not safe
// for concurrent use; [runner.Job] guards its own.
type Tracker struct {
	start time.Time
	nodes map[core.NodeID]*NodeState
	// byID is nodes in increasing id order, kept as nodes are added and
	// forgotten: Agreement, which a job's waiter runs at every batch of
	// records (during a view change too, on the same processors), then
	// sorts nothing.
	byID   []*NodeState
	epochs map[uint64]*EpochState
	// open holds the epochs of the views with a member list whose line is
	// not printed yet, the only ones complete looks at: a job that ran
	// for long has many views, and complete runs with every record.
	open map[uint64]struct{}
	// prev is the member list of the last view printed, for the "departed"
	// and "joined" of the next line.
	prev []core.NodeID
}

// NewTracker returns a tracker whose lines give times relative to start.
func NewTracker(start time.Time) *Tracker {
	return &Tracker{start: start, nodes: map[core.NodeID]*NodeState{}, epochs: map[uint64]*EpochState{}, open: map[uint64]struct{}{}}
}

// Node returns the state of node id, creating it if needed.
func (t *Tracker) Node(id core.NodeID) *NodeState {
	n := t.nodes[id]
	if n == nil {
		n = &NodeState{ID: id}
		t.nodes[id] = n
		i, _ := slices.BinarySearchFunc(t.byID, id, func(m *NodeState, id core.NodeID) int { return cmp.Compare(m.ID, id) })
		t.byID = slices.Insert(t.byID, i, n)
	}
	return n
}

// Lookup returns the state of node id, nil if no record named it.
func (t *Tracker) Lookup(id core.NodeID) *NodeState { return t.nodes[id] }

// Forget drops node id, as if no record had named it (a node whose start
// failed and whose id is used again).
func (t *Tracker) Forget(id core.NodeID) {
	delete(t.nodes, id)
	t.byID = slices.DeleteFunc(t.byID, func(n *NodeState) bool { return n.ID == id })
}

// Nodes returns every known node, by id.
func (t *Tracker) Nodes() []*NodeState {
	return slices.Clone(t.byID)
}

// Epoch returns what is known of the view numbered e (nil if no node
// installed it).
func (t *Tracker) Epoch(e uint64) *EpochState { return t.epochs[e] }

// Add takes one record into account and returns the lines it completes.
func (t *Tracker) Add(r record.Record) []string {
	n := t.Node(r.Node)
	var lines []string
	switch e := r.Event.(type) {
	case record.Spawned:
		n.PID, n.Addr, n.Join = e.PID, e.Addr, e.Join
	case record.Listening:
		n.Listening = true
	case record.Killed:
		n.Killed, n.KilledAt = true, r.Time
		lines = append(lines, fmt.Sprintf("%s killed %v (SIGKILL, pid %d)", t.stamp(r.Time), r.Node, n.PID))
	case record.Exited:
		n.Exited, n.ExitCode = true, e.ExitCode
		if !n.Killed && n.Exit == nil {
			msg := fmt.Sprintf("%s %v exited on its own with status %d", t.stamp(r.Time), r.Node, e.ExitCode)
			if e.Err != "" {
				msg += ": " + e.Err
			}
			lines = append(lines, msg)
		}
	case record.Exit:
		n.Exit = &e
	case record.PeerAdded:
		if n.Told == nil {
			n.Told = map[core.NodeID]string{}
		}
		n.Told[e.Peer] = e.Addr
	case member.Evicted:
		lines = append(lines, fmt.Sprintf("%s %v learnt that view %s excludes it; it asks to be admitted again", t.stamp(r.Time), r.Node, member.FormatEpoch(e.Epoch)))
	case member.Stabilized:
		es := t.epoch(e.Epoch, nil)
		es.Stabilized = &e
	case member.ViewInstalled:
		n.View, n.ViewAt = e, r.Time
		es := t.epoch(e.Epoch, e.Members)
		es.Installed[r.Node] = r.Time
		if es.First.IsZero() || r.Time.Before(es.First) {
			es.First = r.Time
		}
		if r.Time.After(es.Last) {
			es.Last = r.Time
		}
	}
	return append(lines, t.complete()...)
}

func (t *Tracker) epoch(e uint64, members []core.NodeID) *EpochState {
	es := t.epochs[e]
	if es == nil {
		es = &EpochState{Epoch: e, Installed: map[core.NodeID]time.Time{}}
		t.epochs[e] = es
	}
	if es.Members == nil && members != nil {
		es.Members = members
		if !es.printed {
			t.open[e] = struct{}{}
		}
	}
	return es
}

// complete returns the lines of the views that every live member has now
// installed, each preceded by the lines of older views that will never be
// complete (some member went on to a newer view without them).
func (t *Tracker) complete() []string {
	if len(t.open) == 0 {
		return nil
	}
	var lines []string
	// The epochs printed or without members are passed over below: open
	// holds the others.
	epochs := slices.Sorted(maps.Keys(t.open))
	for i, e := range epochs {
		es := t.epochs[e]
		if es.printed || es.Members == nil || !t.full(es) {
			continue
		}
		for _, older := range epochs[:i] {
			if o := t.epochs[older]; !o.printed && o.Members != nil {
				lines = append(lines, t.line(o, true))
			}
		}
		lines = append(lines, t.line(es, false))
	}
	return lines
}

// full reports whether every live member of es installed it.
func (t *Tracker) full(es *EpochState) bool {
	for ; es.settled < len(es.Members); es.settled++ {
		id := es.Members[es.settled]
		if _, ok := es.Installed[id]; ok {
			continue
		}
		if n := t.nodes[id]; n == nil || n.Live() {
			return false
		}
	}
	return true
}

// Flush returns the lines of the views installed by some node but not yet
// described (at the end of a run).
func (t *Tracker) Flush() []string {
	var lines []string
	for _, e := range slices.Sorted(maps.Keys(t.epochs)) {
		if es := t.epochs[e]; !es.printed && es.Members != nil {
			lines = append(lines, t.line(es, true))
		}
	}
	return lines
}

func (t *Tracker) stamp(at time.Time) string {
	return fmt.Sprintf("%+9.3fs", at.Sub(t.start).Seconds())
}

// line describes a view; partial marks one that not every live member
// installed.
func (t *Tracker) line(es *EpochState, partial bool) string {
	es.printed = true
	delete(t.open, es.Epoch)
	live, got := 0, 0
	for _, id := range es.Members {
		if n := t.nodes[id]; n == nil || n.Live() {
			live++
			if _, ok := es.Installed[id]; ok {
				got++
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s epoch %s installed by %d/%d live members", t.stamp(es.Last), member.FormatEpoch(es.Epoch), got, live)
	if partial {
		sb.WriteString(" (superseded)")
	}
	if len(es.Installed) > 1 {
		fmt.Fprintf(&sb, " within %s", ms(es.Last.Sub(es.First)))
	}
	fmt.Fprintf(&sb, ": %d members [%s], root %v", len(es.Members), FormatIDs(es.Members), es.Members[0])
	if t.prev != nil {
		joined := without(es.Members, t.prev)
		departed := without(t.prev, es.Members)
		if len(departed) > 0 {
			fmt.Fprintf(&sb, ", departed [%s]", FormatIDs(departed))
		}
		if len(joined) > 0 {
			fmt.Fprintf(&sb, ", joined [%s]", FormatIDs(joined))
		}
		var killedAt time.Time
		var victim core.NodeID
		for _, id := range departed {
			if n := t.nodes[id]; n != nil && n.Killed && n.KilledAt.After(killedAt) {
				killedAt, victim = n.KilledAt, id
			}
		}
		if !killedAt.IsZero() {
			fmt.Fprintf(&sb, "; %s after the kill of %v", ms(es.Last.Sub(killedAt)), victim)
		}
	}
	if s := es.Stabilized; s != nil {
		fmt.Fprintf(&sb, "; T_s %s at the root", ms(s.At-s.Began))
	}
	if !partial {
		t.prev = es.Members
	}
	return sb.String()
}

// Agreement reports whether every live node, except those in outside,
// has installed the same view, and that view holds exactly those nodes.
// It returns that view.
func (t *Tracker) Agreement(outside map[core.NodeID]bool) (member.ViewInstalled, bool) {
	var want []core.NodeID
	var view member.ViewInstalled
	first := true
	for _, n := range t.byID {
		if !n.Live() || outside[n.ID] {
			continue
		}
		want = append(want, n.ID)
		if n.View.Epoch == 0 {
			return member.ViewInstalled{}, false
		}
		if first {
			view, first = n.View, false
		} else if n.View.Epoch != view.Epoch {
			return member.ViewInstalled{}, false
		}
	}
	if first {
		return member.ViewInstalled{}, false
	}
	got := slices.Sorted(slices.Values(view.Members))
	return view, slices.Equal(got, want)
}

// Disagreement describes the views of the live nodes (except outside),
// grouped by view, for a report of why a run did not converge.
func (t *Tracker) Disagreement(outside map[core.NodeID]bool) string {
	groups := map[uint64][]core.NodeID{}
	for _, n := range t.Nodes() {
		if n.Live() && !outside[n.ID] {
			groups[n.View.Epoch] = append(groups[n.View.Epoch], n.ID)
		}
	}
	var parts []string
	for _, e := range slices.Sorted(maps.Keys(groups)) {
		ids := groups[e]
		if e == 0 {
			parts = append(parts, fmt.Sprintf("[%s] have no view", FormatIDs(ids)))
			continue
		}
		members := t.nodes[ids[0]].View.Members
		desc := fmt.Sprintf("[%s] hold epoch %s with %d members [%s]", FormatIDs(ids), member.FormatEpoch(e), len(members), FormatIDs(members))
		var dead, missing []core.NodeID
		for _, id := range members {
			if n := t.nodes[id]; n != nil && !n.Live() {
				dead = append(dead, id)
			}
		}
		for _, n := range t.Nodes() {
			if n.Live() && !outside[n.ID] && !slices.Contains(members, n.ID) {
				missing = append(missing, n.ID)
			}
		}
		if len(dead) > 0 {
			desc += fmt.Sprintf(" including dead [%s]", FormatIDs(dead))
		}
		if len(missing) > 0 {
			desc += fmt.Sprintf(" missing live [%s]", FormatIDs(missing))
		}
		parts = append(parts, desc)
	}
	return strings.Join(parts, "; ")
}

// FormatIDs renders node ids sorted, with runs of consecutive ids as
// ranges: "n0–n5 n7 n9–n15".
func FormatIDs(ids []core.NodeID) string {
	s := slices.Sorted(slices.Values(ids))
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, s[i].String())
		case j == i+1:
			parts = append(parts, s[i].String(), s[j].String())
		default:
			parts = append(parts, s[i].String()+"–"+s[j].String())
		}
		i = j + 1
	}
	return strings.Join(parts, " ")
}

// without returns the ids of a that are not in b, in a's order.
func without(a, b []core.NodeID) []core.NodeID {
	var out []core.NodeID
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// ms renders d in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	m := float64(d) / float64(time.Millisecond)
	switch {
	case m < 10:
		return fmt.Sprintf("%.2f ms", m)
	case m < 1000:
		return fmt.Sprintf("%.0f ms", m)
	}
	return fmt.Sprintf("%.2f s", m/1000)
}
