// The waits of a member: how long each lasts, and what happens when it ends.

package member

import (
	"time"

	"github.com/cohort-mp/cohort/core"
)

// timers are a member's waits, by kind. A kind is armed (wait's armed,
// due, epoch) apart from the Env timer that wakes it (id, at): disarming
// leaves the Env timer pending, and arming again for a deadline no
// earlier than the pending one's leaves that one to fire, which then sets
// the Env timer again for what is left (see arm, Fire). Every view change
// arms and disarms the ACK and commit waits of every member, which so
// cost no Env call and no allocation while view changes come faster than
// the waits (seconds): the price is one wake-up that finds nothing to do,
// after a wait has passed. A wait's state is one struct, so that arming
// it touches one line of memory, not six.
type timers struct {
	waits [nTimers]wait
	// spareTimers are timer values that fired, for arm to reuse: a timer
	// boxed in a core.Timer would otherwise cost an allocation per arm
	// (the probe's every ProbeInterval). The Env keeps no reference to a
	// timer it fired; a cancelled one it may keep, so only fired ones
	// come back here, and a cancelled one keeps its stale gen for good.
	spareTimers []*timer
}

type timerKind uint8

const (
	tAck      timerKind = iota // waiting for the children's ACKs
	tCommit                    // waiting for the commit of an accepted proposal
	tReport                    // waiting for FAILURE_DET_ACK
	tJoin                      // waiting to be admitted
	tProbe                     // the root's probe period
	tMinority                  // a root in a minority tries again
	nTimers
)

// timer is the value a Member hands to Env.SetTimer, by pointer (see
// Member.spareTimers). A timer whose gen is not the current one of its
// kind was superseded and is ignored.
type timer struct {
	kind timerKind
	gen  uint32
}

// wait is the state of one of a member's waits (see Member.waits).
type wait struct {
	armed bool          // the wait runs
	gen   uint32        // the generation of the Env timer set last
	due   time.Duration // when the armed wait ends
	epoch uint64        // what it is about
	id    core.TimerID  // the Env timer pending, 0: none
	at    time.Duration // when that timer fires
}

// Fire implements core.Machine.
func (m *Member) Fire(t core.Timer) {
	tp, ok := t.(*timer)
	if !ok {
		return
	}
	tm := *tp
	m.spareTimers = append(m.spareTimers, tp)
	if tm.kind >= nTimers || tm.gen != m.waits[tm.kind].gen || m.leaving {
		return
	}
	k := tm.kind
	w := &m.waits[k]
	w.id = 0
	if !w.armed {
		return // disarmed since the Env timer was set
	}
	if m.now() < w.due {
		m.setTimer(k, w.due) // armed again, for later
		return
	}
	w.armed = false
	epoch := w.epoch
	switch k {
	case tAck:
		m.onAckTimeout(epoch)
	case tCommit:
		if m.accepted != nil && m.accepted.epoch == epoch && !m.driving {
			m.suspectSilentRoot()
			if m.accepted == nil || m.accepted.epoch != epoch || m.driving {
				return
			}
			m.queryOutcome()
			m.arm(tCommit, m.commitWait(m.accepted), epoch)
		}
	case tReport:
		m.onReportTimeout()
	case tJoin:
		if m.cur != nil && m.mergeEpoch != 0 && m.mergeTries >= maxMergeTries {
			// The view to merge into does not answer (its members may all
			// have failed since): stay in this view; a newer notice or
			// probe starts another merge, and so does the next probe
			// while this view stays (retryMerge).
			m.gaveUpIn, m.gaveUpEpoch, m.gaveUpRoot = m.cur.epoch, m.mergeEpoch, m.mergeRoot
			m.stopMerging()
			return
		}
		if m.joining || m.mergeEpoch != 0 {
			m.sendJoin()
		}
	case tProbe:
		m.probe()
		m.retryMerge()
		if m.cur != nil && !m.driving && m.rootOf(m.newest()) == m.self {
			m.rootStep() // anything left undone (a step cut short earlier)
		}
		m.arm(tProbe, m.cfg.ProbeInterval, 0)
	case tMinority:
		m.retryMinority()
	}
}

// arm arms timer kind k to fire after the duration, for epoch, replacing
// its previous arming.
func (m *Member) arm(k timerKind, after time.Duration, epoch uint64) {
	now := m.now()
	at := now + max(after, 0)
	w := &m.waits[k]
	w.armed, w.due, w.epoch = true, at, epoch
	if w.id != 0 && w.at <= at {
		return // the pending Env timer comes first; Fire sets it again
	}
	m.setTimerAt(k, at, now)
}

// setTimer sets the Env timer of kind k for the deadline at, in place of
// the pending one.
func (m *Member) setTimer(k timerKind, at time.Duration) { m.setTimerAt(k, at, m.now()) }

// setTimerAt is setTimer when the time is now.
func (m *Member) setTimerAt(k timerKind, at, now time.Duration) {
	w := &m.waits[k]
	if w.id != 0 {
		m.env.CancelTimer(w.id)
	}
	w.gen++
	var tp *timer
	if n := len(m.spareTimers); n > 0 {
		tp = m.spareTimers[n-1]
		m.spareTimers = m.spareTimers[:n-1]
	} else {
		tp = new(timer)
	}
	*tp = timer{kind: k, gen: w.gen}
	w.id, w.at = m.env.SetTimer(at-now, tp), at
}

// cancel disarms timer kind k. Its Env timer, if pending, stays: it
// wakes the node for nothing, or for the next arming (see arm).
func (t *timers) cancel(k timerKind) { t.waits[k].armed = false }

// ackWait is how long a node waits for the ACKs of its subtree in v, once.
// It waits ackWaits times before it reports a silent child (once under
// PartitionMajority; see onAckTimeout), so a node l levels above the
// leaves gives up after 3l·AckTimeout, 3·AckTimeout after its children
// gave up on theirs.
func (m *Member) ackWait(v *view) time.Duration {
	return time.Duration(max(1, v.levelsBelowAt(m.ownPos(v)))) * m.cfg.AckTimeout
}

// ackWaits is how many ACK waits pass before a node reports a silent
// child: 3, the first and, after the proposal goes again, two more (see
// onAckTimeout); 1 under PartitionMajority.
func (m *Member) ackWaits() int {
	if m.cfg.Partition == PartitionMajority {
		return 1
	}
	return 1 + ackRetryWaits
}

// ackRetryWaits is the length of the wait after the first, in ACK waits:
// the repeated ACK of a child whose first ACK was lost leaves only when
// the repeated proposal arrives, and then crosses the child's link, which
// may be the slow one, so it comes about one wait after the first wait's
// end (a leaf whose messages take 200 ms answers at 400 ms a proposal sent
// again at 200 ms). Two waits leave it that margin.
const ackRetryWaits = 2

// ackResends is how many times the proposal goes again to a silent child
// during the retry waits: at the first wait's end and then every half
// wait. One repeat is not enough: over a link losing 5% of its messages,
// the proposal and its one repeat are both lost about once in 400 view
// changes of such a link, and the live child is reported (a group
// simulation of 128 stacks, TestSlowLossyMemberNotExcluded, seed
// 1194237355). Each repeat goes only to children still silent, which are
// in most cases crashed ones that the failure detector declares first.
const ackResends = 2 * ackRetryWaits

// ackHandedTimeouts is how long, in AckTimeouts, a parent of leaves
// waits for a silent child that the failure detector watches once the
// retry waits are over, before it cuts it without a verdict (see
// onAckTimeout): 40, 2 s with the default AckTimeout. That is as long as
// the stalls of live processes measured on 2 cores running 128 processes
// (up to 2.35 s, docs/PERFORMANCE.md), while a crashed child is declared
// by the detector long before. It also bounds the wait for a child that
// the detector holds alive but that never answers: one that refused the
// proposal to its root and says nothing to its parent, as the members of
// competing roots' proposals do; waited for 100 waits at every level,
// three roots competing under a load average of 140 had not settled a
// minute later.
const ackHandedTimeouts = 40

// ackHandedLevelTimeouts is how much longer, in AckTimeouts, each level
// above the parents of leaves waits for a silent child (see
// ackHandedWaits). An inner child withholds its ACK while it waits out
// its own silent children, a wait it starts when the proposal reaches it
// and ends with a report that must then come back up: a parent whose
// hand-over ended as the child's did cut that live child, and its subtree
// with it, whenever the proposal's way down and the report's way up took
// longer than the few AckTimeouts by which the retry waits of the levels
// differ. On 2 cores running 128 processes a hop took seconds; the root
// cut its four live children, proposed anew without them, and cut the next
// four, again and again (testdata/late-inner-child.txt). 20, 1 s with the
// default AckTimeout (4 s with cohort's 200 ms), covers a stall on the
// way down and one on the way up.
const ackHandedLevelTimeouts = 20

// ackHandedWaits is the hand-over in this node's ACK waits in v (ackWait:
// one AckTimeout per level below it): ackHandedTimeouts, and
// ackHandedLevelTimeouts more for each level below it beyond the first,
// so that a parent outlasts its inner children's hand-over.
func (m *Member) ackHandedWaits(v *view) int {
	l := max(1, v.levelsBelowAt(m.ownPos(v)))
	return max(1, (ackHandedTimeouts+(l-1)*ackHandedLevelTimeouts)/l)
}

// commitWait is how long a node that acknowledged v waits for its commit.
func (m *Member) commitWait(v *view) time.Duration {
	return m.cfg.CommitTimeout + time.Duration(m.ackWaits()*v.tree.Height())*m.cfg.AckTimeout
}
