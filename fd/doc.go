// Package fd holds cohort's failure detectors. Each is a deterministic
// [core.Machine] that owns protocol [core.ProtoFD] in a node's [core.Stack],
// follows the member list it is told about ([core.MembersChanged]) and
// reports what it concludes with the shared events [core.Suspected],
// [core.Unsuspected], [core.Failed] and [core.Recovered]. A stack holds one
// detector (both claim core.ProtoFD). A host registers the decoders of every
// fd message with [RegisterCodecs].
//
// # Gossip detector (P2P-MPI §5)
//
// [Gossip] is the gossip-style detector of Genaud and Rattanapoka's P2P-MPI
// (§5.1–5.3), after van Renesse et al. Use it like this:
//
//  1. Make a configuration with [DefaultGossipConfig] (DBRR, T_gossip =
//     0.5 s, T_cleanup = 3⌈log2 n⌉·T_gossip from the current n, a ping
//     consensus) and change fields, or start from [LANGossipConfig],
//     [WANGossipConfig] or [SimGossipConfig].
//  2. Make the detector with [NewGossip], giving the initial member list in
//     view order. The list is retained, not copied: never modify it (a
//     simulation can hand the same slice to every node).
//  3. Put it in the node's stack (or drive it alone) and Start it. Deliver
//     core.MembersChanged when the view changes and core.PeerHint when the
//     transport has trouble with a peer.
//  4. Read core.Suspected / core.Unsuspected / core.Failed /
//     core.Recovered from the events it emits.
//
// Steps 1 and 2 in code:
//
//	cfg := fd.DefaultGossipConfig()
//	cfg.Schedule = topo.BinaryRoundRobin
//	g, err := fd.NewGossip(cfg, members)
//
// The protocol. Every node keeps a heartbeat table with one entry per
// member: a uint32 counter, indexed by the member's position in the view.
// Once per round (every T_gossip) a node increments its own counter and
// sends its whole table ([GossipMsg]) to one node chosen by the schedule:
//
//	random  d drawn uniformly among the others               (§5.1)
//	RR      d = (s + r) mod n,          1 ≤ r ≤ n−1          (§5.1, Eq. 3)
//	BRR     d = (s + 2^(r−1)) mod n,    1 ≤ r ≤ ⌈log2 n⌉     (§5.1, Eq. 4)
//	DBRR    BRR for r ≤ ⌈log2 n⌉, then d = (s − 2^(r−⌈log2 n⌉−1)) mod n
//	        up to r = 2⌈log2 n⌉                               (§5.2, Eq. 5)
//
// (the formulas live in package topo). A receiver merges the table into its
// own, entry by entry, keeping the maximum. An entry whose counter has not
// increased for T_cleanup makes its node suspected; the detector then pings
// it directly (the consensus phase, §5.1 and §5.3) and declares it failed
// only if PingAttempts pings of PingTimeout each go unanswered.
//
// Rounds and the initial heartbeat adjustment. Nodes are not synchronized:
// each counts its own rounds, starting when it starts. Its round counter is
// its own heartbeat: the round of heartbeat h is ((h−1) mod C)+1 for a cycle
// of C rounds (the paper's circular counter), so nodes started together
// agree on the round number and differ only in phase. A node that starts
// late (a joiner, a restarted process) is aligned by the paper's "initial
// heartbeat adjustment" (§5.3), which this package implements so: when the
// first table of its life arrives and the sender's own heartbeat is more
// than one ahead of its own (more than a phase difference explains), it
// adopts the sender's count and restarts its period T_gossip after that
// arrival, so its rounds follow the sender's by one message latency, and
// judges every entry's age from that round on (what its view gave it
// says nothing of how old a heartbeat is on the others' count). Nodes
// started together never adjust (TestGossipInitialAdjustment). A node
// that later finds a sender two or more ahead (it stalled, or its first
// table came from another newcomer) takes the count the sender had a
// round before, without re-phasing: taking the sender's own count, a node
// whose rounds come earlier than the sender's would lead it until the
// sender's next round, and newcomers catching up from each other would
// carry a growing group's count ahead of its rounds, ageing every entry of
// the nodes that have not caught up (TestBRRJoinsNoSuspicion in package
// group). Every node
// also keeps its own counter above any value others hold for it, so that a
// restarted node's heartbeats are newer than its previous incarnation's.
// Every entry starts with a grace period: its "last increase" is the start
// of the detector (or the view change that added the member). A new
// member's grace ends only with a heartbeat at least as high as this
// node's count when the grace began: a joiner's first heartbeats, counted
// from 0 before its adjustment, are not news of the group's present.
//
// States and events. An entry is alive, probing, suspected, in consensus or
// failed ([GossipStatus]):
//
//	alive     --no increase for T_cleanup-->  consensus   emits Suspected, pings
//	consensus --pong or increase-->           alive       emits Unsuspected
//	consensus --PingAttempts timeouts-->      failed      emits Failed (once)
//	failed    --young heartbeat increase-->   alive       emits Recovered
//	alive     --core.PeerHint-->              probing     pings at once, emits nothing
//	probing   --pong or increase-->           alive       emits nothing
//	probing   --PingAttempts timeouts-->      suspected   emits Suspected
//	suspected --pong or increase-->           alive       emits Unsuspected
//	suspected --T_cleanup expires-->          consensus   pings (no second Suspected)
//	probing   --T_cleanup expires-->          consensus   emits Suspected; the probe goes on
//	alive, probing or suspected
//	          --refused core.PeerHint-->      consensus   emits Suspected (once), pings, probes
//
// A hint is thus a reason to ask early and to report a suspicion early,
// never a verdict: the failure itself still needs T_cleanup without a
// heartbeat and unanswered pings, unless the hint says that the member's
// host refused a connection (see "Refused connections" below). A probe that is still running when
// T_cleanup expires counts as the consensus, so a hint can bring a failure
// declaration forward by at most T_consensus (the lower bound below minus
// T_consensus), never later than the upper bound. A pong gives the entry a fresh T_cleanup. Under
// the bound's assumptions a crashed node's heartbeat never increases after
// its failure is declared (every node already holds its last heartbeat when
// c ≥ P+1, see below), so an increase after Failed proves a new
// incarnation or a false detection that healed. When many nodes crash at
// once this no longer holds, and an increase counts as one in these
// transitions only if the new heartbeat is young (see "Late news of the
// dead" below).
//
// View changes. The table follows the member list: on core.MembersChanged
// (a newer epoch) every entry of a member that stays moves to its new
// position with its counter and state; a new member gets a zero
// counter and a grace period of T_cleanup from now; the state (and pending ping) of a
// member that left is dropped; T_cleanup and the schedule use the new n and
// positions. A member listed in Renewed (a restarted process that joined
// again under its id) is treated as one that left and entered: its state
// and verdict are dropped and it gets a grace period, which only a
// heartbeat counted since then ends. A table carries the sender's member ids next to its counters,
// so tables from another view merge id by id (ids this node does not monitor
// are ignored); tables in the same view merge position by position.
//
// Wire format and size. A [GossipMsg] is the epoch, the entry count, the
// ids delta-coded (first id, then signed differences) and the counters
// delta-coded the same way. Ids are dense and live nodes' counters all count
// rounds since the job started, so both differences almost always fit one
// byte: a table of n members is about 2n bytes (2,052 bytes at n = 1,024,
// measured in the simulator; a failed node's frozen counter costs a few
// bytes more). [GossipPing] and [GossipPong] carry a uvarint sequence
// number.
//
// Memory and allocation. Per node the detector holds a 4-byte counter per
// member plus a one-bit flag (4.125 bytes per member; a view whose ids are
// not increasing adds a 4-byte id index); the few entries that are not
// simply alive (watched, or in a grace period) sit in a short list. The
// member list (4 bytes per member) is shared with the view and with
// outgoing messages. At n = 4,096 that is 16,896 bytes per node
// ([Gossip.TableBytes]); BenchmarkGossipSim measures 18.4 KB of Go heap per
// node in the simulator at n = 4,096. Since the protocol is n² in memory,
// 4 GiB holds the tables of about 32,000 nodes (4.125·n² ≤ 2³²), and the
// simulator's measured heap reaches 4 GiB at about 31,000 nodes; with Go's
// default GOGC=100 the peak heap is up to twice the live heap, so set
// GOMEMLIMIT near that size. 100,000 gossip nodes in one group would need
// about 41 GB of tables alone: that is the protocol's own n² cost, not the
// simulator's. Merging is in place and allocates
// nothing. Sending allocates once per round: the message gets its own copy
// of the counters (4n bytes), because a sent message must never change and
// the table changes at the next merge (copy-on-send; the copy belongs to
// the message, which nobody mutates afterwards).
//
// Doubted targets. The paper does not say what a node does when the
// schedule names a member it suspects; this package's rule: a round whose
// target is probing, suspected, in consensus or failed sends the table to
// the first member after this node in view order (me+1, me+2, …
// wrapping) that is none of these, and a failed target gets the table as
// well; with no such member left, the scheduled target alone gets it.
// Why: under BRR a node's targets are s+1, s+2, s+4, …, so when a block
// of consecutive ranks dies with its compute node, a rank just before the
// block can lose every target at once (n = 8, ranks 4–7 dead: rank 3's
// targets are 4, 5 and 7), and its heartbeat then reaches nobody: without
// the rule the survivors would suspect it every T_cleanup until the view
// changes, and only a timely pong would save it each time. Why a successor of
// this node rather than of the target: each live member is the first
// undoubted successor of one live member only, whereas every table aimed
// at a dead block would go to the one member after it. Why a failed
// target still gets its table: a member that comes back (restarted, or
// falsely declared across a healed partition) hears from the group only
// so, and its recovery needs it (TestGossipSimRecovery). A round thus
// sends at most two tables, two only while the schedule names a member
// declared failed (in cohort, until the membership removes it). The rule
// changes nothing under the assumptions of the bound below: there no live
// member is ever doubted, and tables that would have gone to the crashed
// node alone are sent elsewhere as well, which only spreads heartbeats
// sooner. It cannot keep live nodes from being suspected in the first
// T_cleanup after such a crash: at n = 8 under BRR, rank 0's senders (7,
// 6, 4) die too, so it hears from nobody and suspects everyone at once;
// the consensus ping clears the live ones, and the rule keeps them from
// being suspected again (TestGossipSimNodeCrash). DBRR, whose targets
// also run backwards (s−1, s−2, …), and RR do not suspect live nodes in
// that case.
//
// Late news of the dead. After such a crash a node that heard from nobody
// for a while gets tables again through the replacements, and they can
// carry a dead node's heartbeat a round or two fresher than the one it
// held. So, for a node declared failed, an increase proves life only if
// the new heartbeat is itself younger than the plain T_cleanup, c rounds;
// otherwise it is merged and the verdict stands. A restarted node adopts
// the group's count when its first table arrives, so its heartbeat is
// young and its recovery is seen. For a suspect, any increase still ends
// the suspicion (P2P-MPI's rule; a suspicion from a refused connection
// excepted, see "Refused connections"): a live node that its host starved for a
// while sends heartbeats as old as the rounds it missed, and taking them
// for a dead node's would leave its life to the pings alone, which the
// same starvation delays;
// a dead node's late heartbeat costs at most a second T_cleanup before it
// is suspected again.
//
// # Detection time of BRR and DBRR
//
// Because BRR and DBRR route deterministically, the time until a live node
// declares a crashed node failed can be bounded (§5.3 compares the
// observed time with T_cleanup). [DetectionBound] and [DetectionBoundSpread]
// compute the bound derived here; [PropagationRounds] computes P. It holds
// for RR too (with its own P), not for random gossip.
//
// Notation: T = T_gossip; c = CleanupRounds(n), T_cleanup in rounds; P =
// PropagationRounds(schedule, n); L = the largest one-way latency; Φ = the
// phase spread (below); T_cons = PingAttempts·PingTimeout; t_c = the time
// node j crashes; t_x(k) = the start of node x's round k.
//
// Assumptions:
//
//   - A1: a stable view of n ≥ 2 members with the same configuration; j is
//     the only failure in the window considered; no loss, no partition.
//   - A2: aligned rounds. Every node's round k carries heartbeat k (it
//     started with the others, or the initial adjustment aligned it), and
//     round k of node x starts at t_x(k) = s_x + (k−1)T with all s_x within
//     Φ of each other; clocks do not drift during the window.
//   - A3: latencies are at most L, and (S): L + Φ < T. Then a table sent in
//     round k reaches every receiver before the receiver's round k+1. This
//     is the paper's pair of assumptions "the initial heartbeat adjustment
//     is effective and message delays are less than T_gossip" (§5.3).
//   - A4: steady state: j crashes more than P rounds after every node
//     started.
//
// Step 1: the last heartbeat that left j. Let round K be j's last round
// before t_c: t_j(K) ∈ (t_c−T, t_c]. Its table may be lost if j dies while
// it is in transit (the simulator drops a crashed node's messages in
// flight), and only if j dies within L of sending it (t_j(K) > t_c − L);
// the table of round K−1 arrived by t_j(K)−T+L < t_c. So j's last
// delivered heartbeat h left j at some t_h with t_c − T − L < t_h ≤ t_c,
// in round K_h ∈ {K−1, K}.
//
// Step 2: propagation. By (S), a node that holds h before its round k
// forwards it in round k, and its target holds h before its own round k+1.
// j sent h once, in round K_h; with aligned rounds the holders then grow
// exactly as the flood that PropagationRounds runs (the schedule is
// circulant, j removed), so node i first receives h at a time a_i ≥ t_h,
// before its round K_h + P.
//
// Step 3: suspicion. The detector does not time the arrival of a heartbeat;
// it reads its age. Heartbeats are round counters aligned across nodes (A2,
// kept aligned by the adjustment), so node i, in its round q, holds j's
// entry b and computes its age q − b; it suspects j in the first round q
// with q − b > c. This is "the heartbeat has not increased for T_cleanup"
// measured from when the heartbeat left j rather than from when it reached
// i, which is what makes the observed detection time of §5.3 track the
// theoretical T_cleanup instead of T_cleanup plus a propagation delay.
// While j lives, i holds in round q a heartbeat of round q−P or later
// (Step 2), so ages stay ≤ P ≤ c. After the crash, i holds h from round
// h+P ≤ h+c on, and suspects in round q = h+c+1, at
//
//	σ = t_i(h+c+1) = s_i + (h+c)·T = t_j(h) + (c+1)·T + (s_i − s_j)
//
// with |s_i − s_j| ≤ Φ and t_h = t_j(h) ∈ (t_c − T − L, t_c]:
//
//	t_c + c·T − L − Φ  <  σ  ≤  t_c + (c+1)·T + Φ
//
// Step 4: consensus. j answers no ping and its counter never increases
// again (h is the highest heartbeat that left j), so i declares j failed at
// exactly σ + T_cons.
//
// Result: i declares j failed at t_c + D with
//
//	c·T − L − Φ + T_cons  <  D  ≤  (c+1)·T + Φ + T_cons,   provided c ≥ P.
//
// DetectionBoundSpread returns [lo, hi] with these values (and ErrNoBound
// when c < P); DetectionBound uses the largest spread (S) allows, Φ → T − L.
// In the paper's terms D is T_cleanup, give or take one round and the phase
// spread, plus the consensus: the window is 1·T + 2Φ + L wide whatever n,
// and it lies inside [T_cleanup − T_gossip, T_cleanup + T_cleanup^min +
// T_cons] whenever L + Φ < T and T + Φ ≤ T_cleanup^min (n ≥ 3 for BRR).
// P itself — the rounds the dead node's last heartbeat needs to reach
// everyone, computed by [PropagationRounds] — only enters through c ≥ P:
// BRR needs P = ⌈log2 n⌉+1 or +2 (§5.1's example, n = 4: 3 rounds), DBRR
// the same (P = 9 at n = 256, 13 at n = 4,096), RR about 1.5·T_cleanup^min.
// The simulator finds detections within 70 ms of the upper bound for BRR
// and DBRR at n = 9…256 (TestGossipSimDetectionWithinBound). Example:
// DBRR at n = 256 with the default configuration (c = 24, T_cons = 1 s),
// L = 10 ms, Φ = 100 ms: every node declares the crash between 12.79 s and
// 13.6 s.
//
// No false suspicion. By Step 2, a live node's entry at i is never more
// than P rounds old, so c ≥ P rules out false suspicions under A1–A3. The
// default T_cleanup satisfies it for RR, BRR and DBRR
// (TestDefaultCleanupExceedsPropagation); the paper sets 3⌈log2 n⌉ for DBRR
// (§5.2) and says BRR uses "the same assumptions", read here as
// T_cleanup^min + ⌈log2 n⌉ rounds = 2⌈log2 n⌉; RR gets 2·T_cleanup^min and
// random 3⌈log2 n⌉ rounds (the paper gives neither). Random gossip has no
// such guarantee: over 8 nodes it suspects live nodes now and then, and only
// the consensus ping keeps them from being declared failed
// (TestGossipSimRandomSmallFalseSuspicion), which is §5.1's point.
//
// Drift. Real timers drift and processes stall. Every table carries its
// sender's own counter; a node that finds a sender two or more rounds ahead
// adopts that count (without re-phasing its period), so the counters stay
// within about a round of the fastest node and ages stay meaningful. A node
// that jumps ahead sees every other entry up to that many rounds older; the
// margin c − P absorbs it. A new member, and a suspect that answered a ping,
// get a grace period of T_cleanup from that round, kept beside the table
// (the table only ever carries heartbeats that nodes really sent).
// Without (S) — latencies near T_gossip, phases spread over a whole round,
// views in flux — neither the bound nor the accuracy argument holds; the
// ping consensus is what keeps live nodes from being declared failed then.
//
// Lateness and adaptation (GossipConfig.LocalHealthMax = H, default 3; 0
// is the paper's detector and the bound above). A node that finds its own
// round timer more than LateTolerance late (its loop stalled) restarts
// every entry's age from that round, and a round late by any amount runs
// its cleanup check only after as long again, so that the tables waiting
// behind the timer are merged first; a jump of its count by J rounds
// credits every entry with J rounds for the next c rounds. Its score s
// (raised per lateness, decaying one per round on time) multiplies c and
// PingTimeout by 1 + s, and each suspicion the suspect disproves adds
// ⌈c/4⌉ rounds to an adaptive margin on c (and a factor to PingTimeout),
// all capped at (1 + H)·c rounds and (1 + H)·PingTimeout. With every
// factor at its cap, Step 3 happens at the latest (1 + H)·c rounds after
// h, and the result becomes
//
//	D ≤ ((1 + H)·c + 1)·T + Φ + (1 + H)·T_cons,
//
// plus, for a node whose loop stalled in that window, the time from the
// crash to the end of its last stall (its judgement restarts then). A
// node on time whose peers never disproved its suspicions keeps every
// factor at 1 and the bound above. [HealthStats] counts what it saw.
//
// Stall memory and isolation (H > 0). The factors above stop at 1 + H,
// and on a host with more runnable processes than cores live members go
// unheard for longer than that allows. So the detector also remembers
// the longest stall M it saw lately: its own lateness (even within
// LateTolerance), or how much longer than the freshest of the others a
// suspect had been silent before it proved alive; M decays by 1/64 per
// round on time (it halves in about 44 rounds) and is at most
// [GossipConfig.StallCap], (1 + H)·(c·T + T_cons). It suspects
// s = ⌈2M/T⌉ rounds later, and when the consensus pings go unanswered it
// pings on for 2M more before it declares, asking helpers again for as
// long as a probe fits in that time (those of the first probe may have
// been out of reach, behind a partition that has healed since). A node whose inputs all
// stopped (the newest heartbeat it holds of anyone is older than
// max(c/3, 2) rounds: no member sends it anything fresh) ages every entry
// together, and it cannot tell from what it receives whether the members
// that send to it died or were starved; its own lateness tells. If it
// was starved itself (the lateness it remembers of its own timers is at
// least LateTolerance/2), the entries expiring
// are its own isolation: it suspects nobody and restarts every entry's
// age, once per gap; if no news came when the restarted ages expire, it
// suspects as usual. A node on time suspects at once, as the paper's
// does, but holds each verdict as long again as its input gap (the
// suspect's entry aged that much for want of news), and the refutation
// of such a suspicion teaches it nothing. With every factor at its cap,
//
//	D ≤ ((1 + H)·c + s + 1)·T + Φ + max((1 + H)·T_cons, ProbeTimeout) + 2M
//	    + 2·((1 + H)·c + s + 1)·T   for a node whose inputs all stopped
//
// ([LoadedDetectionBound]), plus the end of the node's own last stall as
// above. A group on time remembers no stall (M = 0), takes no input gap
// while its members live, and keeps the bounds above. [GossipStallStats]
// counts what the memory did. TestGossipSimOverloaded checks the bound,
// and that no node that has been late declares a live one failed, on 16
// nodes stalling 0.1–2 s; TestGossipSimIsolation checks both sides of an
// input gap: senders starved and senders crashed, with the node starved
// or on time.
//
// Refused connections. A core.PeerHint with Refused says that the
// member's host answered that nothing listens at its address: a process
// that crashed leaves that behind, one that its host starves or a cut
// hides does not (its listener stays, or no answer comes). A transport
// says the same of a member on its own host whose connection ended and
// whose process is gone (transport/tcp reads /proc). The detector
// then starts the consensus at once, whatever the entry's age, and marks
// it refused: its verdict is not held for the stalls remembered (a stall
// does not close a port), and only a heartbeat younger than the plain
// T_cleanup ends the suspicion, as for a member declared failed (others
// may still pass on the dead member's last heartbeats for a few rounds);
// a pong or a helper's answer ends it as usual. A crashed member is so
// declared within
//
//	t_r + max((1 + H)·T_cons, ProbeTimeout)
//
// of the first refusal t_r, on an overloaded host as on an idle one
// (TestGossipSimOverloadedRefused), or within the bounds above if that
// is sooner. A node refused only when it sends to the dead member: its
// schedule's table, within a cycle of ⌈log2 n⌉ rounds (BRR) for the
// members that send to it, a ping, or another layer's message (in
// cohort, every member's report of the root's death goes to the next
// root). On a 2-core host running 128 processes the stall memory held
// verdicts on a crashed root for tens of seconds, while the membership
// waits for the detector's verdict on a silent root.
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
//
// # Reachability is not liveness: indirect probes
//
// A silent peer may be alive behind a broken link (a partial partition, a
// one-way cut, a firewall rule) while other members still reach it. Both
// detectors therefore ask before they declare (SWIM's ping-req; Phoenix
// separates "unreachable for a while" from "failed"): when a suspicion of
// their own starts, they ask k = IndirectProbes other members to reach
// the suspect on their behalf ([HeartbeatProbeReq], [GossipProbeReq]),
// drawn with the node's random source, members heard from lately first
// (a node cut off from most others must ask the few it still reaches)
// and members it doubts last (the link from them may be down, the link to
// them not). Half way through ProbeTimeout, with no answer, a second wave
// asks four times as many. A helper that hears from the suspect answers
// ([HeartbeatProbeAck], [GossipProbeAck]); the answer ends the suspicion
// ([core.Unsuspected]), the suspect stays a member, and it is listed by
// Unreachable ([HeartbeatDetector.Unreachable], [Gossip.Unreachable])
// until a message from it arrives, for routing to use, and counted
// (HeartbeatStats.IndirectAlive, GossipProbeStats.IndirectAlive). Only
// when no helper answers within ProbeTimeout does the verdict go out.
//
// The probe runs during the wait the verdict had anyway: the heartbeat
// detector's T_broken, the gossip detector's consensus phase. So a
// failure is declared at
//
//	heartbeat: max(T_broken as above, ProbeTimeout) after the suspicion
//	gossip:    max(T_consensus, ProbeTimeout) after the suspicion
//	           (GossipConfig.VerdictTime)
//
// and the detection bounds become
//
//	T_detect' = T_detect + max(0, ProbeTimeout − T_broken)     heartbeat
//	D'        = D + max(0, ProbeTimeout − T_consensus)        gossip
//
// plus, for the gossip detector, one ProbeTimeout for each view that adds
// members while the probe runs (the new members are asked too, and given
// their time); under the bound's assumptions (a stable view, one crash)
// there is none. Nothing else in the probe delays a verdict on a crashed
// process more than before: an answer that ends a suspicion is a message
// the suspect sent after the request, or (gossip) a heartbeat of it at
// most half T_cleanup old, as with the two-hop probe.
//
// The default ProbeTimeout is T_broken (heartbeat) and T_consensus
// (gossip): a process whose every link is cut, or that crashed, is
// declared failed as fast as without indirect probes
// (testdata/heartbeat/indirect-probe.txt, TestGossipIndirectProbeUnanswered,
// TestHeartbeatSimWholeHostCrash, TestGossipSimWholeHostCrash).
//
// Heartbeat detector. Its suspicion was broadcast, and the members that
// only heard it would declare the failure after their own T_broken. So a
// helper sends the suspect the suspicion notice itself (the accuser's
// copy crossed the broken link), repeated four times per ProbeTimeout
// until the suspect acknowledges; a helper that has not heard from the
// suspect a quarter of ProbeTimeout later passes the request on once to
// helpers of its own and relays their answer (a suspect two hops away);
// every member that holds a suspicion pings the suspect as often, so any member that reaches it, now or when
// a link comes back, makes it refute (a pong is a message from a suspect,
// which the member answers with the notice); and a refutation goes, as
// well as along the notice fan, to whoever told the suspect and back to
// whoever told each member of the suspicion, so that it finds its way out
// of a node that reaches few others and back to the accuser. A member
// that only heard of the suspicion and passed the accuser's request on
// ends its own suspicion when its helper answers: the refutation follows
// the way back to the accuser, which need not lead to it. A member that
// only heard of the suspicion and then saw the suspect's deadline pass
// here too holds the suspicion as its own from then on, and probes
// before its verdict as the accuser does
// (testdata/heartbeat/heard-suspicion.txt): the refutation may miss it
// the same way, and a member cut off from the suspect would otherwise
// declare it a monitor's T_broken after the suspicion. Its verdict on a
// crash comes no later than had it suspected on its own then, and the
// accuser's comes first. A suspicion of its own whose verdict is held
// past its probe (local health, the stalls remembered, settling, an
// input gap; see "Under load") asks k helpers again, drawn afresh, every
// T_interval + T_timeout for as long as a probe ends within the hold:
// the first probe's helpers may all have been out of reach, behind a
// partition that heals during the hold, and a member that then reaches
// both sides is the way to a suspect whose direct link stays cut
// (TestHeartbeatSimHeldVerdictProbesAgain). The hold's end, and so the
// verdict on a crash, does not move: whether a probe fits is judged when
// it would start, so a hold that grows a little (the verdict's re-check
// adds its timer's lateness) never starts one from a due time long past,
// and a suspicion from a refused connection, held by T_broken alone, is
// never asked about again (TestHeartbeatSimRefusedInSettling).
//
// Gossip detector. Its tables already travel over many paths, so it
// rarely suspects a live node behind a cut link; but news crosses a link
// only when the schedule names it, once per cycle of 2⌈log2 n⌉ rounds, so
// over a path of three hops a fresher heartbeat arrives long after the
// verdict would. The probe therefore searches the view. A helper answers
// at once with the suspect's heartbeat it holds, which refutes if it is
// newer than the suspected one and at most half T_cleanup old (after a
// crash, others may hold a dead node's last heartbeat a few rounds
// fresher); it pings the suspect, tells the suspect who suspects it
// (GossipProbeReq's Origin), and passes the request on to helpers of its
// own, up to n − 2 times along a chain, as far as a simple path through
// the view goes. Requests about one suspect share each helper's ping and
// pass-on; a pass-on unanswered half way through asks 4k more members,
// and one shared by a later requester is sent to the earlier ones too
// (each was left out as the one to go round), as a request they answer
// but do not pass on: they run their own pass-on already, and sent on,
// such requests went round between the helpers for as long as the
// suspect stayed silent (3 to 3.6 times as many requests among 16
// members whose loops stalled, TestGossipSimProbeStorm). Answers travel
// back along the chain; the suspect answers the suspecting member itself as well,
// directly and through a few members it heard from lately
// ([GossipProbeRelay]), in case the way back is cut one way; and a
// helper that learns the suspect alive by other means (its own probe, a
// pong, a young heartbeat) answers the requests it is still helping
// with. A probe running when the view adds members asks them too.
//
// A link that stays cut is suspected once. A heartbeat detector whose
// suspicion a helper answered, or whose suspect's refutation came round
// the link rather than over it, counts the peer unreachable, stops
// choosing it as a monitor, and when the peer's next deadline passes
// asks k helpers to ping it ([HeartbeatProbeReq] with Recheck) instead of
// suspecting it again: an answer renews the deadline and nobody else
// hears of it; no answer within T_interval + T_timeout (or ProbeTimeout
// if longer) makes it a suspicion as usual (so a crash behind a cut link
// is declared that much later by the members that only reach it through
// others). When the link comes back, each side repeats what it last
// announced on it (a monitor demoted across the cut would otherwise keep
// waiting for heartbeats every T_interval). TestHeartbeatSimStandingPairCut:
// one accusation per cut direction and minute, no suspicion after the
// heal, where the paper's detector suspects the cut peer every
// T_interval + T_timeout (16 to 30 accusations and 240 to 410
// suspicions a minute among 16 members).
//
// Cost per suspicion: a few dozen small messages (heartbeat: up to 5k + 5k²
// requests and their notices, a ping per member per quarter ProbeTimeout
// while the suspicion lasts, and k + k² requests more per
// T_interval + T_timeout of a held verdict; gossip: each member that is asked sends one
// ping, one message to the suspect per request it receives, and passes on
// once per suspect (once per hop count it is reached with: once while
// the suspect answers, but up to n − 2 times when members stall, as they
// do on an overloaded host) to k, then 4k more, members and to the
// earlier requesters of a shared pass-on, so O(k·n) requests over the
// view when the probe is answered, and their answers; with 15 of 16
// members stalling 20–800 ms, about 1,500 to 4,400 requests per
// suspicion, TestGossipSimProbeStorm);
// while a link stays cut, the heartbeat detector's recheck
// costs k requests (k + k² when the helpers do not reach the peer
// either), as many pings, their pongs and answers per
// T_interval + T_timeout per side that watches the other.
// Also with indirect probes, a notice's fan skips no one for the dead:
// a target that is the notice's subject or held failed is replaced by
// the next member, and a suspected one gets such a stand-in besides.
// Limits: the heartbeat detector's probe reaches a suspect at most two
// hops away, its refutation going round by the notice flood; the gossip
// detector's reaches as far as paths through the view go; helpers come
// from the node's own view. The simulator's partial-partition swarm
// checks the rest (docs/VALIDATION.md). IndirectProbes = 0 is the papers'
// detectors.
//
// # Under load
//
// Both detectors measure their own lateness from the deadlines of their
// timers (a deadline already past when its timer was set counts from
// that moment), after memberlist's Lifeguard: a process that finds
// itself late (a long GC pause, an overloaded host) accuses nobody on
// the strength of silence it did not watch, and waits longer while it
// keeps running late; timeouts also adapt to what is measured of the
// peers. Everything stays within (1 + LocalHealthMax) times the
// configured timeouts plus a margin for the stalls remembered (below);
// the bounds above state the worst case for a group on time. The
// heartbeat detector also waits twice the longest stall it saw lately
// more before it suspects or declares (its own lateness, even within
// LateTolerance; or the silence
// of a suspect that refuted the suspicion, or was answered for by a
// helper, or, declared failed, was heard again: the suspicion's length,
// plus the T_interval + T_timeout before it once it lasted T_interval,
// counted up to (1 + H)·(T_timeout + T_broken); the memory halves in about
// 44 T_interval on time, and the peers' stalls are kept in a second memory
// that halves in 512 T_interval, since on a loaded host a process starved
// for a second or more may be the next one tens of seconds later): on a
// host with more runnable processes than cores every process stalls in
// turn, and a peer's stall that long, or a refutation delayed by it, says
// nothing of a crash (TestHeartbeatSimOverloaded: 32 nodes away 40% of
// the time, no false failure in 100 seeds, where the capped timeouts
// alone made 29 and a margin forgotten within a second 4; 128 processes
// on 2 cores in docs/PERFORMANCE.md). The detection bound of the heartbeat detector is
// therefore, for a process on time,
//
//	T_interval + (1 + H)·(T_timeout + T_broken) + ⌈log2 n⌉ hops + latency
//	  + 2·M on the suspicion + 2·M on the verdict
//
// where M is the stall it remembers: 0 in a group on time, a
// millisecond or so on a real idle host (a whole host cut off is
// declared as fast as without the margin, TestHeartbeatSimWholeHostCrash), at most (1 + H)·(T_timeout + T_broken)
// for stalls seen in peers, and its own longest lateness otherwise. On
// the verdict M is at least (1 + H)·(T_timeout + T_broken) when the
// suspicion began less than SettleIntervals T_interval after this
// process began to watch its group (10 in AggressiveHeartbeatConfig, a
// job's timing on one machine; 0 by default): the processes of a job
// start together, and on a host with more of them than cores one may be
// starved for a second just as the first view makes the detectors watch
// each other, before any stall was seen to learn from
// (TestHeartbeatSimStartupStall); it is as much when the suspicion of a
// newcomer (a member that joined, or came back renewed, in a view after
// this process's first) began less than 2·SettleIntervals T_interval
// after this process installed that view: a process that just joined
// loads and catches up, and is the one likely to stall, so a crash of
// a newcomer then is declared within the same worst case
// (TestHeartbeatSimNewcomerSettles), while a member merely watched anew
// after a view change moved the monitors is declared as fast as any
// (TestHeartbeatSimReassignedNotNewcomer); and it is as much, at most, when
// nothing at all reached this process since the suspicion began, two
// or more of the peers it watches are overdue, and the members it asked
// to help, pinged as well when it suspected after T_interval of hearing
// nothing, have not answered (its input gap: a process catching up
// after a respawn, whose inbox waits unread on a loaded host while its
// timers fire on time, suspects every member at once), until something
// arrives; and if the gap ends, the suspect has its interval + T_timeout
// from that moment (heartbeat_gap.go; TestHeartbeatSimStarvedNewcomer).
// A process that hears from others has no gap, and one whose few
// senders died together (a host's ranks) hears the pongs within a round
// trip, so a crash is declared as before.
// A suspicion from a refused connection gets no margin: a crashed process
// on a live host is declared as fast on an overloaded host as on an idle
// one. A suspect whose link the transport reports answering
// ([core.PeerHint] with Answering: its host acknowledges what it is sent
// and its process holds the connection, as a crashed one does not; on
// the same host, its process lives and holds its socket) has
// its verdict held T_interval + T_timeout past each such hint, at most
// min((1 + H)·T_broken + 2·(1 + H)·(T_timeout + T_broken), T_broken + 2 s)
// after the suspicion (heartbeat_answering.go;
// TestHeartbeatAnsweringLinkHoldsVerdict): the kernel of an overloaded
// host leaves whole processes unscheduled for hundreds of milliseconds,
// and a stopped or hung process is declared at most 2 s past T_broken
// later than before, whatever the preset. LocalHealthMax = 0 restores the
// papers' fixed timeouts. See health.go and [HealthStats].
//
// The gossip detector keeps a stall memory of its own (its lateness, and
// how much longer than the others a refuted suspect was silent) with the
// same decay, and takes an input gap for its own isolation when it was
// starved itself; its bound under load is given above ("Stall memory and
// isolation", [LoadedDetectionBound]).
package fd
