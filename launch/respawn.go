package launch

import (
	"fmt"
	"syscall"
	"time"
)

// Restarts (Config.Respawn). A process that dies by a signal (a crash,
// a kill) after the job's start is started again on this machine as a
// newcomer: a new process with the
// next free number from N+Spares on (a failed number is never used
// again: package comm's rule that a failure is forever), which registers
// late at the rendezvous (rejoin.go: every member learns its address
// before it does anything), asks the membership to admit it, and waits as
// a spare until the program adds it (package resil, at the end of the
// attempt that follows). Its output is prefixed with its own number.
//
// Bounds: a process of the start is started again at most Respawn times,
// counting the deaths of its restarts, so a process that keeps dying
// does not loop; the job has at most MaxNewcomers restarts in all. No
// restart once the job is stopping, nor once a process exited with
// status 0 (the program's run is over: a restart would have nothing to
// do). A restart that fails to start (the program is gone, fork fails)
// is reported and the job goes on with the spares it has.
//
// A restart that the job never needed may still wait to be added when
// every process of the start has ended (it joined after the run's last
// agreement, or was still joining): idleNewcomerWait later the launcher
// stops it, and its exit, marked Idle, does not fail the job.

// idleNewcomerWait is how long restarts may run on after every process of
// the job's start has ended, before they are stopped as idle. A restart
// that holds a rank ends with the others (the run's last agreement ends
// every rank's run): the wait covers a loaded machine's delays. A
// variable for the tests.
var idleNewcomerWait = 10 * time.Second

// spawner is what starting one of the job's processes takes.
type spawner struct {
	path       string
	env        []string  // the launcher's environment without bootstrap variables
	boot       Bootstrap // the job's bootstrap, without Rank
	logicalN   int
	outs, errs []*dedup // by logical rank, for replicas
}

// respawns is what the job restarted; guarded by Job.mu.
type respawns struct {
	started  int         // newcomers started
	of       map[int]int // process of the start → times started again
	finished bool        // a process exited with status 0: no more restarts
}

// notice hands a line to Config.Notices.
func (j *Job) notice(format string, args ...any) {
	if j.cfg.Notices != nil {
		j.outMu.Lock() // between the ranks' lines, never inside one
		defer j.outMu.Unlock()
		j.cfg.Notices(fmt.Sprintf(format, args...))
	}
}

// respawnAfter starts again, if Config.Respawn allows, the process whose
// exit is x; it reports whether a process was started.
func (j *Job) respawnAfter(x Exit) bool {
	if j.cfg.Respawn <= 0 {
		return false
	}
	j.mu.Lock()
	if x.OK() {
		j.re.finished = true
	}
	if x.Signal == 0 || x.Stopped || j.stopping || j.re.finished || j.rzAt.IsZero() || j.ended {
		j.mu.Unlock()
		return false
	}
	who := fmt.Sprintf("process %d", x.Rank)
	if x.Of != x.Rank {
		who = fmt.Sprintf("process %d (process %d started again)", x.Rank, x.Of)
	}
	if n := j.re.of[x.Of]; n >= j.cfg.Respawn {
		j.mu.Unlock()
		j.notice("%s ended (%s); not starting it again: process %d was started again %d time(s), the limit", who, x.How(), x.Of, n)
		return false
	}
	if j.re.started >= MaxNewcomers {
		j.mu.Unlock()
		j.notice("%s ended (%s); not starting it again: the job had %d restarts, the most it can", who, x.How(), MaxNewcomers)
		return false
	}
	rank := j.cfg.N + j.re.started
	j.mu.Unlock()
	err := j.rz.Expect(rank)
	var p *rankProc
	if err == nil {
		if p, err = j.startProc(rank, x.Of); err != nil {
			j.rz.forget(rank)
		}
	}
	if err != nil {
		j.notice("%s ended (%s); starting it again as process %d failed: %v; the job goes on with the spares it has", who, x.How(), rank, err)
		return false
	}
	j.mu.Lock()
	if j.re.of == nil {
		j.re.of = map[int]int{}
	}
	j.re.of[x.Of]++
	j.re.started++
	j.procs = append(j.procs, p)
	j.mu.Unlock()
	j.notice("%s ended (%s); started it again as process %d, which joins the job as a spare", who, x.How(), rank)
	return true
}

// stopIdle stops the restarts still running once every process of the
// start has ended (SIGTERM; the grace period's SIGKILL follows); it
// reports whether it stopped any.
func (j *Job) stopIdle() bool {
	j.mu.Lock()
	var stopped []*rankProc
	for _, p := range j.procs[j.cfg.N:] {
		if p.running {
			p.stopped, p.idle = true, true
			signalGroup(p.cmd.Process, syscall.SIGTERM)
			stopped = append(stopped, p)
		}
	}
	j.mu.Unlock()
	for _, p := range stopped {
		j.notice("stopping process %d (process %d started again): every process of the job's start has ended, and the job never needed it", p.rank, p.of)
	}
	return len(stopped) > 0
}

// Restarts returns how many processes the job started again
// (Config.Respawn) so far.
func (j *Job) Restarts() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.re.started
}

// respawnable checks Config.Respawn.
func (cfg Config) respawnable() error {
	switch {
	case cfg.Respawn < 0:
		return fmt.Errorf("%w: %d restarts per process, want 0 or more", ErrConfig, cfg.Respawn)
	case cfg.Respawn > 0 && cfg.Spares < 1:
		return fmt.Errorf("%w: restarts without spares: a process started again joins as a spare, and only a program that takes spares can use it", ErrConfig)
	}
	return nil
}
