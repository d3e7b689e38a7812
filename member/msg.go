package member

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Messages are pointers to the structs below; a message is never modified
// after it is sent (one value may go to several children). Every message
// carries an epoch: the sender's newest view for reports, requests and
// notices, the proposal's epoch for the messages of a view change.

// Report is NODE_FAILURE (Root false) or ROOT_FAILURE (Root true): a node
// whose failure detector declared members failed tells the root (§3.4), or,
// when the root itself is among them, the next live node of the list (§3.6).
// Failed holds every failed member the sender knows of (the paper's list of
// failed nodes, §3.5), in view order.
type Report struct {
	Root   bool
	Epoch  uint64   // the sender's newest view
	Failed []Joiner // the failed members with the incarnation the sender knows
	// Left lists those of Failed that announced they leave ([Leave]), so
	// that a root that has not heard the announcement itself yet excludes
	// them as leavers.
	Left []core.NodeID
}

// ReportAck is FAILURE_DET_ACK: the root acknowledges a report (§3.4), even
// a duplicate, which it otherwise ignores.
type ReportAck struct {
	Epoch  uint64 // the root's newest view
	Failed []Joiner
}

// Prepare is the first phase of a view change, sent by the root to its
// children in the tree of the new view and forwarded by every inner node to
// its own children: FAILED_NODE, ROOT_DEAD, ROOT_AND_NODE_FAILURE,
// NEW_NODE_JOIN or ALIVE_NODE_JOIN, according to Cause. The new view is
// Ancestry[0] (the base, the view the root installed last) minus Failed plus
// Joined appended; a receiver that holds the base recomputes it locally
// (§3.4), one that does not asks its parent for the full list (VIEW_NEED),
// and joiners always get the full list (Full).
type Prepare struct {
	Cause    Cause
	Epoch    uint64        // the proposed view
	Ancestry []uint64      // the base epoch, then older ancestors, newest first
	Failed   []core.NodeID // members of the base that leave, in base order
	Joined   []Joiner      // nodes appended, in order
	// Committed says that the base is a view the root installed (it
	// committed); otherwise the base is a dead root's proposal that the
	// root adopted (§3.6 takeover), which nobody installs.
	Committed bool
	Full      bool          // Members and Incs are set and on the wire
	Members   []core.NodeID // the full member list (Full only)
	Incs      []Joiner      // non-zero incarnations of members, by id (Full only)
	// Left lists the nodes this view change excludes because they
	// announced that they leave, not because they failed: those of Failed
	// the root knew as leavers when it proposed, and, on an adopted dead
	// root's proposal, that proposal's. Every member that installs the
	// view reports them in [ViewInstalled].Left.
	Left []core.NodeID

	v *view // the proposed view, shared in memory; never on the wire
}

// Ack acknowledges a Prepare up the tree once the sender's whole subtree
// has: FAILURE_ACK, NEW_NODE_JOIN_ACK or ALIVE_NODE_JOIN_ACK by Cause.
type Ack struct {
	Cause Cause
	Epoch uint64 // the proposal acknowledged
}

// Commit is the second phase: the root holds every ACK, the view is stable
// and every node installs it when the commit reaches it.
type Commit struct {
	Epoch uint64
}

// JoinRequest is NEW_NODE (Alive false) or NODE_ALIVE (Alive true): From asks
// the root to admit Joiners (itself, or, when a whole side of a healed
// partition merges, every member of its view). A node that is not the root
// forwards it to the root it believes in; Hops bounds forwarding.
type JoinRequest struct {
	Alive   bool
	From    core.NodeID
	Epoch   uint64 // the newest epoch From has seen (0 for a new node)
	Hops    uint8
	Joiners []Joiner
}

// JoinDetAck is JOIN_DET_ACK: the root welcomes a joiner once the view that
// admits it is stable (§3.7).
type JoinDetAck struct {
	Epoch uint64
}

// FullView is a view with everything a node needs to install it.
type FullView struct {
	Epoch    uint64
	Ancestry []uint64
	Members  []core.NodeID
	Incs     []Joiner      // non-zero incarnations, by id
	Left     []core.NodeID // the leavers its change excluded (Prepare.Left)
}

// Nack refuses a Prepare: the receiver holds View (its newest, Pending if it
// is an accepted but uncommitted proposal), which the proposal neither
// descends from nor supersedes, or which is newer than the proposal. The
// proposer adopts View, or learns that it was excluded.
type Nack struct {
	Epoch   uint64 // the proposal refused
	Pending bool
	View    FullView

	v *view
}

// NeedView asks the parent for the full member list of proposal Epoch.
type NeedView struct {
	Epoch uint64
}

// Query asks the proposer of Epoch what became of it (sent when a commit
// is overdue).
type Query struct {
	Epoch uint64
}

// Sync answers a Query (or a join request of a node that is already a
// member) with the root's installed view. Abort, when not 0, is a proposal of
// the sender that will never commit. A joiner, which has no view, answers
// with Abort alone, a proposal it never acknowledged and promises never
// to: View's Epoch is 0, its Ancestry and Members empty, and its Incs the
// joiner's incarnation, for the promise is about that process only.
type Sync struct {
	View  FullView
	Abort uint64
	// Pending says that View is not installed at the sender but is the
	// dead root's proposal it adopted (its proposal Abort was based on it):
	// it may have committed, so the receiver holds on to it.
	Pending bool

	v *view
}

// Notice is EXCLUDED: the sender's view Epoch, whose root is Root, does not
// contain the receiver. It answers messages of excluded nodes (paper
// footnote 1: they are otherwise ignored) and probes departed nodes, so that
// the excluded side of a healed partition merges (see the package doc).
//
// Final says that the sender's group never takes the receiver back
// ([NotifyExcluded]): the receiver takes itself excluded whatever the
// epochs, rather than wait for the sender's side to merge into a newer
// view of its own.
type Notice struct {
	Epoch uint64
	Root  core.NodeID
	Final bool
}

// Leave is LEAVE: the sender, a member of view Epoch under incarnation Inc,
// leaves the group for good (it finished). It takes no further part in the
// protocol; the receiver excludes it as it would a failed member, as a
// leaver. Inc tells a late LEAVE of a former process from the process
// that re-joined under its id since.
type Leave struct {
	Epoch uint64
	Inc   uint64
}

// MinorityNotice tells the members of a side that its root cannot install a
// view: only Alive of the Size members of view Epoch are reachable
// (PartitionMajority).
type MinorityNotice struct {
	Epoch uint64
	Alive uint32
	Size  uint32
}

// Kind implements core.Msg.
func (m *Report) Kind() core.Kind {
	if m.Root {
		return KindRootFailure
	}
	return KindNodeFailure
}
func (m *ReportAck) Kind() core.Kind  { return KindFailureDetAck }
func (m *Prepare) Kind() core.Kind    { return m.Cause.prepareKind() }
func (m *Ack) Kind() core.Kind        { return m.Cause.ackKind() }
func (m *Commit) Kind() core.Kind     { return KindViewCommit }
func (m *JoinDetAck) Kind() core.Kind { return KindJoinDetAck }
func (m *Nack) Kind() core.Kind       { return KindViewNack }
func (m *NeedView) Kind() core.Kind   { return KindViewNeed }
func (m *Query) Kind() core.Kind      { return KindViewQuery }
func (m *Sync) Kind() core.Kind       { return KindViewSync }
func (m *Notice) Kind() core.Kind     { return KindExcluded }
func (m *JoinRequest) Kind() core.Kind {
	if m.Alive {
		return KindNodeAlive
	}
	return KindNewNode
}
func (m *MinorityNotice) Kind() core.Kind { return KindMinority }
func (m *Leave) Kind() core.Kind          { return KindLeave }

// MarshalWire implements wire.Message.
func (m *Report) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	encJoiners(e, m.Failed)
	e.NodeIDs(m.Left)
}

// MarshalWire implements wire.Message.
func (m *ReportAck) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Epoch); encJoiners(e, m.Failed) }

// MarshalWire implements wire.Message.
func (m *Prepare) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarints(m.Ancestry)
	e.NodeIDs(m.Failed)
	encJoiners(e, m.Joined)
	e.Bool(m.Committed)
	e.Bool(m.Full)
	if m.Full {
		e.NodeIDs(m.Members)
		encJoiners(e, m.Incs)
	}
	e.NodeIDs(m.Left)
}

// MarshalWire implements wire.Message.
func (m *Ack) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Epoch) }

// MarshalWire implements wire.Message.
func (m *Commit) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Epoch) }

// MarshalWire implements wire.Message.
func (m *JoinRequest) MarshalWire(e *wire.Encoder) {
	e.NodeID(m.From)
	e.Uvarint(m.Epoch)
	e.Uint8(m.Hops)
	encJoiners(e, m.Joiners)
}

// MarshalWire implements wire.Message.
func (m *JoinDetAck) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Epoch) }

// MarshalWire implements wire.Message.
func (m *Nack) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Bool(m.Pending)
	encFullView(e, &m.View)
}

// MarshalWire implements wire.Message.
func (m *NeedView) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Epoch) }

// MarshalWire implements wire.Message.
func (m *Query) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Epoch) }

// MarshalWire implements wire.Message.
func (m *Sync) MarshalWire(e *wire.Encoder) {
	encFullView(e, &m.View)
	e.Uvarint(m.Abort)
	e.Bool(m.Pending)
}

// MarshalWire implements wire.Message.
func (m *Notice) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.NodeID(m.Root)
	if m.Final {
		e.Bool(true) // absent otherwise: the answers and probes keep their size
	}
}

// MarshalWire implements wire.Message.
func (m *MinorityNotice) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(uint64(m.Alive))
	e.Uvarint(uint64(m.Size))
}

// MarshalWire implements wire.Message.
func (m *Leave) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Epoch); e.Uvarint(m.Inc) }

// WireSize implements core.Sizer.
func (m *Report) WireSize() int         { return wire.Size(m) }
func (m *ReportAck) WireSize() int      { return wire.Size(m) }
func (m *Prepare) WireSize() int        { return wire.Size(m) }
func (m *Ack) WireSize() int            { return wire.Size(m) }
func (m *Commit) WireSize() int         { return wire.Size(m) }
func (m *JoinRequest) WireSize() int    { return wire.Size(m) }
func (m *JoinDetAck) WireSize() int     { return wire.Size(m) }
func (m *Nack) WireSize() int           { return wire.Size(m) }
func (m *NeedView) WireSize() int       { return wire.Size(m) }
func (m *Query) WireSize() int          { return wire.Size(m) }
func (m *Sync) WireSize() int           { return wire.Size(m) }
func (m *Notice) WireSize() int         { return wire.Size(m) }
func (m *MinorityNotice) WireSize() int { return wire.Size(m) }
func (m *Leave) WireSize() int          { return wire.Size(m) }

func encJoiners(e *wire.Encoder, js []Joiner) {
	e.Uvarint(uint64(len(js)))
	for _, j := range js {
		e.NodeID(j.ID)
		e.Uvarint(j.Inc)
	}
}

func encFullView(e *wire.Encoder, v *FullView) {
	e.Uvarint(v.Epoch)
	e.Uvarints(v.Ancestry)
	e.NodeIDs(v.Members)
	encJoiners(e, v.Incs)
	e.NodeIDs(v.Left)
}

// fullView renders v for the wire.
func (v *view) full() FullView {
	return FullView{Epoch: v.epoch, Ancestry: v.ancestry, Members: v.list(), Incs: v.incList(), Left: v.left}
}

// incList returns the non-zero incarnations sorted by id.
func (v *view) incList() []Joiner {
	v.fill()
	var js []Joiner
	for i, inc := range v.incs {
		if inc != 0 {
			js = append(js, Joiner{v.mem[i], inc})
		}
	}
	slices.SortFunc(js, func(a, b Joiner) int { return cmp.Compare(a.ID, b.ID) })
	return js
}

// Errors of the decoders, wrapped in a *wire.DecodeError.
var (
	errEpoch    = fmt.Errorf("%w: epoch counter 0", wire.ErrInvalid)
	errAncestry = fmt.Errorf("%w: ancestry not strictly decreasing below the epoch", wire.ErrInvalid)
	errDup      = fmt.Errorf("%w: node listed twice", wire.ErrInvalid)
	errRootPos  = fmt.Errorf("%w: first member is not the epoch's root", wire.ErrInvalid)
	errEmpty    = fmt.Errorf("%w: empty list", wire.ErrInvalid)
	errForeign  = fmt.Errorf("%w: node is not a member", wire.ErrInvalid)
	errIncZero  = fmt.Errorf("%w: incarnation 0 listed", wire.ErrInvalid)
)

func decJoiners(d *wire.Decoder) []Joiner {
	n := d.Uvarint()
	if d.Err() != nil {
		return nil
	}
	if n > uint64(d.Remaining())/2 { // each joiner takes at least 2 bytes
		d.Fail("joiner count", wire.ErrTooLong)
		return nil
	}
	if n == 0 {
		return nil
	}
	js := make([]Joiner, n)
	for i := range js {
		js[i] = Joiner{ID: d.NodeID(), Inc: d.Uvarint()}
	}
	if d.Err() != nil {
		return nil
	}
	return js
}

func checkEpoch(d *wire.Decoder, e uint64) {
	if d.Err() == nil && EpochCounter(e) == 0 {
		d.Fail("epoch", errEpoch)
	}
}

func checkAncestry(d *wire.Decoder, epoch uint64, a []uint64, min int) {
	if d.Err() != nil {
		return
	}
	if len(a) < min || len(a) > maxAncestry {
		d.Fail("ancestry length", wire.ErrInvalid)
		return
	}
	prev := epoch
	for _, e := range a {
		if e >= prev || EpochCounter(e) == 0 {
			d.Fail("ancestry", errAncestry)
			return
		}
		prev = e
	}
}

// checkNoDup fails d if two of xs have the same id.
func checkNoDup[T any](d *wire.Decoder, what string, xs []T, id func(T) core.NodeID) {
	if d.Err() != nil {
		return
	}
	if _, dup := duplicate(xs, id); dup {
		d.Fail(what, errDup)
	}
}

// duplicate returns an id two of xs share, if any. A proposal or a report
// usually names one or two nodes, compared pairwise at no allocation;
// longer lists go through a set.
func duplicate[T any](xs []T, id func(T) core.NodeID) (core.NodeID, bool) {
	if len(xs) <= pairwiseDup {
		for i := 1; i < len(xs); i++ {
			for j := range i {
				if id(xs[i]) == id(xs[j]) {
					return id(xs[i]), true
				}
			}
		}
		return 0, false
	}
	seen := make(map[core.NodeID]bool, len(xs))
	for _, x := range xs {
		if seen[id(x)] {
			return id(x), true
		}
		seen[id(x)] = true
	}
	return 0, false
}

// pairwiseDup is the longest list duplicate compares pairwise.
const pairwiseDup = 16

func joinerIDs(js []Joiner) []core.NodeID {
	ids := make([]core.NodeID, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}

func nodeID(id core.NodeID) core.NodeID { return id }
func joinerID(j Joiner) core.NodeID     { return j.ID }

// checkMembers checks a full member list with its incarnations.
func checkMembers(d *wire.Decoder, epoch uint64, members []core.NodeID, incs []Joiner) map[core.NodeID]bool {
	if d.Err() != nil {
		return nil
	}
	if len(members) == 0 {
		d.Fail("members", errEmpty)
		return nil
	}
	if members[0] != EpochRoot(epoch) {
		d.Fail("members", errRootPos)
		return nil
	}
	set := make(map[core.NodeID]bool, len(members))
	for _, id := range members {
		if set[id] {
			d.Fail("members", errDup)
			return nil
		}
		set[id] = true
	}
	checkNoDup(d, "incarnations", incs, joinerID)
	for _, j := range incs {
		if d.Err() != nil {
			break
		}
		if !set[j.ID] {
			d.Fail("incarnations", errForeign)
		} else if j.Inc == 0 {
			d.Fail("incarnations", errIncZero)
		}
	}
	return set
}

func decFullView(d *wire.Decoder) FullView { return decFullViewOf(d, d.Uvarint()) }

// decFullViewOf is decFullView once the epoch has been read.
func decFullViewOf(d *wire.Decoder, epoch uint64) FullView {
	v := FullView{Epoch: epoch, Ancestry: d.Uvarints(), Members: d.NodeIDs(), Incs: decJoiners(d)}
	v.Left = d.NodeIDs()
	checkEpoch(d, v.Epoch)
	checkNoDup(d, "left", v.Left, nodeID)
	checkAncestry(d, v.Epoch, v.Ancestry, 0)
	checkMembers(d, v.Epoch, v.Members, v.Incs)
	return v
}

func decReport(root bool) wire.DecodeFunc {
	return func(d *wire.Decoder) (core.Msg, error) {
		m := &Report{Root: root, Epoch: d.Uvarint(), Failed: decJoiners(d)}
		m.Left = d.NodeIDs()
		checkEpoch(d, m.Epoch)
		if d.Err() == nil && len(m.Failed) == 0 {
			d.Fail("failed", errEmpty)
		}
		checkNoDup(d, "failed", m.Failed, joinerID)
		checkNoDup(d, "left", m.Left, nodeID)
		for _, id := range m.Left {
			if d.Err() == nil && !slices.ContainsFunc(m.Failed, func(j Joiner) bool { return j.ID == id }) {
				d.Fail("left", errForeign)
			}
		}
		return m, d.Err()
	}
}

func decReportAck(d *wire.Decoder) (core.Msg, error) {
	m := &ReportAck{Epoch: d.Uvarint(), Failed: decJoiners(d)}
	checkEpoch(d, m.Epoch)
	checkNoDup(d, "failed", m.Failed, joinerID)
	return m, d.Err()
}

// decodedPrepare is a Prepare with room for the lists a proposal usually
// carries, which its decoder fills: every member decodes every proposal,
// and one allocation serves instead of three (longer lists take their own).
type decodedPrepare struct {
	p        Prepare
	ancestry [maxAncestry]uint64
	failed   [2]core.NodeID
}

func decPrepare(c Cause) wire.DecodeFunc {
	return func(d *wire.Decoder) (core.Msg, error) {
		b := new(decodedPrepare)
		m := &b.p
		m.Cause, m.Epoch = c, d.Uvarint()
		m.Ancestry = slices.Clip(d.AppendUvarints(b.ancestry[:0]))
		m.Failed = slices.Clip(d.AppendNodeIDs(b.failed[:0]))
		m.Joined, m.Committed, m.Full = decJoiners(d), d.Bool(), d.Bool()
		if m.Full {
			m.Members = d.NodeIDs()
			m.Incs = decJoiners(d)
		}
		m.Left = d.NodeIDs()
		checkEpoch(d, m.Epoch)
		checkAncestry(d, m.Epoch, m.Ancestry, 1)
		checkNoDup(d, "failed", m.Failed, nodeID)
		checkNoDup(d, "joined", m.Joined, joinerID)
		checkNoDup(d, "left", m.Left, nodeID)
		if d.Err() == nil && len(m.Failed) == 0 && len(m.Joined) == 0 && c != CauseRefresh {
			d.Fail("change", errEmpty)
		}
		if m.Full {
			set := checkMembers(d, m.Epoch, m.Members, m.Incs)
			for _, j := range m.Joined {
				if d.Err() == nil && !set[j.ID] {
					d.Fail("joined", errForeign)
				}
			}
		}
		return m, d.Err()
	}
}

func decAck(c Cause) wire.ReuseFunc {
	return func(d *wire.Decoder, old core.Msg) (core.Msg, error) {
		m, _ := old.(*Ack)
		if m == nil {
			m = new(Ack)
		}
		*m = Ack{Cause: c, Epoch: d.Uvarint()}
		checkEpoch(d, m.Epoch)
		return m, d.Err()
	}
}

func decCommit(d *wire.Decoder, old core.Msg) (core.Msg, error) {
	m, _ := old.(*Commit)
	if m == nil {
		m = new(Commit)
	}
	m.Epoch = d.Uvarint()
	checkEpoch(d, m.Epoch)
	return m, d.Err()
}

func decJoinRequest(alive bool) wire.DecodeFunc {
	return func(d *wire.Decoder) (core.Msg, error) {
		m := &JoinRequest{Alive: alive, From: d.NodeID(), Epoch: d.Uvarint(), Hops: d.Uint8(), Joiners: decJoiners(d)}
		if d.Err() == nil && len(m.Joiners) == 0 {
			d.Fail("joiners", errEmpty)
		}
		checkNoDup(d, "joiners", m.Joiners, joinerID)
		return m, d.Err()
	}
}

func decJoinDetAck(d *wire.Decoder) (core.Msg, error) {
	m := &JoinDetAck{Epoch: d.Uvarint()}
	checkEpoch(d, m.Epoch)
	return m, d.Err()
}

func decNack(d *wire.Decoder) (core.Msg, error) {
	m := &Nack{Epoch: d.Uvarint(), Pending: d.Bool(), View: decFullView(d)}
	checkEpoch(d, m.Epoch)
	return m, d.Err()
}

func decNeedView(d *wire.Decoder) (core.Msg, error) {
	m := &NeedView{Epoch: d.Uvarint()}
	checkEpoch(d, m.Epoch)
	return m, d.Err()
}

func decQuery(d *wire.Decoder) (core.Msg, error) {
	m := &Query{Epoch: d.Uvarint()}
	checkEpoch(d, m.Epoch)
	return m, d.Err()
}

func decSync(d *wire.Decoder) (core.Msg, error) {
	m := &Sync{}
	if epoch := d.Uvarint(); epoch != 0 || d.Err() != nil {
		m.View = decFullViewOf(d, epoch)
		m.Abort, m.Pending = d.Uvarint(), d.Bool()
		return m, d.Err()
	}
	// No view (a joiner's answer to VIEW_QUERY): only an abort.
	m.View = FullView{Ancestry: d.Uvarints(), Members: d.NodeIDs(), Incs: decJoiners(d)}
	m.View.Left = d.NodeIDs()
	m.Abort, m.Pending = d.Uvarint(), d.Bool()
	if d.Err() == nil && (len(m.View.Ancestry) != 0 || len(m.View.Members) != 0 || len(m.View.Incs) != 1 || len(m.View.Left) != 0 || m.Pending) {
		d.Fail("sync without a view", wire.ErrInvalid)
	}
	checkEpoch(d, m.Abort)
	return m, d.Err()
}

func decNotice(d *wire.Decoder) (core.Msg, error) {
	m := &Notice{Epoch: d.Uvarint(), Root: d.NodeID()}
	checkEpoch(d, m.Epoch)
	if d.Err() == nil && d.Remaining() > 0 {
		if m.Final = d.Bool(); d.Err() == nil && !m.Final {
			return nil, fmt.Errorf("member: EXCLUDED notice with a final flag of 0 (absent when not final)")
		}
	}
	return m, d.Err()
}

func decLeave(d *wire.Decoder) (core.Msg, error) {
	m := &Leave{Epoch: d.Uvarint(), Inc: d.Uvarint()}
	checkEpoch(d, m.Epoch)
	return m, d.Err()
}

func decMinority(d *wire.Decoder) (core.Msg, error) {
	m := &MinorityNotice{Epoch: d.Uvarint()}
	alive, size := d.Uvarint(), d.Uvarint()
	if d.Err() == nil && (size > 1<<32-1 || alive > size) {
		d.Fail("minority counts", wire.ErrInvalid)
	}
	m.Alive, m.Size = uint32(alive), uint32(size)
	checkEpoch(d, m.Epoch)
	return m, d.Err()
}

// decoders lists every kind of the package with its decoder: f, or reuse
// for the kinds a member keeps nothing of once it has handled them (the
// ACKs and the commit, which every member receives in every view change):
// they are registered reusable (wire.Codec.RegisterReusable) and handed
// back (core.Recycler).
var decoders = []struct {
	kind  core.Kind
	f     wire.DecodeFunc
	reuse wire.ReuseFunc
}{
	{KindNodeFailure, decReport(false), nil},
	{KindFailureDetAck, decReportAck, nil},
	{KindFailedNode, decPrepare(CauseFailedNode), nil},
	{KindFailureAck, nil, decAck(CauseFailedNode)},
	{KindRootFailure, decReport(true), nil},
	{KindRootDead, decPrepare(CauseRootDead), nil},
	{KindRootAndNodeFailure, decPrepare(CauseRootAndNodeFailure), nil},
	{KindNewNode, decJoinRequest(false), nil},
	{KindNewNodeJoin, decPrepare(CauseNewNodeJoin), nil},
	{KindNewNodeJoinAck, nil, decAck(CauseNewNodeJoin)},
	{KindJoinDetAck, decJoinDetAck, nil},
	{KindNodeAlive, decJoinRequest(true), nil},
	{KindAliveNodeJoin, decPrepare(CauseAliveNodeJoin), nil},
	{KindAliveNodeJoinAck, nil, decAck(CauseAliveNodeJoin)},
	{KindViewCommit, nil, decCommit},
	{KindViewNack, decNack, nil},
	{KindViewNeed, decNeedView, nil},
	{KindViewQuery, decQuery, nil},
	{KindViewSync, decSync, nil},
	{KindExcluded, decNotice, nil},
	{KindMinority, decMinority, nil},
	{KindRefresh, decPrepare(CauseRefresh), nil},
	{KindRefreshAck, nil, decAck(CauseRefresh)},
	{KindLeave, decLeave, nil},
}

// RegisterCodecs registers the decoder of every member message kind in c.
// No kind's message aliases its payload (wire.Codec.RegisterDetached).
func RegisterCodecs(c *wire.Codec) error {
	for _, k := range decoders {
		name := "member." + KindName(k.kind)
		err := c.RegisterDetached(k.kind, name, k.f)
		if k.reuse != nil {
			err = c.RegisterReusable(k.kind, name, k.reuse)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
