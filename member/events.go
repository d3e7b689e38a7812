package member

import (
	"time"

	"github.com/cohort-mp/cohort/core"
)

// ViewInstalled is emitted by a node each time it installs a view (after the
// core.MembersChanged that tells the detectors). Joined and Departed are
// relative to the view this node installed before (for a node's first view,
// Joined is every member); a recovered process that re-joined under its id
// appears in both. Left lists those of Departed that left the group by
// announcing it ([LeaveRequest]) rather than by failing: the view change
// that excludes a node says which, so every node that installs that view
// reports it alike, from the proposal or from the view sent whole (a node
// that skipped views reports the leavers of the views it skipped as
// departed only). Epochs of the views
// one node installs only grow; every node that installs epoch E installs
// the same Members. The slices are shared with the view (and with other
// nodes' events): never modify them.
type ViewInstalled struct {
	Epoch    uint64
	Members  []core.NodeID
	Joined   []core.NodeID
	Departed []core.NodeID
	Left     []core.NodeID
}

// LeaveRequest, handed to a member's machine (core.Machine.Handle), makes
// the node leave the group: it tells every member of its views so (LEAVE)
// and takes no further part in the protocol. The others exclude it as they
// would a failed member, and report it in [ViewInstalled].Left rather than
// as a failure, unless it crashed before any of them heard it: then the
// view change that excludes it, proposed without the knowledge, counts it
// failed, at every member alike. The runtime stops the node once the
// announcement has left (its transport flushed); a node that has not
// installed a view yet just stops.
type LeaveRequest struct{}

// NotifyExcluded, handed to a member's machine (core.Machine.Handle), has
// the node tell each of Nodes that its installed view does not contain it
// (EXCLUDED, as it answers an excluded node's messages), at once whatever
// NoticeInterval says. A runtime that never takes an excluded node back
// hands it to the node for the nodes a view just excluded as failed,
// before it drops its connections to them: one that was only stopped
// finds the notice waiting when it runs again, even if nobody is left by
// then to answer its messages. With Final the notice evicts the receiver
// whatever the epochs ([Evicted]), also if it formed views of its own
// meanwhile (its detector took the others for failed as it ran again);
// the runtime sets it only where the receiver cannot be on the side that
// should go on (the view holds a majority of the group, say). Nodes in the
// node's views, and the node itself, are skipped.
type NotifyExcluded struct {
	Nodes []core.NodeID
	Final bool
}

// Leaving is emitted by a member that learns that Node, a member of its
// views, leaves (its LEAVE, or a report that lists it as leaving).
type Leaving struct {
	Node core.NodeID
}

// DepartingNode makes Leaving a [core.Departing]: the detectors stop
// judging the leaver.
func (e Leaving) DepartingNode() core.NodeID { return e.Node }

// StabilizationStarted is emitted by a root when it sends a proposal down the
// tree. Began is when the root received the first report or request that
// this proposal handles (env.Now()); At is now. A proposal restarted because
// of a failure found during stabilization (§3.5) keeps the first Began.
type StabilizationStarted struct {
	Epoch  uint64
	Cause  Cause
	Began  time.Duration
	At     time.Duration
	Failed []core.NodeID
	Joined []core.NodeID
}

// Stabilized is emitted by the root when it holds every child's
// acknowledgement: the tree is stable (§3.4) and the view commits. At−Began
// is the paper's stabilization time T_s (root receiving the report → root
// holding all ACKs).
type Stabilized struct {
	Epoch   uint64
	Began   time.Duration
	At      time.Duration
	Members int
}

// StabilizationAborted is emitted by a root whose proposal will not commit:
// a member of it failed meanwhile (it is restarted with a longer list of
// failed nodes), or a member refused it (VIEW_NACK), or another root
// superseded it.
type StabilizationAborted struct {
	Epoch  uint64
	At     time.Duration
	Reason string
}

// Evicted is emitted by a node that learns that a view newer than its own
// (Epoch, proposed by Root) excludes it: it was declared failed while it was
// alive (paper footnote 1) or it is on the losing side of a healed
// partition. It then asks to be admitted again (NODE_ALIVE).
type Evicted struct {
	Epoch uint64
	Root  core.NodeID
}

// Minority is emitted under PartitionMajority by every node of a side that
// holds no strict majority of its view Epoch: Alive of the Size members are
// reachable. That side installs no view until the partition heals.
type Minority struct {
	Epoch uint64
	Alive int
	Size  int
}

// Refresh, handed to the root's machine (core.Machine.Handle), makes it
// propose a new view with the same members once any running proposal ends:
// a new epoch with nothing changed (CauseRefresh). A layer above that
// attaches data to each epoch (package group: the members' metadata) uses
// it to publish a change of that data. A node that is not the root ignores
// it; the layer asks the root.
type Refresh struct{}
