package member

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// MaxAncestry is how many ancestor epochs a view remembers and a proposal
// carries (newest first): a view's ancestry reaches back at most this far.
const MaxAncestry = maxAncestry

// ViewState is a view with what the protocol keeps about it beyond its
// members: its ancestry (newest first, at most MaxAncestry epochs) and the
// incarnations of its members. The slices and the map are shared with the
// machine: read them, never modify them.
type ViewState struct {
	Epoch    uint64
	Members  []core.NodeID
	Ancestry []uint64
	incs     []uint64 // by position in Members; nil: all 0
}

// Inc returns the incarnation v holds for member id (0 for an initial member,
// a node that is not a member, or a nil v).
func (v *ViewState) Inc(id core.NodeID) uint64 {
	if v == nil {
		return 0
	}
	if v.incs == nil {
		return 0
	}
	if i := slices.Index(v.Members, id); i >= 0 {
		return v.incs[i]
	}
	return 0
}

// Descends reports whether v is the view numbered e or descends from it (e is
// in its ancestry).
func (v *ViewState) Descends(e uint64) bool { return v.Epoch == e || slices.Contains(v.Ancestry, e) }

func (v *view) state() *ViewState {
	if v == nil {
		return nil
	}
	v.fill()
	return &ViewState{Epoch: v.epoch, Members: v.mem, Ancestry: v.ancestry, incs: v.incs}
}

// Inspection is a read-only snapshot of a machine's internal state, for
// invariant checkers and failure reports (package membertest's simulation
// swarm); protocol decisions never depend on it. Slices and views are
// shared with the machine: never modify them.
type Inspection struct {
	Installed    *ViewState    // the installed view; nil while joining
	Pending      *ViewState    // the accepted (or adopted-as-known) proposal, nil if none
	Adopted      *ViewState    // the dead root's proposal Pending is based on, nil if none
	Driving      bool          // a root whose own proposal (Pending) is being stabilized
	Joining      bool          // asking to be admitted (a new, recovered or merging node)
	Initial      []core.NodeID // the initial member list (nil for a joiner)
	Contacts     []core.NodeID // a joiner's contact list
	PendingJoins int           // join requests a root has not admitted yet
	MergeRoot    core.NodeID   // the root of the view this node merges into, core.None if none
}

// Inspect returns a snapshot of m's state (see [Inspection]).
func (m *Member) Inspect() Inspection {
	return Inspection{
		Installed:    m.cur.state(),
		Pending:      m.accepted.state(),
		Adopted:      m.adopted.state(),
		Driving:      m.driving,
		Joining:      m.joining,
		Initial:      m.initial,
		Contacts:     m.contacts,
		PendingJoins: len(m.pendingJoins),
		MergeRoot:    m.mergeRoot,
	}
}

// FailedMembers returns the nodes m knows to have failed (from its detector,
// reports or acknowledgement timeouts), sorted by id.
func (m *Member) FailedMembers() []core.NodeID {
	var ids []core.NodeID
	for id := range m.failed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Supersedes reports whether a proposal numbered epoch, with the given
// ancestry, replaces the uncommitted proposal numbered old (a later proposal
// of old's root is the proposal itself or one of its ancestors): then old
// never committed.
func Supersedes(epoch uint64, ancestry []uint64, old uint64) bool {
	return supersedes(epoch, ancestry, old)
}
