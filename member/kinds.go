package member

import (
	"fmt"

	"github.com/cohort-mp/cohort/core"
)

// The message kinds of package member, in protocol [core.ProtoMember].
// Append only: the numbers are on the wire. Never renumber, never reuse a
// retired number. Kinds 1–14 are the messages of the paper (Figure 3 and
// §3.4–3.7); 15 and above are cohort's additions (two-phase commit, view
// transfer, exclusion notices, minority notices), described in the package
// documentation.
//
// Each value equals core.MakeKind(core.ProtoMember, n); TestKindNumbers
// checks it.
const (
	KindNodeFailure        = core.Kind(core.ProtoMember)<<8 | 1  // NODE_FAILURE: detector → root ([Report])
	KindFailureDetAck      = core.Kind(core.ProtoMember)<<8 | 2  // FAILURE_DET_ACK: root → detector ([ReportAck])
	KindFailedNode         = core.Kind(core.ProtoMember)<<8 | 3  // FAILED_NODE: down the new tree ([Prepare])
	KindFailureAck         = core.Kind(core.ProtoMember)<<8 | 4  // FAILURE_ACK: up the new tree ([Ack])
	KindRootFailure        = core.Kind(core.ProtoMember)<<8 | 5  // ROOT_FAILURE: detector → next live node ([Report])
	KindRootDead           = core.Kind(core.ProtoMember)<<8 | 6  // ROOT_DEAD: down the tree of a new root ([Prepare])
	KindRootAndNodeFailure = core.Kind(core.ProtoMember)<<8 | 7  // ROOT_AND_NODE_FAILURE ([Prepare])
	KindNewNode            = core.Kind(core.ProtoMember)<<8 | 8  // NEW_NODE: joiner → root ([JoinRequest])
	KindNewNodeJoin        = core.Kind(core.ProtoMember)<<8 | 9  // NEW_NODE_JOIN ([Prepare])
	KindNewNodeJoinAck     = core.Kind(core.ProtoMember)<<8 | 10 // NEW_NODE_JOIN_ACK ([Ack])
	KindJoinDetAck         = core.Kind(core.ProtoMember)<<8 | 11 // JOIN_DET_ACK: root → joiner ([JoinDetAck])
	KindNodeAlive          = core.Kind(core.ProtoMember)<<8 | 12 // NODE_ALIVE: recovered node → root ([JoinRequest])
	KindAliveNodeJoin      = core.Kind(core.ProtoMember)<<8 | 13 // ALIVE_NODE_JOIN ([Prepare])
	KindAliveNodeJoinAck   = core.Kind(core.ProtoMember)<<8 | 14 // ALIVE_NODE_JOIN_ACK ([Ack])
	KindViewCommit         = core.Kind(core.ProtoMember)<<8 | 15 // VIEW_COMMIT: second phase, down the tree ([Commit])
	KindViewNack           = core.Kind(core.ProtoMember)<<8 | 16 // VIEW_NACK: member → proposer ([Nack])
	KindViewNeed           = core.Kind(core.ProtoMember)<<8 | 17 // VIEW_NEED: child → parent ([NeedView])
	KindViewQuery          = core.Kind(core.ProtoMember)<<8 | 18 // VIEW_QUERY: member → proposer ([Query])
	KindViewSync           = core.Kind(core.ProtoMember)<<8 | 19 // VIEW_SYNC: root → member ([Sync])
	KindExcluded           = core.Kind(core.ProtoMember)<<8 | 20 // EXCLUDED: member → outsider ([Notice])
	KindMinority           = core.Kind(core.ProtoMember)<<8 | 21 // MINORITY: root → its side ([MinorityNotice])
	KindRefresh            = core.Kind(core.ProtoMember)<<8 | 22 // REFRESH: down the tree, same members ([Prepare])
	KindRefreshAck         = core.Kind(core.ProtoMember)<<8 | 23 // REFRESH_ACK: up the tree ([Ack])
	KindLeave              = core.Kind(core.ProtoMember)<<8 | 24 // LEAVE: leaver → members ([Leave])
)

var kindNames = map[core.Kind]string{
	KindNodeFailure:        "NODE_FAILURE",
	KindFailureDetAck:      "FAILURE_DET_ACK",
	KindFailedNode:         "FAILED_NODE",
	KindFailureAck:         "FAILURE_ACK",
	KindRootFailure:        "ROOT_FAILURE",
	KindRootDead:           "ROOT_DEAD",
	KindRootAndNodeFailure: "ROOT_AND_NODE_FAILURE",
	KindNewNode:            "NEW_NODE",
	KindNewNodeJoin:        "NEW_NODE_JOIN",
	KindNewNodeJoinAck:     "NEW_NODE_JOIN_ACK",
	KindJoinDetAck:         "JOIN_DET_ACK",
	KindNodeAlive:          "NODE_ALIVE",
	KindAliveNodeJoin:      "ALIVE_NODE_JOIN",
	KindAliveNodeJoinAck:   "ALIVE_NODE_JOIN_ACK",
	KindViewCommit:         "VIEW_COMMIT",
	KindViewNack:           "VIEW_NACK",
	KindViewNeed:           "VIEW_NEED",
	KindViewQuery:          "VIEW_QUERY",
	KindViewSync:           "VIEW_SYNC",
	KindExcluded:           "EXCLUDED",
	KindMinority:           "MINORITY",
	KindRefresh:            "REFRESH",
	KindRefreshAck:         "REFRESH_ACK",
	KindLeave:              "LEAVE",
}

// KindName returns the paper's name of a member message kind
// ("NODE_FAILURE", "FAILED_NODE", …), or the generic [core.Kind.String]
// form for a kind that is not one of package member's.
func KindName(k core.Kind) string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprint(k)
}

// Cause says why a view changes; it selects the paper's message kind of a
// [Prepare] and of its [Ack].
type Cause uint8

// The causes of a view change.
const (
	// CauseFailedNode: members other than the root failed (FAILED_NODE,
	// acknowledged by FAILURE_ACK), §3.4–3.5.
	CauseFailedNode Cause = iota + 1
	// CauseRootDead: the root failed (with, possibly, the next roots in the
	// list); a new root takes over (ROOT_DEAD), §3.6.
	CauseRootDead
	// CauseRootAndNodeFailure: the root and other members failed together
	// (ROOT_AND_NODE_FAILURE), §3.6.
	CauseRootAndNodeFailure
	// CauseNewNodeJoin: new nodes join (NEW_NODE_JOIN, acknowledged by
	// NEW_NODE_JOIN_ACK), §3.7.
	CauseNewNodeJoin
	// CauseAliveNodeJoin: recovered nodes re-join under their ids
	// (ALIVE_NODE_JOIN, acknowledged by ALIVE_NODE_JOIN_ACK), §3.7.
	CauseAliveNodeJoin
	// CauseRefresh: nothing changed but the root was asked for a new
	// epoch ([Refresh]): the layers above attach something to each epoch
	// (package group, the members' metadata) and need a view change to
	// publish a change of it (REFRESH, acknowledged by REFRESH_ACK).
	CauseRefresh
)

func (c Cause) prepareKind() core.Kind {
	switch c {
	case CauseRootDead:
		return KindRootDead
	case CauseRootAndNodeFailure:
		return KindRootAndNodeFailure
	case CauseNewNodeJoin:
		return KindNewNodeJoin
	case CauseAliveNodeJoin:
		return KindAliveNodeJoin
	case CauseRefresh:
		return KindRefresh
	}
	return KindFailedNode
}

func (c Cause) ackKind() core.Kind {
	switch c {
	case CauseNewNodeJoin:
		return KindNewNodeJoinAck
	case CauseAliveNodeJoin:
		return KindAliveNodeJoinAck
	case CauseRefresh:
		return KindRefreshAck
	}
	return KindFailureAck
}

func (c Cause) String() string { return KindName(c.prepareKind()) }
