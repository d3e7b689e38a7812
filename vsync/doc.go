// Package vsync is cohort's view-synchronous reliable multicast: a pure
// [core.Machine] layer that sits in a node's core.Stack above the failure
// detector (fd), the membership service (member) and the stability
// detector (stable). Members multicast to their view; every member
// delivers each sender's messages in order, once; messages are kept until
// the stability layer reports that every member holds them, then freed;
// and when the membership changes, the survivors agree on what was
// delivered in the old view before the application sees the new one
// (same-view delivery, Varma et al., ICS'06, §2.1).
//
// # Use
//
//	l, err := vsync.New(vsync.DefaultConfig())
//	det := stable.New(stable.DefaultConfig(), members)
//	stack := core.NewStack(fd, m, vsync.HideFailures(det), l, app)
//	codec := wire.NewCodec(); vsync.RegisterCodecs(codec)   // on a real host
//
// The application (a layer above, or the host) hands the layer a
// [Multicast] event and receives [Delivered] events, [ViewChanged] when
// its view changes, and [Refused] for a multicast the layer will not take.
// The layer follows the membership layer's core.MembersChanged, emits
// stable.Progress (what it holds of the current view) for the stability
// layer and frees messages on stable.Stable. Put the stability detector
// behind [HideFailures] (its doc says why). The stability layer must
// track every member as a sender (stable.Config.Senders 0).
//
// # Reliable multicast
//
// A message carries (view epoch, sender, sequence number): [Data]. A
// sender numbers its messages of each view 1, 2, 3, …, delivers each to
// itself at once and sends it to every other member of its view. A
// receiver stores it in the sender's stream and delivers the contiguous
// prefix, so per-sender FIFO and no duplicates hold by construction. Every
// node keeps every message it holds until the message is both delivered
// and stable (the stability vector, element-wise minimum over the members
// of what they hold contiguously, has reached it), then frees it.
//
// Retransmission is by negative acknowledgement, from the sender: a
// receiver that holds a later message than the next one it needs, or that
// learns from a [Digest] how many the sender sent, sends [Nack] with the
// missing range to the sender (at most once per Config.Retransmit per
// stream); the sender answers from its buffer. The tail of a burst cannot
// show as a gap, so a sender whose own messages have made no stability
// progress for two Retransmit periods sends a Digest to the view. A
// sender's messages are freed only once stable, so every member can still
// get them from it while it lives; when it dies, the flush below takes
// over.
//
// Flow control: a node sends while fewer than Config.Window of its own
// messages of the view are unstable; the rest wait in a queue of at most
// Config.MaxQueued (beyond it, [Refused] with [ErrQueueFull]). Receivers
// refuse messages more than 4·Window beyond a stream's freed prefix (a
// correct sender never gets there; retransmission fetches them later), and
// at most 4·Window messages of views not yet installed are held (each
// view's for at most 20 Retransmit periods: the view may never be installed
// here, and its senders send again what is needed if it is), so a
// node's buffers stay within about (2n+1)·4·Window messages whatever
// happens, and within about n·Window while the group is healthy.
//
// # View synchrony: the flush
//
// The membership layer installs views (epoch, members) that every node
// installing that epoch agrees on. The application's view lags behind: when
// the membership layer installs view T while the application is in view
// O, the node runs a flush from O to T before it announces T:
//
//  1. It freezes O: it stops sending (later multicasts wait for T) and
//     delivers no more messages of O for now. It sends its report
//     [Flush] (T, O, V) to every member of T, where V[i] is how many
//     messages of O's sender i it has delivered. It sends exactly one
//     report per target T, and never changes it.
//  2. It waits for the report of every member of T that is also a
//     member of O (the set is a function of O and T, so the same for
//     every node moving from O to T). The participants are itself and
//     those reporters whose report names the same old view O; a member of
//     T whose application is in another view (a joiner, a node that
//     already moved on, a node excluded earlier) is not one.
//  3. The cut is the element-wise maximum of the participants' vectors.
//     The node delivers O's messages up to the cut — from its buffer, or
//     asking (Nack) a participant that reported the message — and
//     discards anything of O beyond the cut.
//  4. Holding the whole cut, it sends [FlushOK] to the participants; once
//     it has every participant's FlushOK, it frees O, announces
//     [ViewChanged] (T, with a count and digest of what it delivered in
//     O) and delivers what it already holds of T.
//
// A node whose application has no view yet (an initial member, a joiner)
// announces its first view at once; it answers reports with an empty one.
// Messages of a view the node has not installed yet are held; messages of
// a view it has left (or abandoned) are dropped ([Stats].Late). A flush
// that is overtaken by a newer view T' (a participant died during the
// flush) starts again from step 1 toward T', from the same old view and
// with the vector delivered by then; reports for T are ignored
// afterwards. Lost flush messages are resent every Retransmit to the
// members whose report or OK is missing, and a node answers a report it
// has already received, one from a member of the target it does not wait
// for (a member that was not in its old view may wait for its report), or
// one for the flush it completed last, with its own report and, if it
// holds the cut, its FlushOK.
//
// # Why it is correct
//
// Same-view delivery: take two nodes p and q that both announce T after
// O. Each waited for the reports of the same set (members of T ∩ O), and
// each member sends one report per target, so both saw the same reports,
// chose the same participants and computed the same cut. Each delivered
// exactly the cut in O: before the flush a node delivers only what it
// reports (the report is its delivered vector at the freeze), during the
// flush nothing beyond the cut, and it announces T only once it holds the
// whole cut. Hence p and q delivered the same messages in O. A node that
// moves from O to another view T' ≠ T is bound to nobody moving to T, and
// the property does not relate them.
//
// Messages are delivered in the view they were sent in: a message of view
// O is delivered only while the application is in O, and a sender sends
// in O only while the application is in O and no flush runs.
//
// Every message of the cut can be fetched: the cut's i-th entry was
// reported by some participant, which delivered those messages and holds
// every one it has not freed; it frees only stable messages (held by every
// member, so not needed by anyone) until it has every participant's
// FlushOK (after which nobody needs them). A flush ends once every member
// of T ∩ O has answered and the participants hold the cut; if one of them
// crashes, the membership layer installs a newer view, which restarts the
// flush without it. Liveness therefore rests on the membership layer's.
//
// Stability is safe to free on because a stable vector is a minimum of
// what each member holds (stable.Progress reports held messages, and
// holdings only grow). The layer also never lets a stability vector exceed
// what it holds itself.
//
// # Messages
//
// Append-only kinds of [core.ProtoVsync]:
//
//	1 DATA      [Data]     one message (sender, seq, epoch, payload)
//	2 NACK      [Nack]     a range of one sender's messages, please
//	3 DIGEST    [Digest]   how many messages the sender sent in the view
//	4 FLUSH     [Flush]    a node's report for a flush
//	5 FLUSH_OK  [FlushOK]  the sender holds the flush's cut
//
// Every decoder rejects malformed input with an error (never a panic) and
// is fuzzed (FuzzDecode).
//
// # Tests
//
// script_test.go replays the cases by hand (FIFO and NACK, digest, window
// and freeing, a flush after a crash, a flush restarted by a newer view,
// joiners, retransmitted flush messages). The swarm (package vsynctest, run
// by swarm_test.go and by `cohort sim swarm --protocol vsync`) runs real stacks
// (gossip detector, membership, a stability detector, this layer, a
// multicasting application) in the simulator with crashes, joins,
// partitions, cut links, loss and delay spikes, and checks on every event:
// per-sender FIFO and no duplicate, delivery in the sending view with the
// sent payload, same-view delivery, stability never ahead of a live
// member, stability vectors that only grow; and after healing, one view,
// the same deliveries in it, empty buffers and a peak within the bound.
// A seed whose membership does not converge after healing (its views do
// not hold exactly the live nodes) fails the test too. Replay a seed with
//
//	go test ./vsync -run TestSwarm -seed=N
package vsync
