package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"

	"github.com/cohort-mp/cohort/launch"
	"golang.org/x/sys/unix"
)

// One more process of a running job (POST /v1/jobs/TOKEN/spawn, a
// LaunchRank): the submitter of a job with restarts (cohort run --hosts
// --respawn) asks for a process started again where one died, as a
// newcomer of the job. It runs the launch's program with the launch's
// arguments and environment, its own variables after them, confined as
// the launch's processes are (the job's uid, cgroup and rlimits); its
// output and exit go on the job's launch stream, and it ends with the job.
//
// Refused: a token this caller does not hold (unknown, or another
// submitter's: the two are not told apart), a job not launched, a job
// that ended or is stopping (its stream gone, every process ended), a
// process number the job already has, more processes running at once
// than the reservation holds, and more than launch.MaxNewcomers
// processes started this way. The daemon remembers the last
// endedJobsKept jobs that ended, so that a late request for one is told
// the job ended rather than that its token is unknown.

// endedJobsKept bounds how many ended jobs the daemon remembers.
const endedJobsKept = 64

// endedJob is a job that ended, remembered for a late spawn request.
type endedJob struct {
	token, submitter, why string
}

// rememberLocked notes that j ended (why); the oldest note goes past
// endedJobsKept. d.mu is held.
func (d *Daemon) rememberLocked(j *job, why string) {
	d.ended = append(d.ended, endedJob{token: j.token, submitter: j.submitter, why: why})
	if len(d.ended) > endedJobsKept {
		d.ended = d.ended[len(d.ended)-endedJobsKept:]
	}
}

// endedFor returns why the job of token, held by submitter, ended; "" if
// no such job is remembered.
func (d *Daemon) endedFor(token, submitter string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.ended {
		if e.token == token && e.submitter == submitter {
			return e.why
		}
	}
	return ""
}

// errJobEnded: a spawn request for a job that ended or is stopping.
var errJobEnded = errors.New("the job ended")

func (d *Daemon) spawn(w http.ResponseWriter, r *http.Request, name string) {
	token := r.PathValue("token")
	j, err := d.lookup(token, name)
	if err != nil {
		if why := d.endedFor(token, name); why != "" {
			d.refuse(w, r, http.StatusGone, "spawn", fmt.Errorf("%w (%s)", errJobEnded, why))
			return
		}
		d.refuse(w, r, http.StatusNotFound, "spawn", err)
		return
	}
	var rk LaunchRank
	if err := decode(r, &rk); err != nil {
		d.refuse(w, r, http.StatusBadRequest, "spawn", err)
		return
	}
	status, err := j.spawn(rk)
	if err != nil {
		d.refuse(w, r, status, "spawn", err)
		return
	}
	d.log.Info("daemon: started one more process", "submitter", name, "job", j.name, "rank", rk.Rank)
	writeJSON(w, struct{}{})
}

// spawn starts process rk of the launched job j; on a refusal it returns
// the HTTP status that says why.
func (j *job) spawn(rk LaunchRank) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	run := j.run
	switch {
	case j.why != "" || run != nil && run.drained:
		why := j.why
		if why == "" {
			why = "its processes have ended"
		}
		return http.StatusGone, fmt.Errorf("%w (%s)", errJobEnded, why)
	case run == nil:
		return http.StatusConflict, errors.New("the job is not launched: a process is added only to a running job")
	case rk.Rank < 0:
		return http.StatusBadRequest, fmt.Errorf("process %d: negative", rk.Rank)
	case run.spawned >= launch.MaxNewcomers:
		return http.StatusConflict, fmt.Errorf("the job started %d processes after its launch here, the most it may", run.spawned)
	}
	if err := checkEnv(rk.Env); err != nil {
		return http.StatusBadRequest, err
	}
	alive := 0
	for _, p := range j.procs {
		if p.rank == rk.Rank {
			return http.StatusConflict, fmt.Errorf("process %d is the job's already", rk.Rank)
		}
		select {
		case <-p.done:
		default:
			alive++
		}
	}
	if alive >= run.slots {
		return http.StatusConflict, fmt.Errorf("%d of the job's processes run here, the %d its reservation holds", alive, run.slots)
	}
	if err := j.startProc(rk); err != nil {
		return http.StatusInternalServerError, err
	}
	run.spawned++
	return 0, nil
}

// startProc starts process rk of the launched job, confined as every
// process of the job is, and the reporters of its output and exit on the
// job's stream. j.mu is held.
func (j *job) startProc(rk LaunchRank) error {
	d, run := j.d, j.run
	cmd, feed, err := d.conf.command(j.spec(run.path, &run.lr, &rk))
	if err != nil {
		return fmt.Errorf("rank %d: %w", rk.Rank, err)
	}
	p := &proc{rank: rk.Rank, cmd: cmd, done: make(chan struct{})}
	stdout, err1 := cmd.StdoutPipe()
	stderr, err2 := cmd.StderrPipe()
	if err := errors.Join(err1, err2); err != nil {
		feed(false)
		return err
	}
	if err := cmd.Start(); err != nil {
		feed(false)
		return fmt.Errorf("rank %d: %w", rk.Rank, err)
	}
	if err := feed(true); err != nil {
		// The launcher says why on the rank's standard error.
		d.log.Warn("daemon: launch specification not delivered", "job", j.name, "rank", rk.Rank, "err", err)
	}
	j.procs = append(j.procs, p)
	events := run.events
	var pumps sync.WaitGroup
	pumps.Add(2)
	go pump(p.rank, stdout, false, events, &pumps)
	go pump(p.rank, stderr, true, events, &pumps)
	run.exits.Add(1)
	go func() {
		defer run.exits.Done()
		pumps.Wait() // every line read before the exit is reported
		err := cmd.Wait()
		ev := Event{Rank: p.rank, Exited: true}
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			ev.Signal = signalName(st.Signal())
			p.exit = "killed by " + ev.Signal
		} else {
			ev.Code = cmd.ProcessState.ExitCode()
			p.exit = fmt.Sprintf("exit %d", ev.Code)
			if err != nil && ev.Code == 0 {
				ev.Code, p.exit = -1, err.Error()
			}
		}
		close(p.done)
		d.m.exited.Add(1)
		for _, msg := range j.cg.limitNews() {
			events <- Event{Rank: p.rank, Out: "cohort daemon " + d.cfg.Name + ": " + msg, Stderr: true}
		}
		events <- ev
	}()
	return nil
}

// allExited reports whether exited, the exits the stream sent, are every
// process's; if so no process may be added any more.
func (j *job) allExited(exited int) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if exited >= len(j.procs) {
		j.run.drained = true
		return true
	}
	return false
}

// endStream notes that the launch stream ended: no process may be added,
// and events closes once the last exit is reported.
func (j *job) endStream() {
	j.mu.Lock()
	j.run.drained = true
	j.mu.Unlock()
	j.run.exits.Done()
}

// signalName names sig as the submitter's messages show it (SIGKILL),
// or by its number when it has no name.
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}
