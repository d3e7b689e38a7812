package fd

import (
	"errors"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

// ErrNoBound reports that no detection bound exists for the arguments: the
// Random schedule (it has none, P2P-MPI §5.1), fewer than two members, or a
// latency and phase spread that break the synchronous-rounds assumption
// (S) of the derivation in the package documentation.
var ErrNoBound = errors.New("fd: no detection bound")

// PropagationRounds returns P, the number of rounds within which the last
// heartbeat of a node that crashes reaches every other node under a
// deterministic schedule over n nodes, when rounds are aligned and every
// message arrives before its receiver's next round (assumption (S) of the
// package documentation).
//
// The crashed node j sends its last heartbeat once, in some round r0; from
// then on only the other nodes forward it, each sending its whole table to
// its target of every later round. P is the worst case over r0 and over the
// receiver, counting j's own send as round 1. It is computed by running that
// flood for every r0 (the schedules are circulant, so j = 0 loses no
// generality): O(C·P·n) steps for a cycle of C rounds, which is about 10⁶
// for BRR or DBRR at n = 4096 but O(n²·P) for RR.
//
// Because the source is dead, P can exceed the paper's T_cleanup^min
// (which assumes the source keeps sending): for BRR P is ⌈log2 n⌉+1 or
// ⌈log2 n⌉+2, for DBRR the same (below its cycle of 2⌈log2 n⌉ rounds,
// because DBRR mixes clockwise and counter-clockwise hops), for RR about
// 1.5·T_cleanup^min.
func PropagationRounds(s topo.Schedule, n int) (int, error) {
	if !s.Deterministic() {
		return 0, fmt.Errorf("%w: schedule %v has no deterministic propagation", ErrNoBound, s)
	}
	if n < 2 || n > topo.MaxNodes {
		return 0, fmt.Errorf("%w: n = %d (want at least 2 nodes)", ErrNoBound, n)
	}
	c := s.CycleLength(n)
	have := make([]bool, n)
	holders := make([]int32, 0, n)
	worst := 0
	for r0 := 1; r0 <= c; r0++ {
		clear(have)
		first, err := s.Target(0, r0, n)
		if err != nil {
			return 0, err
		}
		have[first] = true
		holders = append(holders[:0], int32(first))
		rounds, r := 1, r0
		for len(holders) < n-1 {
			if rounds > 4*c+4 {
				// Not reached: one failure never disconnects RR, BRR or DBRR.
				return 0, fmt.Errorf("%w: %v over %d nodes does not reach everyone from round %d", ErrNoBound, s, n, r0)
			}
			r = r%c + 1
			rounds++
			for _, h := range holders { // the holders before this round only
				t, err := s.Target(int(h), r, n)
				if err != nil {
					return 0, err
				}
				if t != 0 && !have[t] {
					have[t] = true
					holders = append(holders, int32(t))
				}
			}
		}
		worst = max(worst, rounds)
	}
	return worst, nil
}

// DetectionBound returns the interval [lo, hi] in which every live node
// declares a crashed node failed (emits core.Failed), measured from the
// crash, for the configuration cfg over n members and a one-way message
// latency of at most latency. It assumes the phase spread of the nodes'
// rounds is as large as assumption (S) allows (latency + spread < T_gossip);
// [DetectionBoundSpread] takes a known spread. The derivation is in the
// package documentation:
//
//	lo = c·T_gossip − L − Φ + T_verdict
//	hi = (c+1)·T_gossip + Φ + T_verdict
//
// with c = cfg.CleanupRounds(n), L = latency, Φ = T_gossip − L (the
// supremum; the bound is then not attained), T_verdict =
// cfg.VerdictTime(): T_consensus, or the indirect probe's ProbeTimeout if
// that is longer (the probe runs during the consensus phase). It is the bound of nodes whose timers run on time
// and whose suspicions were never disproved; with lateness awareness
// (cfg.LocalHealthMax = H > 0) a node that ran late, was proved wrong or
// remembers a stall waits longer, up to [LoadedDetectionBound]. It
// requires c ≥ P = PropagationRounds(cfg.Schedule,
// n) (every node holds the crashed node's last heartbeat before it can
// expire) and returns ErrNoBound otherwise.
func DetectionBound(cfg GossipConfig, n int, latency time.Duration) (lo, hi time.Duration, err error) {
	return detectionBound(cfg, n, latency, cfg.GossipInterval-latency, false)
}

// DetectionBoundSpread is DetectionBound for a known phase spread Φ: the
// nodes' rounds start within Φ of each other (nodes started together within
// Φ, for example). It requires latency + spread < T_gossip.
func DetectionBoundSpread(cfg GossipConfig, n int, latency, spread time.Duration) (lo, hi time.Duration, err error) {
	return detectionBound(cfg, n, latency, spread, true)
}

func detectionBound(cfg GossipConfig, n int, latency, spread time.Duration, strict bool) (lo, hi time.Duration, err error) {
	if err := cfg.Validate(); err != nil {
		return 0, 0, err
	}
	tg := cfg.GossipInterval
	if latency < 0 || spread < 0 || latency >= tg || (strict && latency+spread >= tg) {
		return 0, 0, fmt.Errorf("%w: latency %v + phase spread %v must be below T_gossip %v", ErrNoBound, latency, spread, tg)
	}
	p, err := PropagationRounds(cfg.Schedule, n)
	if err != nil {
		return 0, 0, err
	}
	c := cfg.CleanupRounds(n)
	if c < p {
		return 0, 0, fmt.Errorf("%w: T_cleanup of %d rounds is shorter than the %d rounds a heartbeat needs to reach everyone under %v over %d nodes",
			ErrNoBound, c, p, cfg.Schedule, n)
	}
	ct := time.Duration(c)
	lo = ct*tg - latency - spread + cfg.VerdictTime()
	hi = (ct+1)*tg + spread + cfg.VerdictTime()
	return lo, hi, nil
}

// StallCap returns the longest stall the detector remembers over n
// members (see [GossipStallStats]): (1 + H)·(CleanupTime(n) +
// ConsensusTime()), the longest silence its capped timeouts allow without
// the stall memory; 0 when LocalHealthMax = H is 0.
func (c GossipConfig) StallCap(n int) time.Duration {
	if c.LocalHealthMax == 0 {
		return 0
	}
	return time.Duration(1+c.LocalHealthMax) * (c.CleanupTime(n) + c.ConsensusTime())
}

// LoadedDetectionBound returns the latest time after a crash at which a
// live node declares the crashed node failed when every widening of its
// waits is at its limit (see "Stall memory and isolation" in the package
// documentation):
// local health score and adaptive margin at their caps, a remembered
// stall M = min(stall, cfg.StallCap(n)), and, if alone, an input gap (all
// the members that send to it crashed or stalled at once: it took the
// gap for its own isolation once, or held its verdicts as long as the
// gap). With c = cfg.CleanupRounds(n), H = cfg.LocalHealthMax, T =
// T_gossip, s = ⌈2M/T⌉ and Φ → T − L as in DetectionBound:
//
//	hi = ((1 + H)·c + s + 1)·T + Φ + max((1 + H)·T_consensus, ProbeTimeout) + 2M
//	   + 2·((1 + H)·c + s + 1)·T      when alone
//
// A node whose loop stalled in that window adds the time from the crash
// to the end of its last stall (its judgement restarts then). With H = 0
// it is DetectionBound's hi. The conditions and errors are
// DetectionBound's.
func LoadedDetectionBound(cfg GossipConfig, n int, latency, stall time.Duration, alone bool) (time.Duration, error) {
	_, hi, err := DetectionBound(cfg, n, latency)
	if err != nil || cfg.LocalHealthMax == 0 {
		return hi, err
	}
	h := time.Duration(1 + cfg.LocalHealthMax)
	t := cfg.GossipInterval
	m := min(max(stall, 0), cfg.StallCap(n))
	s := (2*m + t - 1) / t
	wait := (h*time.Duration(cfg.CleanupRounds(n)) + s + 1) * t
	hi = wait + (t - latency) + max(h*cfg.ConsensusTime(), cfg.probeTimeout()) + 2*m
	if alone {
		hi += 2 * wait
	}
	return hi, nil
}
