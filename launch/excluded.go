// A process that the membership excluded from the job while it lived (its
// peers' detectors declared it failed while it was only stopped, starved
// or cut off) learns it from the others' EXCLUDED answers once it runs
// again, and ends (package comm: ErrEvicted). When it runs again after
// every other process has ended, nobody is left to answer: it finds the
// notices they sent as they excluded it (package comm) if they had a
// connection to it, or else takes them all for failed and runs on alone
// for as long as its program lasts. The processes that end their session
// tell the launcher which processes their views excluded, and the
// launcher stops an excluded process that still runs once every process
// not excluded has ended: the job is over without it. A job on peer daemons (package p2p/submit) does the same
// with [Rendezvous.ExcludedBy] and [Rendezvous.ExclusionNews]: the
// submitter holds the rendezvous, and asks the daemon that runs an
// excluded process to stop it.

package launch

import (
	"fmt"
	"slices"
	"syscall"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// excludedMsg lists the processes that the views of the sender excluded
// from the job (failed, not left), in increasing order.
type excludedMsg struct{ Procs []int }

func (excludedMsg) Kind() core.Kind { return kindExcluded }
func (m excludedMsg) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(len(m.Procs)))
	for _, p := range m.Procs {
		e.Uvarint(uint64(p))
	}
}

// maxProcs bounds a process number in an exclusion report: every process
// of the largest job, its spares included, and every newcomer.
const maxProcs = MaxSize + MaxNewcomers

func decodeExcluded(p []byte) (excludedMsg, error) {
	d := wire.NewDecoder(p)
	n := d.Uvarint()
	if d.Err() == nil && n > maxProcs {
		return excludedMsg{}, fmt.Errorf("%d processes reported excluded, at most %d", n, maxProcs)
	}
	var m excludedMsg
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		p := d.Uvarint()
		if d.Err() == nil && p >= maxProcs {
			return excludedMsg{}, fmt.Errorf("process %d reported excluded, at most %d", p, maxProcs-1)
		}
		m.Procs = append(m.Procs, int(p))
	}
	return m, d.Finish()
}

// ReportExcluded tells the launcher which processes the membership's views
// excluded from the job, as this process saw them (failed, not those that
// left): a process that ends its session in good order calls it just
// before [Registration.Close]. The launcher stops an excluded process that
// still runs once every process it did not hear was excluded has ended
// (see [Exit.Excluded]); only the reports of processes that then exit with
// code 0 count. Under SLURM (no launcher of ours) it does nothing.
func (r *Registration) ReportExcluded(procs []int) error {
	if len(procs) == 0 {
		return nil
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.fw == nil {
		return nil
	}
	return send(r.fw, r.self, LauncherNode, excludedMsg{Procs: procs})
}

// exclusions is the launcher's record of the ranks' reports; guarded by
// the rendezvous's mu.
type exclusions struct {
	by   map[int][]int // reporting process → the processes it reported excluded
	news chan struct{} // signalled (never blocking) when a report arrives
}

// reported records a report of process from.
func (r *Rendezvous) reported(from int, payload []byte) {
	m, err := decodeExcluded(payload)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.excl.by[from] = m.Procs
	r.mu.Unlock()
	select {
	case r.excl.news <- struct{}{}:
	default:
	}
}

// ExcludedBy returns the processes that the processes for which counts
// returns true reported excluded from the job ([Registration.ReportExcluded]),
// in increasing order: a launcher of its own (package p2p/submit, whose
// processes run on peer daemons) stops those still running once every
// other process has ended, as [Job] does. counts is called with the
// rendezvous's lock held and must not call back into it.
func (r *Rendezvous) ExcludedBy(counts func(proc int) bool) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for from, procs := range r.excl.by {
		if counts(from) {
			out = append(out, procs...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ExclusionNews is signalled (it holds at most one signal) when a process
// reports what it saw excluded; a launcher then asks [Rendezvous.ExcludedBy]
// again. It has one reader: a [Job] reads its rendezvous's, so this is for
// a rendezvous made with [NewRendezvous].
func (r *Rendezvous) ExclusionNews() <-chan struct{} { return r.excl.news }

// excludedNow returns the processes reported excluded by a process that
// has exited with code 0 (succeeded, by process number).
func (j *Job) excludedNow(succeeded map[int]bool) []int {
	return j.rz.ExcludedBy(func(p int) bool { return succeeded[p] })
}

// stopExcluded stops (SIGTERM; the grace period's SIGKILL follows) the
// processes still running that were reported excluded, once every other
// process has ended; it reports whether it stopped any.
func (j *Job) stopExcluded(succeeded map[int]bool) bool {
	excluded := j.excludedNow(succeeded)
	if len(excluded) == 0 {
		return false
	}
	j.mu.Lock()
	var stop []*rankProc
	for _, p := range j.procs {
		if !p.running || p.stopped {
			continue
		}
		if !slices.Contains(excluded, p.rank) {
			j.mu.Unlock()
			return false // a process of the job still runs
		}
		stop = append(stop, p)
	}
	for _, p := range stop {
		p.stopped, p.excluded = true, true
		signalGroup(p.cmd.Process, syscall.SIGTERM)
	}
	j.mu.Unlock()
	for _, p := range stop {
		who := fmt.Sprintf("rank %d", p.rank)
		if j.cfg.Spares > 0 || p.rank >= j.cfg.N {
			who = fmt.Sprintf("process %d", p.rank)
		}
		j.notice("stopping %s: the others excluded it from the job (they took it for failed) and have all ended", who)
	}
	return len(stop) > 0
}

// markExcluded sets Excluded in the exits (by process number) of the
// processes reported excluded by a process that exited with code 0.
func (j *Job) markExcluded(exits []Exit, succeeded map[int]bool) {
	for _, p := range j.excludedNow(succeeded) {
		if p < len(exits) {
			exits[p].Excluded = true
		}
	}
}

// howExcluded is Exit.How for an excluded process.
func (e Exit) howExcluded() string {
	const excluded = "excluded from the job by the others"
	switch {
	case e.Stopped && e.Signal != 0:
		return excluded + ", stopped by the launcher once they had ended (" + signalName(e.Signal) + ")"
	case e.Signal != 0:
		return excluded + ", then killed by " + signalName(e.Signal)
	case e.Stopped:
		return fmt.Sprintf("%s, exit code %d after the launcher's SIGTERM", excluded, e.Code)
	default:
		return fmt.Sprintf("%s, exit code %d", excluded, e.Code)
	}
}
