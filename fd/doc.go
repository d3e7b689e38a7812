// Package fd holds cohort's failure detectors. Each is a deterministic
// [core.Machine] that owns protocol [core.ProtoFD] in a node's [core.Stack],
// follows the member list it is told about ([core.MembersChanged]) and
// reports what it concludes with the shared events [core.Suspected],
// [core.Unsuspected], [core.Failed] and [core.Recovered].
//
// # Gossip detector (P2P-MPI §5)
//
// (being written)
//
// # Heartbeat detector (Phoenix §4)
//
// (placeholder: the heartbeat detector's author fills this section.)
package fd
