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
// [HeartbeatDetector] is the detector of Horita, Taura and Chikayama's
// Phoenix library. Each process sends a heartbeat every T_interval to k
// monitors chosen at random, announcing when the next one is due; a monitor
// suspects the process when nothing arrived for T_interval + T_timeout.
// Every message counts as a heartbeat, application traffic included, so a
// busy link carries none. Insurance heartbeats go every T_insurance on the
// process's other connections, so that a process whose monitors die with
// it is still detected. A suspicion is broadcast to every member; a member
// still suspected after T_broken is declared failed, unless it refuted the
// suspicion in time. Use:
//
//	members := []core.NodeID{0, 1, 2, 3} // shared, never modified
//	det, err := fd.NewHeartbeat(fd.DefaultHeartbeatConfig(), members)
//	if err != nil { ... }
//	node := core.NewStack(det, membership, app) // lowest layer: it sees all traffic
//
// Register its wire codecs with [RegisterHeartbeatCodecs]. Presets:
// [DefaultHeartbeatConfig] (the paper's Table 1), [LANHeartbeatConfig],
// [WANHeartbeatConfig], [SimHeartbeatConfig] (§6.2) and
// [AggressiveHeartbeatConfig]; change parameters while running with
// [HeartbeatDetector.SetConfig]; read counters with
// [HeartbeatDetector.Stats]. What a connection is in a large job, who
// learns of a failure and how, and what the detector keeps in memory are
// described on [HeartbeatDetector].
package fd
