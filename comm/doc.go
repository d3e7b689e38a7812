// Package comm is cohort's message-passing API: MPI semantics in Go shape,
// with failures reported as errors instead of hangs (after ULFM, the MPI
// fault-tolerance extension) and Phoenix virtual nodes.
//
// # Starting
//
// A program started by `cohort run -n N prog` joins its job with [Init] and
// leaves it with [Session.Finalize]; tests and examples run a whole job in
// one process with [Local]:
//
//	s, err := comm.Init(ctx)               // or: ss, err := comm.Local(ctx, 4)
//	defer s.Finalize(ctx)
//	w := s.World()                         // rank w.Rank() of w.Size()
//
// # Point-to-point
//
//	err := w.Send(ctx, buf, dest, tag)                 // returns when buf may be reused
//	st, err := w.Recv(ctx, buf, comm.AnySource, comm.AnyTag) // st.Source, st.Tag, st.Count
//	r := w.Isend(buf, dest, tag); st, err = r.Wait(ctx) // also Irecv, Test, WaitAll, WaitAny
//	st, err = w.Probe(ctx, src, tag)                   // Iprobe does not wait
//	err = comm.Send(ctx, w, []float64{1, 2}, dest, tag) // typed: any numeric element type
//	err = comm.SendValue(ctx, w, anyGoValue, dest, tag) // encoding/gob, off the hot path
//
// Matching follows MPI: a receive matches by source and tag (wildcards
// AnySource, AnyTag) within its communicator; messages between a pair never
// overtake each other; a message longer than the buffer is a
// [*TruncateError]. Every blocking call takes a context.Context.
//
// A message of at most [EagerMax] bytes is sent eagerly — Send returns once
// it is handed to the transport, without waiting for the receive — as long
// as it fits in the credit the receiver grants this process; a larger
// message, or one beyond the credit, goes through a rendezvous: the
// receiver learns of it, and the data stays in the sender's buffer until a
// receive takes it (between two processes of one host, the receiver then
// reads it straight from the sender's memory, in one copy). So Send may
// wait for the matching receive, as MPI_Send may: a program in which two
// ranks each Send to the other before either receives needs Isend (or a
// Sendrecv-style order). Handing a message, or a large one's data, to the
// transport may wait too, while the receiver's process reads none of it.
// Either wait ends with Send's context, and Send then fails with the
// context's error, though, as a cancelled MPI send may have completed,
// the message may still be delivered ([Comm.Send]).
//
// # Memory
//
// Each process grants each other process a budget of eager bytes
// ([DefaultEagerCredit], 1 MiB; [WithEagerCredit]), counted as a
// message's length plus 64 bytes. A sender spends it as it sends eager
// point-to-point messages and gets it back, in batches, as the receiver's
// receives consume them (credit.go). Therefore, per pair of processes:
//
//   - the receiver holds at most the budget of the sender's unexpected
//     eager messages (in pooled buffers of power-of-two sizes: at most
//     twice that in memory); what else the sender sends ahead costs a
//     small record per message, its data staying in the sender's buffers;
//   - the sender's backlog toward a slow receiver (comm's queue and the
//     transport's) holds at most the budget of eager data, plus
//     rendezvous records that point into the callers' buffers.
//
// The receiver enforces the budget: a process that sends beyond it (one
// that ignores comm's flow control) is cut off — counted failed by the
// receiver, which reports an [*OverrunError] naming it on
// [Session.Failures] — so the receiver's memory stays bounded whatever a
// peer sends. Collective steps, messages to virtual nodes and
// ready-to-sends are outside the credit; what one peer's of those wait
// unexpected is bounded by a limit of its own ([DefaultUnexpectedLimit],
// 256 MiB; [WithUnexpectedLimit]) with the same cut-off. Every rank of a
// job must use the same budget. The frames of replicated ranks are
// outside both (see credit.go for why and how they are bounded).
//
// # Communicators
//
// Each communicator has its own context id, so the traffic of two
// communicators never mixes; each also has separate contexts for collective
// steps and virtual-node messages. [Comm.Dup] and [Comm.Shrink] derive new
// ones (every member calls them in the same order; the new id is computed,
// not negotiated). A member may run ahead of the others by up to 8 such
// calls on a communicator, two levels deep (a Shrink, then Dups of its
// result): what it sends on communicators the receiver has not created yet
// waits for them. A process that names a context of no communicator the
// receiver has or is about to create is cut off, as one that overruns its
// credit is (a [*ContextError]), so no peer can make a process keep state
// for contexts it invents.
//
// # Failures
//
// Failures come from the membership service (package member) running under
// each process: once a view excludes a rank, that rank is failed for good.
// Then
//
//   - a send to it, a receive from it (once the messages it sent before
//     failing are consumed) and every pending one return a
//     [*ProcFailedError] naming it (errors.As; errors.Is ErrProcFailed);
//   - AnySource receives and probes fail while some failure of the
//     communicator is unacknowledged ([Comm.AckFailed]);
//   - every pending and later collective step on a communicator with a
//     failed member fails, so no collective hangs;
//   - [Session.Failures] delivers a [Failure] per failed world rank.
//
// A rank that finishes ([Session.Finalize]) leaves the job: it tells the
// membership, whose views then show it as left, not failed, at every
// survivor alike (unless it crashed before anyone heard it: then it
// failed). A rank that left is not reported on Failures nor counted by
// [Comm.Failed] ([Comm.Left] lists it), AnySource receives do not fail for
// it, and the collectives it had done its part of still complete where
// they run late; only what still needs it fails, with a [*ProcLeftError]
// (errors.Is ErrProcLeft, not ErrProcFailed): a send to it, a receive from
// it once its messages are consumed, a collective step that sends to it or
// waits for it, an [Comm.Agree] it did not take part in.
//
// A process that the others' views excluded while it lived (it was
// stopped, starved or cut off) is told so by a member of the newer view
// when it runs again, and every pending and later operation of its
// session fails with [ErrEvicted]. So that it is told even when every
// other process has ended by then, under any launcher, each process whose
// view excludes ranks as failed sends them an EXCLUDED notice
// (member.NotifyExcluded) over the connection it still holds to each,
// then drops those connections (at most 150 ms later: a stopped process
// acknowledges nothing, and sends to it fail only then). The kernel keeps
// the notice in a stopped process's socket or shared-memory ring; the
// process reads it as it runs again and ends with ErrEvicted. When the
// view holds a majority of the job's processes the notice is final: it
// evicts even a process whose detector took the others for failed first
// and formed a view of its own; from a smaller view it is an ordinary
// notice, which the views' epochs decide, since the sender may then be
// the one cut off. The notice comes from a member of the job over a
// connection that proved the job's secret, as every membership frame
// does. It is best effort: a process that had no connection in use to
// the others as it was excluded (it stopped before it talked to them) is
// not told.
//
// To repair a communicator the program uses [Comm.Revoke] (every operation
// on it fails with [ErrRevoked] at every member), [Comm.Agree] (a
// fault-tolerant agreement on the AND of an int, whose algorithm and proof
// are in agree.go) and [Comm.Shrink] (a communicator of the survivors):
//
//	if errors.As(err, new(*comm.ProcFailedError)) {
//		w.Revoke()
//		w, err = w.Shrink(ctx)
//	}
//
// # Control frames
//
// Revocations, agreement steps ([Comm.Revoke], [Comm.Agree],
// [Comm.Shrink]) and the welcomes of [Comm.Grow] travel apart from data:
// each peer has a queue of its own for them, and transport/tcp carries
// them in its control lane, which its
// writer drains before the data queue, as it does the failure detector's
// and the membership's frames. A peer whose data queue is full (a receiver
// that does not keep up) still gets them next, and they are never dropped:
// when the control lane itself is full they wait in their own queue, not
// behind data. They stay in order with each other, and may overtake data
// sent to the same peer before them, which is harmless:
//
//   - a revocation ahead of data of its communicator: the receiver drops
//     that data as it comes (returning its credit), as it drops any
//     member's data that arrives after the revocation; ULFM promises
//     nothing of messages in flight at a revocation, whose receives fail
//     with ErrRevoked either way;
//   - an agreement step ahead of data of its communicator: the agreement's
//     state is its own (agree.go) and depends on the failed sets the views
//     give, never on data, which is still matched in the order it was
//     sent; what it decides (Shrink's new communicator) is used only by
//     data sent after the decision, which a receiver that has not created
//     that communicator yet keeps for it (see Communicators);
//   - data ahead of a welcome: the data the members send on the
//     communicator a welcome announces (package resil's recovery sends
//     some before any agreement on it) may reach the newcomer before the
//     welcome; a newcomer that has no communicator yet keeps it in a
//     queue for its context, for a few contexts, until the welcome
//     creates the communicator (newcomer.go), and the agreement's steps
//     follow the welcome in the lane.
//
// Virtual-node mapping updates, ready-to-sends and credit travel with the
// data, in order with it. With replicated ranks every frame goes through
// package replica's layer: revocations, agreement steps and welcomes as
// its control channels, which ride in the transport's control lane too
// and are handed to the layer even while its backup table is full, so
// they overtake data as above; everything else in one order with the
// data.
//
// # Virtual nodes
//
// [Comm.Virtual] maps a large space of Phoenix virtual nodes onto the ranks;
// [Virtual.Send] and [Virtual.Recv] address virtual nodes, [Virtual.Remap]
// moves them, a send to an unmapped (or broken) node is held until it is
// mapped, and [Virtual.AnyBroken] / [Virtual.Broken] are the Phoenix failure
// queries.
//
// # Replicated ranks
//
// With `cohort run -r R` (launch.Bootstrap.Replicas) every rank runs as R
// processes and the program sees no difference: [Session.Replicas] says R,
// a replica's death is invisible, and the last replica's death is the
// ordinary [*ProcFailedError] naming the rank (replicated.go). Replicas
// must run the same deterministic program. What depends on timing —
// receives and probes from AnySource, Iprobe, [Request.Test], [WaitAny] —
// gets the outcome the rank's master replica saw, and a program decides
// anything else from timing through [Session.Decide] or seeds its random
// source with [Session.Seed] (decide.go). Irecv from AnySource is refused
// ([ErrReplicatedWildcard]), and Session.Failures delivers a failure at a
// different moment at each replica: a program that acts on it decides the
// moment through Decide (examples/nqueens does).
//
// A replicated send and receive allocate nothing, as unreplicated ones
// do not, once the buffers kept for reuse cover the replicas' lag: a
// send's backup copy is kept until every replica of its destination has
// it, and a replica that runs behind holds its messages unreceived, so
// the more a replica lags (it shares the cores with the others), the
// more buffers are in use at once. Those pools grow by a slab of buffers
// per allocation, to the largest lag seen (replicated.go).
//
// # Spares
//
// With `cohort run -n N --spares S` the job has N ranks and S spare
// processes outside the world communicator; [Session.Processes] holds all
// N+S, and [Comm.Create] builds a communicator whose rank r is whichever
// process now holds it (spares.go). A program takes spares through
// package resil, which does all of this for it; [Init] refuses to make a
// spare of any other program ([ErrSpare]) unless it passes [AllowSpares].
//
// A process may also join the running job later, as a newcomer with a
// process number of its own ([JoinLocal] in a job of one process; over
// TCP a process that `cohort run --respawn` starts again, which [Init]
// registers late with the launcher; a failed process never comes back
// under its number): the membership
// admits it, [Session.Newcomers] lists it at every process whose view
// holds it, and the members of a communicator add it with [Comm.Grow],
// its [Session.Welcome] returning the same communicator (newcomer.go).
//
// # Data path
//
// Data frames (kinds of core.ProtoComm) do not go through the host's event
// loop: a send is encoded and handed to the transport on the caller's
// goroutine, and the transport's reader goroutine hands an arriving frame to
// the matching engine (host.Config.DataPath), which copies it straight into
// a posted receive's buffer or queues it. A message of 16 KiB or more
// (wire.PlaceMin) whose receive is already posted is not even copied: over
// TCP the reader reads it from the kernel directly into the receive's
// buffer (host.Config.Placer, place.go). Only failure news comes from the
// loop (member.ViewInstalled events).
package comm
