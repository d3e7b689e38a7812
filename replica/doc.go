// Package replica is cohort's transparent process replication: the
// replicas coordination protocol of P2P-MPI (Genaud and Rattanapoka, §4),
// made robust to crashes, as a pure [core.Machine] layer. A job of N
// logical ranks runs each rank as R replicas (physical processes) on
// different hosts; while a rank keeps one live replica, the deaths of the
// others are invisible to the program.
//
// # Use
//
//	lay := replica.Layout{Ranks: n, Replicas: r}     // p = replica·n + rank
//	l, err := replica.New(replica.DefaultConfig(lay))
//	stack := core.NewStack(detector, m, l, app)      // m: member over ids 0…n·r−1
//	codec := wire.NewCodec(); replica.RegisterCodecs(codec)   // on a real host
//
// The physical processes run under the membership service (package
// member), whose agreed views (core.MembersChanged or member.ViewInstalled)
// are the layer's only notion of failure. The application (the layer
// above, later comm) hands the layer [Send] requests and [Decide] requests
// (or calls [Layer.SendMsg] and [Layer.Decide]), and receives [Delivered],
// [Decided], [RankFailed] and [ReplicaLost] events. Every replica of a rank
// must run the same deterministic program: the same Sends and Decides in
// the same order.
//
// # Driving the layer off the event loop
//
// The layer is a machine like any other, and the simulator drives it so.
// A real host needs it on every message of the program, so package comm
// drives it itself rather than through the host's event loop: it places
// the layer in the stack for views, and also calls it from the
// program's goroutine (sends) and the transport's reader goroutine (the
// protocol's frames), holding one lock around every call, so the layer
// still sees one call at a time. Its Env hands messages to the transport
// under that lock, except the Data of a program's send, which the
// program's goroutine writes once it has left the lock (a receiver holds
// the rare one that overtakes another, see Limits); it queues the events
// for the caller to pass on in order, and arms timers on the runtime's
// (time.AfterFunc), whose expiry calls the layer under that lock. Frames
// received before the loop started the layer are kept for its Start; a
// Data is lent to it in the reader's buffer ([Layer.ReceiveBorrowed]), and
// the buffers of committed sends are handed back for reuse
// (Config.KeepReleased). The layer needs nothing else from its
// caller: it reads no clock and draws no random number.
//
// # The protocol
//
// Layout. Physical id p = replica·N + rank ([Layout]). The master of a rank
// is its lowest-index replica in the current view; every process computes
// it from the view, so all agree once they installed the same view.
//
// Message identifiers (§4.2, MID). A channel is (communicator, source rank,
// destination rank). Each send of the program takes the channel's next
// sequence number (the paper's logical clock); (comm, src, dst, tag, seq)
// identifies the message. Every replica issues the same sends, so the
// replicas of a rank give a send the same identifier.
//
// Sending. The master sends the message to every live replica of the
// destination rank ([Data]). Every replica — the master too — keeps it in
// its backup table unless its log says it is committed already; then it is
// dropped at once (a replica whose program is behind its master's).
//
// Control channels. A channel whose sends say Control ([Send]) is
// carried as KindControlData instead of KindData, and is otherwise the
// same. Channels are independent (sequence numbers, acknowledgements and
// commits are per channel), so a caller may carry a control channel's
// messages ahead of data, as comm does with its revocations and agreement
// steps. The application may hand the layer a control channel's send
// while the backup table is full.
//
// Backup bound. The table is bounded by Config.MaxBackup sends and
// Config.MaxBackupBytes bytes of payload (4096 and 64 MiB by default).
// The layer keeps every send it is handed — one it dropped could be
// missing for good if this process became master — so the bound is
// back-pressure: once the table reaches it, [Layer.BackupFull] reports
// true and the layer emits [BackupFull]; the application hands it no more
// sends until the commits free the table below both bounds ([BackupRoom]).
// Commits need every live destination replica's acknowledgement, so a
// destination that the view lists but that does not acknowledge (a slow
// or wedged process, or one that withholds acknowledgements) holds the
// sender's program back, and costs it no more memory than the bound.
//
// Receiving (§4.2, history table). Each replica delivers each channel's
// messages strictly in sequence order, exactly once: it keeps the next
// expected number per channel, drops duplicates and holds early arrivals.
// It acknowledges cumulatively per channel ([Ack]) to the sender rank's
// master, batched with a bound: after Config.AckEvery deliveries on the
// channel or Config.AckDelay after the first unacknowledged one, whichever
// is first. A duplicate triggers an acknowledgement too (a new master
// that resends needs it), and every receiver acknowledges all its channels
// from a rank again to the rank's new master when the view changes it.
//
// Commit. The master commits sequence number s of a channel only once every
// live replica of the destination acknowledged s or more ([Commit],
// cumulative); a fellow replica then drops backup entries ≤ s and records
// the commit in its log, so its program skips those sends when it reaches
// them. Deviation from the paper, for crash robustness: the paper's master
// commits as soon as it has written the message to the sockets, but a
// message written to a socket is lost if its host dies before the
// receiver reads it; committing on acknowledgements guarantees that a
// committed message is held by every live destination replica, so nothing
// a backup table forgets can be missing anywhere.
//
// Retransmission (beyond the paper). The links under the layer are FIFO
// while a connection lives, but not reliable: a host drops a message when
// the peer's queue is full, and a connection that breaks loses what it
// held. The master therefore sends again, to a live destination replica
// that acknowledged nothing new for Config.Retransmit (200 ms) while it
// lacks sends of the backup table, every such send above its level (at
// most 64 a tick); receivers drop duplicates and acknowledge them. A lost
// message otherwise left its receiver waiting for ever (a replicated
// Allreduce hung, now and then, when replicas died under load).
//
// Only Data is resent. Every other message (Ack, Commit, the decisions'
// messages, Fin) must reach its live destination: a lost Commit would
// keep sends in a fellow's backup table for good, a lost decision message
// would leave its replicas waiting, a lost Fin a peer's end. None of them
// needs to stay in order with Data (acknowledgements and commits name
// sequence numbers; decisions are numbered; Fin counts only once every
// program finished), so a caller may carry them apart from data, ahead
// of it, as comm does in the transport's control lane.
//
// Master failure (§4.2, recovery). When a view excludes the master, the new
// master (the lowest live replica) resends every backup entry, per channel
// in sequence order, to every live destination replica, then goes on as
// master. Receivers drop what they already had. Nothing can be missing
// below the resent range (it starts above the commit, which every live
// receiver holds), so no gap appears. Destination replicas that leave a
// view are no longer waited for. A view that removes the last replica of a
// rank makes the rank failed: every process emits [RankFailed] (once),
// forgets the backup entries toward it and drops later sends to it; a
// replica's death while its rank lives is only a [ReplicaLost].
//
// Decisions (beyond the paper, which admits in §4.3 that replicas may
// diverge on MPI_ANY_SOURCE). Anything non-deterministic — a wildcard
// receive's match, the outcome of WaitAny or Test, a random seed — is the
// K-th decision of the rank ([Decide]). The master proposes its value
// ([Decision], tagged with its replica index, the ballot: masters of a rank
// only get higher indices) to every live fellow, which stores it and
// acknowledges ([DecisionAck]); once every live fellow did, the value is
// final: the master acts on it ([Decided]) and sends [DecisionCommit],
// on which the fellows act. A new master proposes again, under its own
// ballot, every decision not known to be final everywhere, with the value
// it holds, and decides itself the ones it never got. A fellow takes a
// value of a higher ballot in place of an older one unless its own copy is
// final, and ignores lower ballots.
//
// Why fellows wait for the commit: in the simpler scheme where a fellow
// acts on a decision as soon as it receives it, the master
// sends to fellows A and B, A acts, the master dies before B got the value,
// and B, the new master, decides differently. Here fellows act only on the
// master's commit. A commit means every replica then live stored the
// value, the new master included (replicas never come back, so a live
// replica was in every earlier view), so the new master proposes that very
// value; and if no commit was sent, no replica acted on the value, so the
// new master may decide afresh.
//
// # Why it is correct
//
// No duplicates and order: receivers deliver by sequence number, once.
// Same contents: replicas of a rank issue the same sends (deterministic
// program, same decisions), so any master's copy of (channel, seq) is the
// same message. Nothing lost while the sender rank lives: a message the
// program sent is either committed (then every live destination replica
// has it) or in the backup table of every live replica of the sender
// whose program reached it, or not yet reached by the current master's
// program (which will send it). A master's transmissions over a reliable
// FIFO link reach a live receiver; a master's death hands the backup to
// the next master, which resends. Decisions: see above.
//
// # Limits
//
//   - Replicas never come back: a process that left a view stays dead for
//     the layer even if a later view lists it again (it lost its state;
//     restarting a replica needs a state transfer this package does not do).
//   - The layer relies on the membership's verdicts: a live master wrongly
//     excluded keeps acting until it learns it was excluded. Its data
//     messages are harmless (same contents), its commits stricter (older
//     views hold more replicas), but comm must drop frames from processes
//     outside the view (the host does) so that it stops quickly.
//   - When a whole rank dies, the replicas of a receiving rank may have
//     delivered different prefixes of its channels (nobody is left to
//     resend): the error reaches each replica at a different point of the
//     channel. A flush among them (as in package vsync) would fix it.
//   - Early arrivals are held without a bound; they arise when two
//     processes act as master of one rank at once (a wrong exclusion),
//     or when the caller puts the Data of sends made at once on the wire
//     in another order than the layer sent them (comm writes a program's
//     data outside its lock: at most one early message per goroutine of
//     the program sending at that moment).
//   - The end (Finish, Fin, Finished): a process whose program finished
//     tells every live process and hears Finished once all of them
//     finished or left the view; comm's Finalize waits for it, so that a
//     replica behind its peers never finds a rank failed only because its
//     replicas all finished and left. Finalize is therefore collective on
//     replicated ranks, as MPI_Finalize is.
//   - Decisions values are kept until final at every live replica and
//     consumed here; the per-channel state (a few counters) lives for the
//     life of the job.
//
// # Messages
//
// Append-only kinds of [core.ProtoReplica]:
//
//	1 DATA             [Data]            one message (MID + payload)
//	2 ACK              [Ack]             a receiver's cumulative level of a channel
//	3 COMMIT           [Commit]          what every live receiver holds of a channel
//	4 DECISION         [Decision]        the master's value for decision K
//	5 DECISION_ACK     [DecisionAck]     a fellow holds the master's values
//	6 DECISION_COMMIT  [DecisionCommit]  decisions up to K are final
//	7 FIN              [Fin]             this process's program finished
//	8 CONTROL_DATA     [Data]            one message of a control channel
//
// Every decoder rejects malformed input with an error (never a panic) and
// is fuzzed (FuzzDecode; FuzzReceive feeds decoded messages to a layer).
//
// # Tests
//
// script_test.go plays the cases by hand: send, acknowledge, commit; a
// non-master behind its master; a master crash mid-send; a lost receiver
// and a failed rank; decisions followed, decided again after an
// unacknowledged master died, and kept after a final one. The swarm
// (package replicatest, run by swarm_test.go and by
// `cohort sim swarm --protocol replica`) runs real membership stacks in
// the simulator (an oracle detector) under a random program with
// decisions and an end (Finish: every live process must hear Finished, and
// none before every process in the views finished), with crashes —
// invisible ones, and whole ranks — in which a
// dead host's unsent messages are lost, and random delays. It does not
// cover wrongly excluded live masters (it has no false suspicions; a
// process the membership excluded while alive, which cascading crashes
// can cause, is counted dead like a crashed one), partitions, or joins.
// Replay a seed with
//
//	go test ./replica -run 'TestSwarm$' -seed=N
package replica
