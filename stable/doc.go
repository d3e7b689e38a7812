// Package stable detects message stability: which group messages every
// member of a view has received, so that the reliable multicast above it can
// free them. It implements the four protocols of Friedman, Manor and Guo,
// "Scalable Stability Detection Using Logical Hypercube" (shared/papers):
// Coord (§2.1, Figure 1), FullDist (§2.2, Figure 2), S_Coord (§2.3,
// Figure 3) and CubeFullDist over the incomplete hypercube (§3.2–3.3,
// Figure 5, with package topo's [topo.Cube]), each with the round numbers,
// iteration numbers and retransmissions of §3.5 so that they stay correct
// when messages are lost or reordered.
//
// # Use
//
// A [Detector] is a pure [core.Machine]; put it in a node's [core.Stack]
// below the multicast layer (package vsync does this):
//
//	cfg := stable.DefaultConfig()            // CubeFullDist, 100 ms rounds
//	cfg.Senders = 50                          // optional: only the first 50 members send
//	if err := cfg.Validate(); err != nil { … }
//	det := stable.New(cfg, initialMembers)    // view 0; later views via core.MembersChanged
//	stack := core.NewStack(fdLayer, memberLayer, det, multicastLayer)
//	// and once, when building the host's codec:
//	err := stable.RegisterCodecs(codec)
//
// The multicast layer talks to the detector with two events:
//
//  1. It emits [Progress]{Epoch, Have} whenever its received vector grows:
//     Have[i] is the number of messages of sender i (the member at position
//     i of view Epoch) it holds contiguously. Have only grows within a
//     view. The detector reads the latest one whenever the protocol needs
//     the paper's R_i.
//  2. It receives [Stable]{Epoch, Round, Vector}: every member of view Epoch
//     not reported failed holds at least Vector[i] messages of sender i, so
//     messages 1..Vector[i] of sender i can be freed. Within a view the
//     vectors a node emits only grow. A [RoundDone] follows every Stable,
//     with when the round began and ended at this node (for the RTT of the
//     paper's §4.1).
//
// The detector also follows [core.MembersChanged] (a new view: the running
// round ends without a result and round 1 of the new view starts at once
// over the new member list and, for CubeFullDist, its new hypercube) and,
// if Config.ExcludeFailed is set, [core.Failed] (see "Failures" below).
//
// Every message carries the view epoch and the round, numbered from 1 in
// each view. Messages of an older view are dropped; messages of a later view
// (a member installed it first) are kept, up to 16 + 4n of them, and handled
// when the detector installs that view. The message kinds ([KindStart] …
// [KindGossip]) are registered by [RegisterCodecs]; their decoders are
// fuzzed. Their WireSize follows the paper's accounting (§4.1): a 32-byte
// header plus 4 bytes per vector entry ([HeaderBytes], [EntryBytes]).
//
// # Roles
//
// Positions are indices into the view's member list. Position 0 is Coord's
// coordinator, S_Coord's root and the member that starts FullDist's rounds
// (the paper's node 0, §4.1). S_Coord's tree is the Degree-ary heap over the
// view in view order (Degree = ⌈log2 n⌉ by default, the paper's log n). The
// hypercube of CubeFullDist is topo.NewCube(n) over the positions: position
// p is the paper's node label p, with the compensating edges of §3.3. The
// stability vectors have Config.Senders entries: the first Senders members
// of the view are the senders (the paper's §4.1: nodes below 50).
//
// Rounds start every Config.Period at the initiator (position 0, or every
// member under CubeFullDist), or right after the previous round ended if it
// took longer; the paper's wait(Δ) is measured from the end of a round, ours
// from its start, so that the stability latency is bounded by Period plus
// one round. A member that is not an initiator follows the rounds of the
// messages it receives.
//
// # Reliable channels and §3.5
//
// With Config.Resend = 0 the protocols run exactly as their figures, which
// assume reliable FIFO channels: nothing is sent twice and no ack-info
// exists. This is what the simulation study (`cohort sim stability`) runs,
// so that its message counts are the paper's. With Resend > 0 (the default)
// the §3.5 variants run:
//
//   - Coord and S_Coord: the coordinator/root sends start again every Resend
//     to the members (S_Coord: children) whose ack is missing; a member
//     answers a repeated start with its ack again, and an S_Coord inner node
//     that still misses acks passes the repeated start on to the missing
//     children, so the pull reaches the lost branch. After the round, info
//     is sent again every Resend to the members whose ack-info is missing,
//     until the next round starts (a member that misses info r learns the
//     result of r+1, which subsumes it).
//   - FullDist: a member that has joined a round and misses some rows sends
//     its row again every Resend, marked as a pull, to the members it has
//     not heard from (the paper multicasts it to all; sending it to the
//     silent ones suffices because of the next rule). A member that gets a
//     pull answers with its own row (of its own round, if it is ahead).
//     Stale rows are otherwise ignored, and a row of round r+1 reaching a
//     member in round r counts for round r, as §3.5 says, and is also kept
//     for round r+1.
//   - CubeFullDist: messages carry the iteration number; a neighbour counts
//     for iteration k once a message of iteration ≥ k of this round arrived
//     from it (so duplicates never count twice, as §3.5 asks, and a
//     neighbour one iteration ahead is not waited for again). A running
//     member sends its current message every Resend, as a pull, to the
//     neighbours it has not heard in the current iteration; a neighbour
//     answers a pull with its current message, or, for the round it has
//     just finished, with the last message it sent in that round (line 8),
//     which completes the round at the puller. Neighbours are never more
//     than one round apart: no member can finish round r before every
//     member has started it.
//
// Reordering needs no other rule: every message names its round (and
// iteration), stale ones are ignored, vectors are merged with ArrayMin, and
// a result only raises S_i.
//
// # Failures
//
// By default the detector ignores the failure detector: every member of
// the view is waited for, and a crashed member stalls stability until the
// membership layer installs a view without it. That is what a reliable
// multicast needs (a verdict can be withdrawn by core.Recovered while the
// member stays in the view, and what was declared stable without it may
// already be freed). With Config.ExcludeFailed a [core.Failed] about a
// member of the current view removes it from every wait until the next
// view: Coord's coordinator and FullDist's members no
// longer wait for its ack or row, CubeFullDist no longer counts it in
// rank_i nor needs its bit in G_i (the paper's fault experiment, §4.2.5,
// runs CubeFullDist with failed neighbours of node 0 this way), and an
// S_Coord root whose running round's tree contains it abandons the round and
// starts the next one over a tree without it (§3.4: "the tree needs to be
// rebuilt immediately, and the current round of the protocol is lost"); the
// root lists the members it left out in start, so every member builds the
// same tree. Messages from a member reported failed are ignored. A Stable
// vector therefore speaks for the members not reported failed. The
// coordinator or root itself is never replaced within a view: Coord and
// S_Coord are not fault tolerant (Figure 7), and stop until the membership
// layer installs a view without it; so does CubeFullDist if the failures cut
// the hypercube of the live members in two. [core.Recovered] is ignored: a
// restarted member comes back through a view change.
//
// # Checking
//
// Package stable/stabletest has the simulator checker (sim.Checker) of
// these guarantees: no Stable vector exceeds what a live member of its view
// last reported in Progress, a node's vectors only grow within a view, and
// every live member keeps finishing rounds once faults heal. The swarm test
// (go test ./stable -run TestSwarm, replay one run with -seed=N) runs it
// under crashes, partitions, loss, delay spikes, reordering and view
// changes.
//
// # Where the paper is ambiguous
//
//   - Figure 3 initializes M_i := R_i once and never again, which would pin
//     S_Coord's results to the first round's vectors; we set M_i := R_i when
//     a round starts at the node (start received, or the root's Step 1).
//   - Figure 2 counts receive_from up to n: the own row counts (a multicast
//     includes its sender). A member joins a round when node 0's row of that
//     round arrives (line 3); rows of other members that arrive first are
//     kept for the round.
//   - Figure 3 has the root multicast start to every member, not down the
//     tree; we follow it (so S_Coord costs 3(n−1) messages a round: start,
//     ack, info). An ack that reaches a parent before the root's start does
//     is kept until that start arrives.
//   - Figure 5 enters round r+1 (r_i := r_i + 1, M_i := R_i) at the end of
//     round r, before wait(Δ), and merges the messages of round r+1 that
//     arrive during the wait; we do the same, but count iterations and send
//     only from Step 1 on, and Step 1 sends one message at the highest
//     iteration whose predecessors were all heard during the wait rather
//     than one per iteration. Line 7 is evaluated when a message is merged
//     and at Step 1, so a one-member view ends one round per Period.
//   - The final message of a round (line 8) carries the current iteration;
//     its full bitmap ends the round at the receiver whatever the iteration.
//   - Results are kept as S_i := max(S_i, result), element-wise, so that a
//     late or reordered result never lowers what was announced (stability
//     is non-decreasing, §3.5).
//   - Message sizes: CubeFullDist's n-bit bitmap G is taken to fit in the
//     32-byte header, as in the paper's count (§4.1).
//   - Position 0 of each view plays the paper's node 0; after a view change
//     that is the new view's first member.
package stable
