package model

import (
	"fmt"
	"math"
	"time"
)

// The checkpoint interval of coordinated checkpoint/restart: how often to
// checkpoint when a checkpoint costs C, a failure strikes the job every M
// on average (its mean time between failures) and a restart costs R
// (detection, takeover by a spare, state transfer). Young, "A first order
// approximation to the optimum checkpoint interval", CACM 17(9), 1974;
// Daly, "A higher order estimate of the optimum checkpoint interval for
// restart dumps", FGCS 22(3), 2006. Package resil is what these model;
// docs/PERFORMANCE.md has its measured C and R.

// YoungInterval is Young's optimum interval between checkpoints (the
// compute time between two), τ = √(2·C·M), for a checkpoint cost C and a
// mean time between failures M, both > 0.
func YoungInterval(cost, mtbf time.Duration) (time.Duration, error) {
	if cost <= 0 || mtbf <= 0 {
		return 0, fmt.Errorf("%w: checkpoint cost %v and MTBF %v must be positive", ErrParam, cost, mtbf)
	}
	return seconds(math.Sqrt(2 * cost.Seconds() * mtbf.Seconds()))
}

// DalyInterval is Daly's higher-order optimum (2006, Eq. 37):
// τ = √(2CM)·[1 + ⅓·√(C/2M) + ⅑·(C/2M)] − C when C < 2M, and τ = M
// otherwise. It is below Young's by about C when C ≪ M.
func DalyInterval(cost, mtbf time.Duration) (time.Duration, error) {
	if cost <= 0 || mtbf <= 0 {
		return 0, fmt.Errorf("%w: checkpoint cost %v and MTBF %v must be positive", ErrParam, cost, mtbf)
	}
	c, m := cost.Seconds(), mtbf.Seconds()
	if c >= 2*m {
		return mtbf, nil
	}
	x := c / (2 * m)
	return seconds(math.Sqrt(2*c*m)*(1+math.Sqrt(x)/3+x/9) - c)
}

// CheckpointWaste is the fraction of the job's time not spent on useful
// work with checkpoints every interval τ of compute, to first order
// (Young's model): C/(τ+C) for the checkpoints, plus, per failure (one
// every M), the restart R and on average half a segment (τ+C)/2 of lost
// work: (R + (τ+C)/2)/M. It is 1 at most (the job makes no progress).
func CheckpointWaste(interval, cost, restart, mtbf time.Duration) (float64, error) {
	if interval <= 0 || cost < 0 || restart < 0 || mtbf <= 0 {
		return 0, fmt.Errorf("%w: interval %v, checkpoint cost %v, restart %v, MTBF %v", ErrParam, interval, cost, restart, mtbf)
	}
	t, c, r, m := interval.Seconds(), cost.Seconds(), restart.Seconds(), mtbf.Seconds()
	return math.Min(1, c/(t+c)+(r+(t+c)/2)/m), nil
}

// seconds converts s seconds to a Duration, or ErrOverflow.
func seconds(s float64) (time.Duration, error) {
	if s > float64(math.MaxInt64)/1e9 || math.IsNaN(s) {
		return 0, ErrOverflow
	}
	return time.Duration(s * 1e9), nil
}

// CheckpointedTime is the expected time to solution of work (the
// failure-free time without checkpoints) with checkpoints every interval
// of compute, to first order: work / (1 − waste), the waste being
// [CheckpointWaste]'s. It fails with ErrOverflow when the waste is 1 (the
// job makes no progress) or the time does not fit a Duration.
func CheckpointedTime(work, interval, cost, restart, mtbf time.Duration) (time.Duration, error) {
	if work < 0 {
		return 0, fmt.Errorf("%w: work %v", ErrParam, work)
	}
	w, err := CheckpointWaste(interval, cost, restart, mtbf)
	if err != nil {
		return 0, err
	}
	if w >= 1 {
		return 0, fmt.Errorf("%w: with checkpoints every %v (cost %v, restart %v) and a failure every %v, the job makes no progress", ErrOverflow, interval, cost, restart, mtbf)
	}
	return seconds(work.Seconds() / (1 - w))
}

// ReplicatedTime is the expected time to solution of m's program with
// replication degree r when a failed run starts again from scratch (no
// checkpoints; a rank lost with all its replicas ends the run): the run
// lasts T = AmdahlDuration(p, r), fails with probability P =
// m.Failure(r), and the number of runs is geometric, so about T / (1 − P)
// (a failed run counted whole, an upper bound). It also returns T and P.
// It fails with ErrOverflow when P is 1.
func (m ReplicationModel) ReplicatedTime(r int) (expected, run time.Duration, fail float64, err error) {
	run, err = AmdahlDuration(m.Seq, m.Parallel, m.Processes, r, m.Overhead)
	if err != nil {
		return 0, 0, 0, err
	}
	if fail, err = m.Failure(r); err != nil {
		return 0, 0, 0, err
	}
	if fail >= 1 {
		return 0, run, fail, fmt.Errorf("%w: with %d replicas every run of %v fails", ErrOverflow, r, run)
	}
	expected, err = seconds(run.Seconds() / (1 - fail))
	return expected, run, fail, err
}
