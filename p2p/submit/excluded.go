package submit

import (
	"context"
	"fmt"
	"time"
)

// Excluded processes, as package launch stops them on one machine: a
// process that the others' views excluded from the job (their detectors
// took it for failed while it was stopped, starved or cut off) learns it
// from their answers once it runs again; when it runs again after they
// have all ended, nobody is left to tell it, and it would run on alone.
// The processes that end their session report to the rendezvous, which
// the submitter holds, which processes their views excluded
// (launch.Registration.ReportExcluded). Once every process still running
// was reported excluded by a process that exited with status 0, the
// submitter asks each one's daemon to stop it (daemon.Client.Stop:
// SIGTERM, then SIGKILL after the daemon's grace period); its exit then
// comes on its host's launch stream as any other, and fails the job. A
// process lost with its host counts as ended; a host's processes whose
// stream is down are not asked for.

// stopRequestTimeout bounds one stop request to a daemon.
const stopRequestTimeout = 10 * time.Second

// followExclusions looks again whenever a process reports what it saw
// excluded, until the launch streams close.
func (rs *restarter) followExclusions() {
	news := rs.rz.ExclusionNews()
	for {
		select {
		case <-rs.ctx.Done():
			return
		case <-news:
			rs.mu.Lock()
			rs.stopExcludedLocked()
			rs.mu.Unlock()
		}
	}
}

// stopExcludedLocked asks the daemons to stop the processes still
// running that were reported excluded, once every other process has
// ended. rs.mu is held.
func (rs *restarter) stopExcludedLocked() {
	if rs.ctx.Err() != nil || rs.over {
		return
	}
	succeeded := map[int]bool{}
	var running []int
	for p, x := range *rs.exits {
		switch {
		case x.OK():
			succeeded[p] = true
		case !x.Lost || x.Host == "" || x.Idle || x.Stopped:
			// Ended, never started, or being stopped already.
		case rs.host(x.Host) != nil && rs.host(x.Host).up:
			running = append(running, p)
		}
	}
	if len(running) == 0 || len(succeeded) == 0 {
		return
	}
	excluded := map[int]bool{}
	for _, p := range rs.rz.ExcludedBy(func(p int) bool { return succeeded[p] }) {
		excluded[p] = true
	}
	for _, p := range running {
		if !excluded[p] {
			return // a process of the job still runs
		}
	}
	for _, p := range running {
		x := &(*rs.exits)[p]
		x.Excluded, x.Stopped = true, true
		h, who := rs.host(x.Host), rs.who(p)
		rs.cfg.Log("stopping %s on %s: the others excluded it from the job (they took it for failed) and have all ended", who, x.Host)
		rs.wg.Add(1)
		go func() {
			defer rs.wg.Done()
			ctx, cancel := context.WithTimeout(rs.ctx, stopRequestTimeout)
			defer cancel()
			if err := rs.clients[h.g.host.Name].Stop(ctx, h.g.token, p); err != nil && rs.ctx.Err() == nil {
				rs.cfg.Log("stopping %s on %s failed: %v", who, h.g.host.Name, err)
			}
		}()
	}
}

// markExcludedLocked sets Excluded in the exits of the processes that a
// process that exited with status 0 reported excluded: one that ended on
// its own, learning it from the others, fails the job all the same.
// rs.mu is held.
func (rs *restarter) markExcludedLocked() {
	exits := *rs.exits
	succeeded := func(p int) bool { return p < len(exits) && exits[p].OK() }
	for _, p := range rs.rz.ExcludedBy(succeeded) {
		if p < len(exits) && !exits[p].OK() {
			exits[p].Excluded = true
		}
	}
}

// who names process p in the submitter's lines: its rank, or its
// process number with spares and for a restart.
func (rs *restarter) who(p int) string {
	if rs.cfg.Spares > 0 || p >= rs.cfg.N {
		return fmt.Sprintf("process %d", p)
	}
	return fmt.Sprintf("rank %d", p)
}

// howExcluded is Exit.How for an excluded process.
func (e Exit) howExcluded() string {
	const excluded = "excluded from the job by the others"
	switch {
	case e.Stopped && e.Signal != "":
		return excluded + ", stopped by the launcher once they had ended (" + e.Signal + " on " + e.Host + ")"
	case e.Signal != "":
		return excluded + ", then killed by " + e.Signal + " on " + e.Host
	case e.Stopped:
		return fmt.Sprintf("%s, exit status %d on %s after the launcher's SIGTERM", excluded, e.Code, e.Host)
	case e.Err != "":
		return excluded + ", " + e.Err
	default:
		return fmt.Sprintf("%s, exit status %d on %s", excluded, e.Code, e.Host)
	}
}
