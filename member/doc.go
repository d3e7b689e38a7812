// Package member is cohort's consistent membership service: the radix-tree
// view-change protocol of Varma, Wang, Mueller, Engelmann and Scott,
// "Scalable, Fault-Tolerant Membership for MPI Tasks on HPC Systems"
// (ICS'06), as a pure [core.Machine]. Every node of a job runs one [Member];
// the survivors of any failure agree on the same numbered view.
//
// # Use
//
//	cfg := member.DefaultConfig()        // or WANConfig(); set Fanout, Partition…
//	m, err := member.New(cfg, ids)       // an initial member: ids is the job
//	g, err := member.NewGroup(cfg, ids); m := g.New()   // many machines of one job in one process
//	j, err := member.NewJoiner(cfg, member.JoinOptions{Contacts: ids})   // a new node
//	r, err := member.NewJoiner(cfg, member.JoinOptions{Contacts: ids, Recovered: true, EpochFloor: saved})
//	stack := core.NewStack(detector, m) // the failure detector below (package fd)
//	codec := wire.NewCodec(); member.RegisterCodecs(codec)   // on a real host
//
// The machine reacts to [core.Failed] (a detector's verdict) and
// [core.Recovered]; it emits [core.MembersChanged] (so that the detector
// follows the view) and then [ViewInstalled] after every view it installs,
// [StabilizationStarted], [Stabilized] and [StabilizationAborted] at roots
// (T_s = Stabilized.At − Stabilized.Began), [Evicted] and [Minority].
// [core.Suspected] is ignored on purpose: a suspicion may be withdrawn, and
// an exclusion cannot (paper footnote 1), so only verdicts start a view
// change. A verdict is about a member of the installed view: the member
// assumes, as package fd does, that its detector stops watching a node that
// leaves the view and watches afresh a node that enters it (reporting it
// failed again if it still is), so it forgets the verdicts about both, and
// the failures they alone made: a held proposal that lists a node the view
// left waits for its acknowledgement instead, as for a joiner's. A
// process that restarted and joined again under its id enters the view as a
// new incarnation: core.MembersChanged lists it in Renewed, and the detector
// watches it afresh too (its old verdict may be about the new incarnation,
// dead again before the view that admits it). Choice: a node that a
// proposal takes back (it was excluded, and merges) does not report the
// proposal's members it holds failed, though it still acts on those
// verdicts itself (a dead root is one to take over from); the next view
// it installs drops them and has its detector watch those members afresh
// (Renewed). They were given while it was cut off from that side, which,
// having excluded it, neither gossips nor beats to it any more; reported
// to the proposal's root, they aborted every merge after a healed
// partition, and the root, believing its own members failed, could find
// itself in a minority. Dropping them at once instead left a node that
// accepted a dead root's proposal unaware of the root's death (swarm seed
// 1452204879). The proposal's members watch each other meanwhile.
// core.Recovered withdraws a failure that no view change has acted on yet,
// and tells a node outside the view that it is outside (EXCLUDED).
//
// # Views and the tree (§3.1–3.2)
//
// A view is an epoch and an ordered member list: the initial members by id,
// then joiners in the order they were admitted; a recovered process leaves
// its place and is appended again. The radix tree is the member list laid
// out as an a-ary heap (package topo): the root is the first member, the
// children of position i are a·i+1…a·i+a, so every node computes the same
// tree from the view in constant time per query, and "the next live node in
// the linear list" is the next position. The initial view needs no message:
// every initial member computes it (epoch 1).
//
// An epoch is counter<<32 | root ([MakeEpoch]): every proposal raises the
// counter above all it has seen, and the proposer's id makes two proposers'
// epochs differ, so "one member set per epoch" holds even when both sides of
// a partition install views. A recovered process passes the highest epoch
// its former self saw ([Member.MaxEpoch], [JoinOptions.EpochFloor]) if its
// host can keep it: epochs then only grow at a node across restarts too.
//
// # Views are immutable and shared
//
// A view (its epoch, member list, ancestry, incarnations and change lists)
// is never modified after it is built. Nodes derive the next view copy on
// write: the root's recalculation (§3.4) builds a new member list from the
// base, it never edits the base. So views are shared, not copied: every
// machine built from one [Group] shares the group's default view, and in
// the simulator, where a message is a pointer, every node that receives a
// proposal installs the very view its root built. The slices the package
// hands out are these shared ones: [View].Members, [ViewInstalled]'s
// Members, Joined and Departed, [core.MembersChanged].Members, and the
// lists inside messages. Read them; copy before modifying.
//
// No node indexes a view on its own: a member's position is found by a
// binary search over the view's sorted prefix (the initial members, by id,
// less those that left) and, for the joiners appended after it, in a
// sorted tail built once per view and shared with it.
//
// A derived view is lazy: until something needs its whole member list,
// it holds the view it was derived from and the departed positions, and
// answers from them what a stabilization's first phase asks (a member's
// position, incarnation, parent and children, the tree's shape). The list
// is built when it is needed, mostly at the install, after the root holds
// every ACK: so no member builds one inside T_s (TestFirstPhaseLeavesViewsLazy).
// Building it changes the view's form, not what it says, and a view is
// used by one goroutine at a time (a node's loop, or the simulator).
// A machine holds only its own state (failures it knows of, timers, the
// proposal in flight), so n machines of one job in one process hold O(n)
// bytes, about 1.5 KB per member after a crash at every size: no machine
// holds its own copy of the member list, which would make a world O(n²)
// (docs/PERFORMANCE.md has the figures of `cohort sim membership-ts`).
//
// # The protocol as implemented
//
// Failures (§3.4, Figure 3(a)). A node whose detector declares members
// failed sends NODE_FAILURE with every failed member it knows (the list of
// §3.5, with incarnations) to the root; when the root itself is among them,
// ROOT_FAILURE to the first member not known to have failed (§3.6). The
// receiver answers FAILURE_DET_ACK (duplicates are acknowledged and
// ignored; reports about a former incarnation are ignored); without it the
// reporter reports again after ReportRetry, to the root it believes in then.
// A node that is not the root passes a report on.
//
// The root recalculates the view (§3.4: the failed nodes leave, their
// successors move up) and sends it down the new tree. This is the first
// phase of a two-phase commit: the Prepare message is FAILED_NODE,
// ROOT_DEAD (the root changed), ROOT_AND_NODE_FAILURE (both),
// NEW_NODE_JOIN or ALIVE_NODE_JOIN (§3.7). It carries the new epoch, the
// base epoch and a few ancestors, and the change (failed list, joiners);
// each node recomputes the view from its own copy of the base (§3.4, "the
// tree recalculation occurs locally"). Joiners get the full list; a node
// that lacks the base asks its parent for it (VIEW_NEED), which answers
// with the proposal it holds or the view it installed, never with one it
// gave up. Each node passes
// the Prepare to its children in the new tree and acknowledges up
// (FAILURE_ACK, NEW_NODE_JOIN_ACK or ALIVE_NODE_JOIN_ACK) once all its
// children have. A parent whose subtree is h levels deep waits h×AckTimeout,
// sends the Prepare again to the children that stayed silent (a child that
// had acknowledged repeats its ACK) and waits twice as long again (the
// repeated ACK of a child whose first was lost leaves only when the
// repeated Prepare arrives, then crosses the child's own, maybe slow,
// link), sending it again every half wait meanwhile, so that lost
// messages or a slow child do not exclude a live subtree (under
// PartitionMajority it does not retry, see onAckTimeout); a child still
// silent is reported as failed (NODE_FAILURE, §3.4–3.5),
// and the root restarts the proposal with the longer list (§3.5: "the root
// propagates a list of failed nodes"); joins that arrive meanwhile wait for
// the next proposal. Choice: a silent child that the detector watches (a
// member of the installed view) is not reported then but handed to the
// detector ([core.PeerHint]) and sent the proposal every wait; its
// verdict, 40 more AckTimeouts (2 s by default) for a parent of leaves
// and 20 more per level above, so that a parent outlasts its inner
// children's waits and their reports' way up
// (testdata/late-inner-child.txt), or a message from the
// child heard a wait earlier without its ACK reports it: its refusal
// (VIEW_NACK, to a parent that is the root) or an EXCLUDED notice, never
// mere speech. A leaf's heartbeats do not show that the proposal reached
// it: while the transport routes around a cut host, the direction from
// its parent has lagged seconds behind its own
// (testdata/leaf-heard-proposal-late.txt). An
// inner child's ACK speaks for its
// subtree: when a whole host dies, the first proposal drops only the
// first of its processes declared, and a live member whose children in
// the new tree are others of them speaks (heartbeats) but cannot
// acknowledge until its detector declares them or its own waits, which
// end before its parent's, report them
// (testdata/dead-grandchildren.txt). An overloaded host starves live
// processes for longer than any ACK wait, and the detector's timeouts,
// unlike the membership's, adapt to the stalls it measures. The member
// sees other layers' messages as a [core.TrafficObserver] for this. The
// tree is stable when the root holds every child's ACK (§3.4): the root
// emits [Stabilized], installs the view and sends VIEW_COMMIT down the
// tree, and JOIN_DET_ACK to each joiner (§3.7).
//
// Choice: the paper's nodes adopt the new tree when FAILED_NODE reaches
// them, so a failure during propagation can leave nodes on different views.
// Here a node installs a view only once it is committed: on VIEW_COMMIT
// (or JOIN_DET_ACK); or when the root's next proposal is based on it
// (Prepare.Committed), if the commit was lost; or, with VIEW_QUERY and
// VIEW_SYNC, when the commit is overdue by CommitTimeout. T_s is measured
// exactly as the paper defines it, at the root, before the commit.
//
// The critical path of T_s is one tree echo: the proposal goes down the
// H−1 levels of the new tree and the ACKs come back up, 2(H−1) hops and
// 2(m−1) messages for m members, the pattern the membership benchmark
// times as its baseline (`cohort bench membership`, "echo"); the report
// before it and the commit after it lie outside T_s. No phase can go: a
// node installs only a committed view, so the root commits only once it
// holds every ACK, and an interior node's ACK speaks for its whole
// subtree, so it waits for its children's. What T_s costs above the echo
// is each node's work on the proposal (decoding it, placing itself in the
// derived view, the timers and the bookkeeping of accept; the view's list,
// O(m), is built after T_s, see above), which the benchmark reports as
// processor time per node.
//
// Root failure (§3.6, §6). The first member not known to have failed
// becomes the root when it learns that all before it failed (its detector,
// or a ROOT_FAILURE listing them; chained root failures need no extra step).
// If it holds the dead root's uncommitted proposal, that proposal may have
// committed somewhere, so it adopts it: its own proposal is based on it
// (Prepare.Committed false: nobody installs the adopted view) and takes
// back, as joiners, the members of the installed view that the adopted one
// dropped and that it does not know to have failed.
//
// Acceptance (the safety core; the paper is silent here). A node accepts a
// proposal only if the proposal descends from the newest view the node holds
// (installed or accepted), or replaces an accepted proposal of the same root
// (a root proposes again only after abandoning its previous proposal), or
// admits the node as a joiner while it joins or merges, or, under
// PartitionMajority, takes it back into its own lineage (the proposal's
// ancestry holds the node's installed view: a dead root's proposal between
// excluded it) while the node holds no proposal that may have committed
// (nothing, or its own proposal on its installed view; one that holds
// another root's proposal asks that root at once what became of it, see
// VIEW_QUERY below). Under PartitionMajority a node whose newest view is
// its installed one (or its own proposal on it) also refuses a proposal
// that descends from that view but keeps no majority of it: the proposals
// between never had its ACK, and the view's majority may have moved on
// without it (it answers with that view). Under PartitionMajority a node
// also refuses a proposal that replaces the one it holds but abandons a
// dead root's proposal that the held one was built on, that the node
// acknowledged and that nobody gave up: the replacement says only that its
// own root gave up its proposal, and the older one may have committed. The
// node drops what was given up, falls back to what it holds beneath and
// asks the older proposal's members (VIEW_QUERY). A node that refuses answers
// VIEW_NACK with its newest view. The proposer then adopts that view
// (if it is an accepted proposal descending from what the proposer must
// descend from, and contains it), installs it (if it is installed there and
// contains it, keeping the dead root's proposal it built on if that
// descends from the view), learns that it was excluded, re-proposes above
// a joiner's epoch, or, when two roots compete over the same base, the
// lower epoch yields. A node holding an uncommitted proposal asks its root what became
// of it once its commit is overdue (VIEW_QUERY): the root answers VIEW_SYNC
// with its view, or with Abort and, if its own proposal was based on a dead
// root's one, that adopted proposal (Pending), which the holder keeps. When
// the root is known to have failed the holder asks the proposal's members
// too: a member that never acknowledged it promises never to and answers
// with Abort (so does a process still joining, which has no view to send:
// its answer names its incarnation, and counts only if the proposal's
// member is that process), and the holder drops it (a proposal commits
// only with every member's ACK). So does a node that held or built on a
// proposal and accepts one whose lineage holds a later proposal of the same
// root: that root gave the first up. A root that acknowledges none of three
// reports is taken for failed if the detector does not watch it (it is
// not in the installed view); one the detector watches is handed to it
// ([core.PeerHint], again every three reports) and taken for failed only
// on its verdict, and the reports to it go less and less often (twice
// the wait per report, up to 8 ReportRetry): when the old root dies,
// every member reports to the next one at once, which an overloaded
// host starves; a count of unanswered reports cannot tell that from a
// crash (testdata/busy-new-root.txt), and the detector declares a
// crashed root within its bound. A root that hears
// from a member (a message of any layer) after a report of its failure,
// known from reports alone, or whose detector found it alive (a withdrawn
// suspicion, a recovery) within 3·ReportRetry before such a report, gives
// up the view change that excludes it (so does a root whose own verdict
// is withdrawn, under the paper's policy) and, until it installs another
// view, acts on that member's failure only on its own detector's verdict:
// on an overloaded host a starved process resumes and refutes a few
// hundred milliseconds after a monitor declared it, while the view change
// is still running. Only a node of the installed view, which the detector
// watches, is so doubted (a member re-joining under a new incarnation
// too: the verdict on its id counts the new process failed as well): no
// verdict ever comes about anyone else, and a report of another joiner's
// failure is acted on at once (a live joiner asks again). Installing a view drops
// every proposal the node holds (accepted, adopted or remembered) that is not
// newer than it, or cannot descend from it and does not admit the node as
// a joiner (a merge into another lineage, which the late commit of an
// older view of the node's own does not undo): such a sibling never
// commits (it needs this node's ACK); kept, it could serve as the base of
// the node's own proposal once it became root, and fork the views.
//
// Joins (§3.7, Figure 3(c)). A joiner sends NEW_NODE (a recovered process
// NODE_ALIVE) to the first node of its list; a member that is not the root
// forwards it to its root (at most 8 hops). After JoinRetry without
// JOIN_DET_ACK the joiner asks the next node of its list. Every process has
// an incarnation (0 for initial members, random otherwise): a join from a new
// incarnation of a member proves the former crashed, even if no detector saw
// it (it may have been the root), and the view replaces it (-[x] +[x]).
//
// Exclusions (paper footnote 1). Messages from nodes outside the view are
// ignored, and answered by EXCLUDED (at most every NoticeInterval): a node
// that learns that a newer view does not contain it emits [Evicted] and asks
// to be admitted again (NODE_ALIVE) by that view's root; a later notice of
// the same view naming another root redirects the request once the root
// asked is known to have failed (a member took over). A runtime that never
// takes an excluded node back has its node tell the nodes a view excluded
// at once ([NotifyExcluded]), before it drops its connections to them;
// such a notice marked final evicts its receiver whatever the epochs.
//
// Partitions (§3.3). Under [PartitionPaper] each side reorganizes with its
// own root. When the partition heals, the nodes learn of each other (a
// detector's core.Recovered, EXCLUDED answers, and the root's probes of the
// nodes that left its view and of its node list, every ProbeInterval; a
// node that excluded nodes as root keeps probing them when another node
// becomes root, which may never have known them), and
// the side whose view has the lower epoch merges into the other: its root
// asks to be admitted with its whole side, its members for themselves,
// through the live member that told them. That root drops the joins it
// holds, which were often asked by the other side while its own view
// looked the newer one: the newer view's root leads the merge, and a
// joiner asks again. A merge whose requests go
// unanswered a few times is given up, and tried again at each probe for
// as long as the node holds the same view, every other time through a
// member of that view: its members may all be alive, reachable and in the
// newer view, so that nothing ever makes the node leave its view, and
// nobody tells it twice. The other tries ask the newer view's root even
// when the node holds it failed (a merge not retried gives every try to
// the member that told when it does): a node cut off from the rest of
// its view holds them all failed, that root among them, and the member
// of its view asked instead may be dead, or stuck outside with it. A
// merge so retried yields to a notice of any view newer than the node's
// own, of a lower epoch than the view it asks too:
// the members of the view it asks may all have died since, and sides
// that each learnt of such a view would otherwise never merge with each
// other. Under [PartitionMajority] a root
// installs a view only if the view keeps a strict majority of the members of
// the last installed view (and at least half of an adopted proposal); a
// root without it announces MINORITY to its side, every node of which emits
// [Minority], and tries again every ReportRetry, forgiving the failures its
// own detector does not vouch for. The minority merges when the partition
// heals. The merge goes toward the primary history only: a member never
// joins (nor is evicted by) a proposal that cannot descend from the view it
// installed (its ancestry, MaxAncestry epochs long, excludes that view): it
// refuses it and tells the proposer about its view, into which the
// proposer then merges.
//
// Leaves. A node that finished leaves on [LeaveRequest]: it sends LEAVE
// to every member of the views it holds and takes no further part (it
// neither reports, acknowledges nor proposes; the runtime stops it once
// the message has left). A member that receives LEAVE records the leaver
// and treats it as its detector's verdict of failure, which nothing
// refutes (the leaver's last heartbeats do not); its reports name the
// leavers among the failed ([Report].Left), so a root learns of a leave
// from the first report even when the leaver's own LEAVE to it is still
// on its way. The root's proposal lists the failed members it knows to be
// leavers ([Prepare].Left, carried with the view, and on from an adopted
// dead root's proposal), and every member that installs the view from it
// reports them in [ViewInstalled].Left; a member that accepts the proposal
// records its leavers then, as if their LEAVE had come (emitting
// [Leaving]), so that its detector, whose verdict would otherwise come
// from the leaver's silence, learns of the leave even when the leaver's
// LEAVE to this member is still on its way or was lost with the last
// frames of a process that exited. The proposal decides: a leaver
// whose LEAVE reached no live member before the root proposed its
// exclusion (it crashed first, or a running view change already excluded
// it as failed) is failed, at every member alike. A leaving root is a dead
// root to the others (ROOT_FAILURE, §3.6), and the next one's proposal
// says that it left. The leaver does not wait for the view without it: when
// every member leaves at once there is nobody to install one.
//
// # Messages
//
// Append-only kinds of [core.ProtoMember] (see kinds.go); 1–14 are the
// paper's, the rest are this implementation's additions:
//
//	 1 NODE_FAILURE           [Report]       detector → root
//	 2 FAILURE_DET_ACK        [ReportAck]    root → detector
//	 3 FAILED_NODE            [Prepare]      down the new tree
//	 4 FAILURE_ACK            [Ack]          up the new tree
//	 5 ROOT_FAILURE           [Report]       detector → next live node
//	 6 ROOT_DEAD              [Prepare]      new root's tree
//	 7 ROOT_AND_NODE_FAILURE  [Prepare]      new root's tree
//	 8 NEW_NODE               [JoinRequest]  joiner → root
//	 9 NEW_NODE_JOIN          [Prepare]
//	10 NEW_NODE_JOIN_ACK      [Ack]
//	11 JOIN_DET_ACK           [JoinDetAck]   root → joiner
//	12 NODE_ALIVE             [JoinRequest]  recovered / excluded node → root
//	13 ALIVE_NODE_JOIN        [Prepare]
//	14 ALIVE_NODE_JOIN_ACK    [Ack]
//	15 VIEW_COMMIT            [Commit]       second phase, down the tree
//	16 VIEW_NACK              [Nack]         member → proposer
//	17 VIEW_NEED              [NeedView]     child → parent
//	18 VIEW_QUERY             [Query]        holder → proposer or its members
//	19 VIEW_SYNC              [Sync]         answer: installed view, abort (a joiner: abort alone)
//	20 EXCLUDED               [Notice]       member → outsider
//	21 MINORITY               [MinorityNotice] root → its side
//	22 REFRESH                [Prepare]      down the tree: no change, a new epoch ([Refresh])
//	23 REFRESH_ACK            [Ack]
//	24 LEAVE                  [Leave]        leaver → members
//
// Every decoder rejects malformed input with an error wrapping a wire
// sentinel (never a panic) and is fuzzed (FuzzPrepare … FuzzMinority, seed
// corpus in testdata/fuzz); the fuzz targets also feed what decodes to
// running members.
//
// # Safety properties and how they are checked
//
// The simulation swarm (package membertest, run by swarm_test.go and
// fdswarm_test.go and by `cohort sim swarm --protocol member`) checks on
// every event: self inclusion (a node installs only views containing it); one
// member set per epoch across all nodes (agreement); epochs only grow at
// each node, across restarts; no message delivered twice or without a send
// (each delivery is matched against the sender's queue); only nodes that
// announced a leave are reported as leavers, and every node that reports
// a departure from a view reports it alike, as a leave or not (the swarm
// with leaves, [membertest.SwarmLeaves], makes members leave). Under
// PartitionMajority they also check that the installed views form a single
// history (ordered by epoch, each descends from the previous one). After
// the faults, a liveness phase heals everything and demands that every live
// node installs the same view, which contains exactly the live nodes (so
// excludes every crashed one), within 3 s of simulated time (40 s over the
// gossip detector); under PartitionMajority, live nodes that hold no
// majority of the newest view any of them installed (or less than half of
// a dead root's uncommitted proposal one of them holds, or two such
// proposals that conflict) must instead stay put. The scripts in testdata
// (replayed by TestScripts) walk through each case of §3.2–3.7, Figure 3
// and footnote 1 and compare the exact messages exchanged.
//
// The swarm draws, per seed, 3–16 nodes, a fan-out of 2, 4 or 8, a uniform
// latency, and up to 8 faults: crashes of random nodes, of the root, of
// chained roots, of several nodes at once, crashes during a stabilization,
// recoveries (NODE_ALIVE, with the epoch floor), joins, partitions, cut
// links and delay spikes. The default run tries 1,000 seeds per partition
// policy; a failure prints the seed and the command that replays it. To run
// 100,000 seeds (each under both policies), in parallel:
//
//	cohort sim swarm --protocol member --seeds 100000
//
// (it prints every failing seed with its replay command; or, under go test,
// -swarm.seeds=N -swarm.keepgoing, -seedbase=N for another set, -seed=N to
// replay one).
//
// # Limits
//
// Under PartitionMajority, when a root dies during a stabilization, its
// successor needs at least half of the members of the dead root's proposal
// besides the strict majority of the installed view; if most of that
// proposal's members died too, the survivors stay in a minority although
// they hold a majority of the installed view (the proposal may have
// committed among the dead, and nothing tells them otherwise). Likewise,
// two conflicting proposals of dead roots, each acknowledged by every live
// member it has, block the survivors (the blocking case of two-phase
// commit: only the dead know which, if any, committed).
// TestMajorityBlocksOnDeadRootProposal shows both sides of the line: every
// live member of the proposal acknowledged it (blocked, for good: restarted
// processes are new incarnations that remember nothing), or one did not
// (it promises never to, the proposal is dropped, the survivors go on). No
// timeout lifts the block: going on could fork the history. The paper's
// policy never blocks. Under PartitionMajority a view change also does not
// send its proposal again to a silent child before it reports it (see
// onAckTimeout), so a member whose messages are lost or slower than
// AckTimeout is excluded there: with the retry, one swarm seed in 100,000
// left a member holding a newer view whose next root never learned of it,
// while that root stayed in a minority of its older view. Also under
// PartitionMajority, a member measures majorities against its own
// installed view, so it must learn of newer ones: a root asks a reporter
// that holds a view newer than anything it has (VIEW_QUERY), and a member
// asked about a proposal it acknowledged answers with its installed view,
// which the asker installs if it is newer. A root that takes over a dead
// root's proposal A keeps a strict majority of its own installed view, at
// least half of A, and, when it never installed A's base B, a strict
// majority of B too (counted from A's change, when A's root installed B).
// When B is itself a dead root's proposal, or A was learnt from a refusal
// without its change, B cannot be counted and is not: a chain of adopted
// proposals whose links all may have committed is guarded by its last
// link, the root's installed view, each member that installed a view
// of the chain and holds nothing newer (it refuses a proposal that keeps
// no majority of that view; the swarm found a fork where none did), and
// each member that acknowledged a dead root's link beneath the proposal it
// holds (it refuses a replacement of that proposal that abandons the
// link).
//
// Further rules of the same kind, each called for by a swarm run:
//
//   - A member asks a reporter whose epoch lies in its held proposal's
//     ancestry above its installed view (VIEW_QUERY), and asks an outsider
//     whose report names such an ancestor too, and installs the view it is
//     told of: a partition may have hidden that view's commit from it, and
//     majorities counted in the view before would be wrong.
//   - A detector's verdict on a member that the held proposal lists under a
//     newer incarnation than the installed view counts that incarnation
//     failed too (a restarted, re-joined root that died again).
//   - A node drops the pending joins of nodes that the view it installs
//     admits under another incarnation (a newer process asks again).
//   - A failure drops only a pending join of the incarnation that failed:
//     a root that took back a restarted member's former self, which the
//     new process never acknowledges, keeps the new process's join.
//   - A join under a new incarnation marks the former one failed in every
//     view the node holds, the installed one too (a root that adopts a
//     proposal that dropped the member would take it back), and neither
//     the detector's core.Recovered, nor a message from the id, nor the
//     abort of a proposal that admitted the new process withdraws it: all
//     three are about the new process, while the held views still list
//     the former one.
//   - A detector's verdict on a member of the installed view fails the
//     join its id asked for under another incarnation too: the detector
//     watches the id, and the former process was known dead when the new
//     one asked (a restarted member that crashed again never
//     acknowledges the proposals that admit it).
//   - Under PartitionMajority, a root whose proposal is refused for a dead
//     root's proposal P on the root's installed view V that excludes it
//     joins P's lineage, the way Paxos adopts a value that may have been
//     chosen: P's next live root proposes on P with it as a joiner. The root
//     also sends the refuser V, against which that lineage's root counts the
//     majority of its proposal. P may have committed among the dead, and a
//     view that V's majority installed without descending from P would fork
//     from it.
//   - Under PartitionMajority, a root refused by a joiner for such a P sends
//     it its installed view with an abort of P, and such a view vouches for
//     an abort as a member's promise does: the installed views form one
//     history, so a view installed above P that descends from P's base and
//     not from P proves that P never committed.
//   - A node that accepts a dead root's proposal of which it is the next
//     root records its adoption before the acceptance, so that proposing on
//     it at once does not lose the adoption.
//
// The swarm campaigns, and the seeds that called for each rule, are in
// docs/VALIDATION.md; the seeds are replayed by TestSwarmRegressionSeeds.
//
// Without JoinOptions.EpochFloor, under PartitionPaper, a recovered
// process that becomes root on the other side of a partition that is still
// open could reuse an epoch of its former self.
package member
