package member_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// The swarm itself (faults, checker, liveness judgement) is in package
// membertest, shared with `cohort sim swarm --protocol member`.

func swarm(t *testing.T, n int, policy member.PartitionPolicy) {
	swarmOf(t, n, policy, membertest.Swarm, membertest.ReplayCommand)
}

// swarmOf runs n seeds of a swarm (run) under policy; replay names the
// command that replays a failing seed.
func swarmOf(t *testing.T, n int, policy member.PartitionPolicy, run func(uint64, member.PartitionPolicy) membertest.Result, replay func(uint64, member.PartitionPolicy) string) {
	stuck, installs, lefts, failed := 0, 0, 0, 0
	for _, seed := range simtest.Seeds(t, n) {
		if os.Getenv("MEMBER_PROGRESS") != "" {
			fmt.Fprintln(os.Stderr, "seed", seed)
		}
		res := run(seed, policy)
		if err := res.Err; err != nil {
			if !*swarmKeepGoing {
				t.Fatalf("%v\nreplay: %s", err, replay(seed, policy))
			}
			failed++
			msg := err.Error()
			if i := strings.IndexByte(msg, '\n'); i > 0 {
				msg = msg[:i]
			}
			t.Error(msg)
		}
		installs += res.Installs
		lefts += res.Lefts
		if res.Stuck {
			stuck++
		}
	}
	t.Logf("%d seeds, %d views installed (%d leavers reported), %d runs legitimately stuck in a minority, %d failed", n, installs, lefts, stuck, failed)
}

// swarmSeeds is how many seeds each swarm test runs (per partition policy).
var swarmSeeds = flag.Int("swarm.seeds", 1000, "seeds per swarm test (see the package doc for the 100,000-seed run)")

// swarmKeepGoing reports every failing seed instead of stopping at the first.
var swarmKeepGoing = flag.Bool("swarm.keepgoing", false, "run every seed and report each failure (one line) instead of stopping at the first")

func TestSwarmPaper(t *testing.T)    { swarm(t, *swarmSeeds, member.PartitionPaper) }
func TestSwarmMajority(t *testing.T) { swarm(t, *swarmSeeds, member.PartitionMajority) }

// The swarm with graceful leaves racing its faults: every member reports a
// departure from a view alike, as a leave or a failure, only announced
// leaves are reported, and the survivors converge.
func TestSwarmLeavesPaper(t *testing.T) {
	swarmOf(t, *swarmSeeds, member.PartitionPaper, membertest.SwarmLeaves, membertest.ReplayLeavesCommand)
}
func TestSwarmLeavesMajority(t *testing.T) {
	swarmOf(t, *swarmSeeds, member.PartitionMajority, membertest.SwarmLeaves, membertest.ReplayLeavesCommand)
}

// Same seed, same run: the trace hash of a swarm run does not change.
func TestSwarmDeterministic(t *testing.T) {
	hash := func() uint64 {
		s := membertest.NewSwarmRun(12345, member.PartitionPaper)
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		return s.H.W.TraceHash()
	}
	if a, b := hash(), hash(); a != b {
		t.Fatalf("trace hashes differ: %x, %x", a, b)
	}
}

// TestSwarmRegressionSeeds replays seeds that a 100,000-seed run found
// failing, each fixed since (they fail without their fix):
//
//   - 8081, 68013 (majority): a dead root's proposal held by a live node,
//     whose root restarted (a new incarnation asking to join): the holder
//     asked only the restarted root what became of the proposal, never its
//     other members, so it never learnt that one of them never acknowledged
//     it; the two live roots refused each other's proposals for good.
//   - 33796 (majority, a safety violation): members of the primary view
//     30.n0 merged into a minority's lineage built on a dead root's proposal
//     that never committed (evicted by a pending proposal with a higher
//     epoch, then admitted as joiners), so 38.n8 was installed without
//     descending from 30.n0: two histories.
//   - 1371564406 (majority, stuck): n1 crashed, restarted and re-joined,
//     and crashed again 6 ms later, before its detectors heard of the new
//     process; the view that admitted the new incarnation voided the
//     member's verdict, but the detectors, seeing the same id in both views,
//     kept theirs and never declared n1 again (now core.MembersChanged
//     lists n1 in Renewed, and they watch it afresh).
//   - 1452204879 (paper): guards the choice of staleVerdicts. Dropping a
//     merging node's verdicts about the proposal that took it back, at
//     once, left n2, which had accepted a dead root's proposal, unaware of
//     that root's death: it never took over.
//   - 131142 (majority, stuck; a 400,000-seed run from seed 100,001): n5,
//     in a minority, proposed 17.n5 on n1's abandoned 16.n1, which had
//     admitted n4's restarted process, and died; n3 held 17.n5, and asked
//     its members what became of it, but n4, still joining, had no view
//     and answered nothing, so n3 never dropped it and refused n1's
//     proposals for ever. A joiner now answers for itself: a proposal it
//     never acknowledged, it promises never to (a VIEW_SYNC without a
//     view, naming its incarnation).
//   - 239171 (majority, stuck; the same run): n3 acknowledged n0's 3.n0,
//     then adopted from a refusal a proposal whose lineage held n0's later
//     4.n0 (so 3.n0 never committed) and moved on; asked about 3.n0 by n4,
//     which held it after n0 died, n3 said nothing, as a member whose ACK
//     may have committed it. Learning that a proposal was abandoned now
//     vetoes it, and the veto is what n3 answers.
//   - 113419, 326194, 416071, 426865 (majority, stuck; seeds 1–500,000):
//     a member that never learnt that a view was installed measured
//     majorities against its own, older view, and stayed in a minority
//     although a majority of the newer view lived. A root now asks a
//     reporter that holds a view newer than anything it has (VIEW_QUERY),
//     and a member asked about a proposal it acknowledged answers with its
//     installed view.
//   - 29180 (majority, a safety violation, found with those changes): a
//     restarted process that held a proposal admitting it accepted the next
//     one, which listed its id at its former incarnation; counted as that
//     member it made a majority, and the views forked. A node now accepts
//     a proposal only at its own incarnation.
//   - 18519 (majority, stuck, the same run): a member installed a view
//     whose root had built on the member's view without installing it
//     (adopted); the member the view dropped was told only of the root's
//     older view and stayed. Such a member now tells those left behind.
//   - 108951 (majority, a safety violation, the same run): a joiner took
//     over a join proposal on a three-member view whose members it thought
//     dead, and installed a view holding none of them while they went on.
//     A root that adopts a proposal whose base it never installed now
//     keeps a strict majority of that base too.
//   - 318884 (majority, stuck, the same run): n3 built on n1's dead 4.n1,
//     n2 on the installed view; each refused the other's proposals for
//     good, n4 holding n2's. A root refused by a member of its adopted
//     proposal that holds a competing one now asks it about the adopted
//     one; n4 never acknowledged 4.n1, says so, and n3 lets it go.
//   - 279940 (majority, stuck, the same run): n2, excluded by 4.n0, built
//     on a proposal of 4.n0's lineage, gave it up and fell back to its own
//     1.n0; members of 4.n0 that held n2's earlier proposal accepted the
//     new one as its replacement, and n2 and they went round for good. A
//     member now refuses a replacement that cannot descend from its
//     installed view, as it refuses any other such proposal.
//   - 967016 (paper, stuck; seeds 500,001–1,000,000, also before the
//     changes above): n3, excluded by n7's 8.n7 = [n7 n9], merged towards
//     n7, which had restarted and then joined n3's own view; n3 gave the
//     merge up when it installed that view, and n9, a joiner of n7's side
//     on no list of n3's probes, stayed in 8.n7 for good. A node that
//     gives up a merge for a newer view of its own now tells the member
//     that told it of the other view.
//   - 1101496, 1203508 (majority, stuck; seeds 1,000,001–1,500,000): n2
//     aborted 6.n2 when 4.n1 committed, then answered n4's VIEW_NEED for
//     6.n2 from the last proposal it had sent; n4 accepted it, n2 died,
//     and n4 held and built on 6.n2 while n1's proposals on 4.n1 went
//     round it. A node now hands out only a proposal it holds or the view
//     it installed.
//   - 1207433, 1325516 (majority, stuck, the same run): n2 built on dead
//     n0's 5.n0, which excluded n1, and took n1 back; n1, root of the
//     installed 4.n0 and driving its own proposal on it, refused to be
//     listed as a joiner, and n2, holding 5.n0 (which may have committed),
//     refused n1's: for good. A member whose installed view is an
//     ancestor of a proposal that takes it back, and that holds nothing
//     that may have committed, now accepts it.
//   - 23793 (majority, stuck, found with that change in its first form):
//     n5 held dead n4's 3.n4 and accepted such a proposal, which did not
//     descend from 3.n4; hence "holds nothing that may have committed".
//     The same change moved 239171, whose fix it widened: a proposal a
//     node built on is vetoed too when the lineage of the one it accepts
//     holds a later proposal of the same root.
//   - 166388 (paper, stuck, found with that change): under PartitionPaper
//     two roots, each building on a dead root's proposal of its side of
//     a partition and listing the other side as joiners, took members
//     from each other for good once members accepted such proposals.
//     The change applies under PartitionMajority only.
//   - 1002924 (majority, converged 3.0 s after healing, just past the
//     bound; seeds 1,000,001–1,500,000 with those changes): members held
//     n3's proposal, which n3 had given up for n6's, until their commit
//     timeout, and refused n6's proposals meanwhile; n6 and n3 went round
//     for three seconds. A member that refuses a proposal taking it back
//     only because it holds another root's proposal now asks that root
//     at once (VIEW_QUERY).
//   - 1741812 (majority, a safety violation; seeds 1,500,001–2,000,000
//     with those changes): n4, root of the installed 5.n4 = [n4 n5 n6]
//     and driving its own proposal on it, accepted n1's 9.n1 =
//     [n1 n2 n3 n4], built on two uncommitted proposals of 5.n4's lineage
//     and taking n4 back, while n5 and n6 installed 9.n5 = [n5 n6]. A
//     chain of adopted proposals is guarded by its last link and its
//     root's installed view only; a member whose newest view is its
//     installed one now refuses a descendant that keeps no majority of
//     it.
//   - 1691255 (majority, stuck): n15 learned of 9.n1, which excluded it,
//     from 9.n1's root n2 and asked n2 to admit it; n2 died, and members
//     of 9.n1's lineage named its new root, n4, but the notices carried
//     the same epoch and were ignored. n15 gave up after its tries and
//     stayed in its old view, told by nobody again (n4 never had it in a
//     view). A notice naming another root of the view being merged into
//     now redirects the merge once the root asked is known to have failed
//     (in its first form, whatever the root asked, the merge followed a
//     member cut off from the live root that named itself, and went
//     astray: seed 1885079).
//   - 1380442 (majority, stuck): n5 took over dead n1's 10.n1, built on
//     5.n0, a view n5 had not installed; n7 refused n5's proposal with
//     5.n0, and n5 installed it and dropped 10.n1 with its own proposal.
//     n5 then accepted proposals that abandon 10.n1, which it had
//     acknowledged, and the other holders of 10.n1, short of a majority
//     of it, refused them for good. A root refused with a newer
//     installed view now keeps the proposal it built on if that descends
//     from the view.
//   - 1816437 (majority, stuck): n5 acknowledged dead n3's 7.n3, then
//     accepted proposals built on it, the last n0's 17.n0. n0 replaced
//     17.n0 by proposals on the installed view, which abandon 7.n3, and
//     n5 accepted them: n0 gave up its own proposal, not n3's. The other
//     holders of 7.n3, short of a majority of it, refused n0's for good.
//     A member now refuses a replacement that abandons a dead root's
//     proposal that it acknowledged, that the replaced one was built on
//     and that nobody gave up, and asks that proposal's members. (Its
//     first form, which guarded every proposal the member acknowledged,
//     left members that had merged into another lineage stuck: seeds
//     854, 2633, 3289, 3775, 7763, 10717 and 11319.)
//   - 3061610 (majority, stuck): n4, n6 and n8 never saw 2.n0 installed
//     (a partition hid it) and held dead n1's 6.n1, built on 2.n0. With
//     n0…n3 dead, n4 was root of 6.n1, whose live members were no
//     majority of it, and counted majorities in 1.n0, where it was one
//     short; n5 and n7 had installed 2.n0, of which a majority lived, and
//     reported to n4 with its epoch. A member now asks a reporter whose
//     epoch its held proposal builds on and it never saw installed.
//   - 3743248, 3867740 (paper, stuck): the last live node held a join
//     proposal whose root had restarted and joined again, then died; its
//     detector's verdict was counted against the root's former
//     incarnation (the installed view's) only, so the proposal's root
//     stayed alive for it and it waited for it for good. A verdict on a
//     member that the held proposal lists under a newer incarnation now
//     counts that one failed too. (The first form took the newer
//     incarnation in place of the installed view's, and a root whose
//     proposals were all given up lost the failure in its installed view:
//     seed 3474147281.)
//   - 5342883 (majority, stuck): a former root handed the root the join
//     request of a member's crashed former self, and the root took the
//     live process out. A node drops the pending joins of nodes that the
//     view it installs admits under another incarnation.
//   - 3476017, 6235739, 6296744 (majority, stuck): a live root installed
//     V behind a partition; two live members never saw V installed and
//     held a dead root's proposal on V that excludes that root, which may
//     have committed, and refused the root's proposals for good. A root
//     refused so joins the proposal's lineage, which takes it back, and
//     tells the refuser about V.
//   - 3498115 (majority, stuck): n7, root of dead n6's 13.n6, built on
//     11.n2, which a partition had kept it from seeing installed, counted
//     majorities in 9.n2, where it was in a minority; the one live node
//     that had installed 11.n2, n8, was excluded by 13.n6, and its reports
//     were ignored as an outsider's. A node now asks an outsider whose
//     report names an ancestor of its held proposal above its installed
//     view.
//   - 4228535 (majority, stuck): n13 held dead n0's 9.n0 on 4.n0 and
//     refused, for good, the proposals of n8's lineage, which had left
//     9.n0's branch at 4.n0 (n8 installed 10.n2, built on 4.n0 through
//     8.n1); 9.n0's other live members had acknowledged it, or had never
//     seen it and installed views of n8's lineage, and only told n13 it
//     was out. A root so refused by a
//     joiner now sends it its installed view with an abort of the held
//     proposal, and under PartitionMajority a view that left a
//     proposal's branch vouches that it never committed.
//   - 3124975 (majority, stuck): n5 accepted dead n0's 21.n0, of which it
//     was the next root, and proposed on it at once, from within the
//     acceptance; the acceptance then overwrote the adoption that the
//     proposal had set, so n5 yielded to a proposal that abandons 21.n0,
//     and 21.n0's other holders waited for its lineage for good.
//   - 5107, 26460 and 21917 (paper, no convergence): a root that had
//     adopted a dead root's proposal took back a member of its installed
//     view that the proposal dropped, under the incarnation that view
//     holds, while that member restarted and asked to join again; the
//     restarted process never acknowledged its former self's admission,
//     the report of that failure dropped the new incarnation's join too,
//     and the next proposal took the former self back again. A failure
//     now drops only a join of the incarnation that failed.
//   - 3468 (paper, no convergence): n4's proposal admitted the members
//     of a dead root's view; n2, an inner child of it that held that view,
//     refused it (VIEW_NACK to n4, its parent and the proposal's root)
//     and was waited for as an inner child whose silence may be its
//     subtree's, while the dead root's view kept evicting n4. An inner
//     child that refuses to its parent is cut for speaking, as a leaf is.
//   - 6268 (paper, no convergence; seeds 1–30,000): n3's 15.n3 told
//     every other side of a healed partition that it was over, n3 died,
//     and each side's merge into 15.n3, given up and retried at every
//     probe, ignored the others' notices (14.n0, 14.n2, 13.n7), all of a
//     lower epoch than 15.n3, for good. A retried merge now yields to a
//     notice of any view newer than the node's own.
//   - 3248234849 (majority, no convergence): n0, root of the installed
//     1.n0, proposed 2.n0 without crashed n5 and died; n0 and n5
//     restarted. n2, which held 2.n0 and took it over, heard from its
//     detector that both had recovered, and took n5 back at the installed
//     view's incarnation, which its new process never acknowledged; a
//     message from that process then set aside each report of the
//     failure (doubt), and a proposal admitting n0's new process, once
//     aborted, left n0's former self alive again and n2 handing joins
//     and reports to it as root. A join under a new incarnation now
//     marks the former one failed in every view the node holds, and no
//     verdict, message or aborted proposal withdraws that.
//   - 3248248488 (majority, no convergence; seeds 3,248,220,000–
//     3,248,249,999): n2, root of 7.n2, crashed, restarted, asked to
//     join and crashed again. n3, the next root, held the new process's
//     join; the detector's verdict on n2 counted only the installed
//     view's incarnation, and the join, never dropped (the id was a
//     member), went into every proposal, which the dead process never
//     acknowledged. A verdict on a member now fails the pending join of
//     its other incarnation too.
//   - 132869 (paper, no convergence; seeds 100,001–160,000): after a
//     partition of 11 and 6 healed, n1's side asked n0 to admit it, then
//     installed 15.n1, above n0's 15.n0, and n0 merged into it in turn;
//     but n0 kept its join requests and went on proposing to admit n1's
//     side, whose members took its proposals and refused n1's to admit
//     n0's side, 1,400 epochs in 3 s. A root that merges into a newer
//     view now drops the joins it holds: that view's root leads.
func TestSwarmRegressionSeeds(t *testing.T) {
	for _, c := range []struct {
		seed   uint64
		policy member.PartitionPolicy
	}{
		{8081, member.PartitionMajority},
		{68013, member.PartitionMajority},
		{33796, member.PartitionMajority},
		{1371564406, member.PartitionMajority},
		{1452204879, member.PartitionPaper},
		{131142, member.PartitionMajority},
		{239171, member.PartitionMajority},
		{113419, member.PartitionMajority},
		{326194, member.PartitionMajority},
		{416071, member.PartitionMajority},
		{426865, member.PartitionMajority},
		{29180, member.PartitionMajority},
		{18519, member.PartitionMajority},
		{108951, member.PartitionMajority},
		{318884, member.PartitionMajority},
		{279940, member.PartitionMajority},
		{967016, member.PartitionPaper},
		{1101496, member.PartitionMajority},
		{1203508, member.PartitionMajority},
		{1207433, member.PartitionMajority},
		{1325516, member.PartitionMajority},
		{23793, member.PartitionMajority},
		{166388, member.PartitionPaper},
		{1002924, member.PartitionMajority},
		{1741812, member.PartitionMajority},
		{1691255, member.PartitionMajority},
		{1380442, member.PartitionMajority},
		{1816437, member.PartitionMajority},
		{854, member.PartitionMajority},
		{2633, member.PartitionMajority},
		{3289, member.PartitionMajority},
		{3775, member.PartitionMajority},
		{7763, member.PartitionMajority},
		{10717, member.PartitionMajority},
		{11319, member.PartitionMajority},
		{1885079, member.PartitionMajority},
		{3061610, member.PartitionMajority},
		{3743248, member.PartitionPaper},
		{3867740, member.PartitionPaper},
		{3474147281, member.PartitionMajority},
		{5342883, member.PartitionMajority},
		{3476017, member.PartitionMajority},
		{6235739, member.PartitionMajority},
		{6296744, member.PartitionMajority},
		{3498115, member.PartitionMajority},
		{4228535, member.PartitionMajority},
		{3124975, member.PartitionMajority},
		{5107, member.PartitionPaper},
		{26460, member.PartitionPaper},
		{21917, member.PartitionPaper},
		{3468, member.PartitionPaper},
		{6268, member.PartitionPaper},
		{3248234849, member.PartitionMajority},
		{3248248488, member.PartitionMajority},
		{132869, member.PartitionPaper},
	} {
		if res := membertest.Swarm(c.seed, c.policy); res.Err != nil {
			t.Errorf("%v\nreplay: %s", res.Err, membertest.ReplayCommand(c.seed, c.policy))
		}
	}
}
