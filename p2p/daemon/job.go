package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/launch"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/p2p/stage"
)

// job is a reservation of this daemon, and once launched its processes.
type job struct {
	d         *Daemon
	token     string
	submitter string
	name      string

	mu    sync.Mutex
	dir   stage.Dir
	procs []*proc // nil until launched
	why   string  // set when stopped: the reason, told on the stream
	stopC chan struct{}
	ended chan struct{} // closed when the job is stopped, launched or not
	once  sync.Once

	// uid is the job's own (0: the daemon's); cg its cgroup (nil: none);
	// cpus its cores (nil: the daemon's). All are set at launch.
	uid  int
	cg   *jobCgroup
	cpus []int
	// leftovers counts the processes the stop killed after every rank
	// had ended (detached ones, say).
	leftovers int
	// run is what starting one more process of the launched job takes
	// (spawn.go); set at launch.
	run *running
}

// running is a launched job's means to start its processes and report
// their events: the launch's program and environment, the stream's
// channel, and the reporters of the processes' exits.
type running struct {
	path   string
	lr     LaunchRequest
	slots  int // the reservation's processes: at most this many run at once
	events chan Event
	// exits counts the exit reporters, and the stream itself while it
	// runs: events is closed once it is zero, so a process may be added
	// only while the stream runs (drained false).
	exits   sync.WaitGroup
	drained bool // every process ended or the stream ended: no more processes
	spawned int  // processes started after the launch
}

// proc is one rank's process.
type proc struct {
	rank int
	cmd  *exec.Cmd
	done chan struct{}
	exit string // set when done
}

func (j *job) launched() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.procs != nil
}

func (j *job) info() []ProcInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []ProcInfo
	for _, p := range j.procs {
		pi := ProcInfo{Rank: p.rank}
		if p.cmd.Process != nil {
			pi.PID = p.cmd.Process.Pid
		}
		select {
		case <-p.done:
			pi.Exit = p.exit
		default:
			pi.Running = true
		}
		out = append(out, pi)
	}
	return out
}

// stop ends the job: told why on its stream (if launched), its processes
// stopped (SIGTERM, then SIGKILL after the grace period), whatever else
// runs in its cgroup or under its uid killed, its token, uid, directory
// and entry dropped. Idempotent.
func (j *job) stop(why string) {
	j.once.Do(func() {
		j.mu.Lock()
		j.why = why
		procs, cg := j.procs, j.cg
		if j.stopC != nil {
			close(j.stopC)
		}
		close(j.ended)
		j.mu.Unlock()
		for _, p := range procs {
			signalGroup(p, syscall.SIGTERM)
		}
		deadline := time.After(grace)
		for _, p := range procs {
			select {
			case <-p.done:
			case <-deadline:
				j.killAll()
				<-p.done
			}
		}
		// The ranks have ended; what they left running (a process in a
		// session of its own, say) has not. A job confined whose first
		// process could not start has a cgroup and no rank: it is
		// removed all the same.
		if len(procs) > 0 || cg != nil {
			j.leftovers = j.killAll()
		}
		j.d.conf.releaseUID(j.uid)
		j.d.conf.cores.release(j.cpus)
		j.d.forget(j)
		if len(procs) > 0 {
			j.d.log.Info("daemon: job stopped", "job", j.name, "reason", why)
		}
	})
}

// killAll kills every process of the job: its cgroup's, or without one its
// uid's, or without either its ranks' process groups (what left them
// escapes). It returns how many it killed (not counting the groups').
func (j *job) killAll() int {
	j.mu.Lock()
	procs, cg, uid := j.procs, j.cg, j.uid
	j.mu.Unlock()
	switch {
	case cg != nil:
		n, err := cg.kill()
		if err != nil {
			j.d.log.Error("daemon: a job outlived its kill", "job", j.name, "err", err)
		}
		return n
	case uid > 0:
		return killUID(uid)
	}
	for _, p := range procs {
		signalGroup(p, syscall.SIGKILL)
	}
	return 0
}

func signalGroup(p *proc, sig syscall.Signal) {
	if p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// checkLaunch validates a launch request against the job.
func (j *job) checkLaunch(lr *LaunchRequest, procs int) (string, error) {
	if len(lr.Ranks) < 1 || len(lr.Ranks) > procs {
		return "", fmt.Errorf("%d processes asked, the reservation holds %d", len(lr.Ranks), procs)
	}
	seen := map[int]bool{}
	for _, r := range lr.Ranks {
		if r.Rank < 0 || seen[r.Rank] {
			return "", fmt.Errorf("rank %d is negative or given twice", r.Rank)
		}
		seen[r.Rank] = true
		if err := checkEnv(r.Env); err != nil {
			return "", err
		}
	}
	if err := checkEnv(lr.Env); err != nil {
		return "", err
	}
	full, err := j.dir.Clean(lr.Program)
	if err != nil {
		return "", err
	}
	st, err := os.Lstat(full)
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("program %q was not staged", lr.Program)
	}
	return full, nil
}

func checkEnv(env []string) error {
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("environment entry %q is not NAME=value", kv)
		}
	}
	return nil
}

// baseEnv is what every rank inherits from the daemon's environment.
func baseEnv(dir string) []string {
	env := []string{"HOME=" + dir, "TMPDIR=" + dir}
	for _, k := range []string{"PATH", "LANG", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// launch starts the job's processes and streams their events until all
// have ended, the submitter goes away, or the job is stopped.
func (d *Daemon) launch(w http.ResponseWriter, r *http.Request, name string) {
	j, err := d.lookup(r.PathValue("token"), name)
	if err != nil {
		d.refuse(w, r, http.StatusNotFound, "launch", err)
		return
	}
	var lr LaunchRequest
	if err := decode(r, &lr); err != nil {
		d.refuse(w, r, http.StatusBadRequest, "launch", err)
		return
	}
	tok, err := d.gate.Confirm(name, j.token)
	if err != nil {
		d.refuse(w, r, http.StatusNotFound, "launch", err)
		return
	}
	j.mu.Lock()
	if j.procs != nil || j.why != "" {
		j.mu.Unlock()
		d.refuse(w, r, http.StatusConflict, "launch", errors.New("the job is already launched or stopped"))
		return
	}
	path, err := j.checkLaunch(&lr, tok.Procs)
	if err != nil {
		j.mu.Unlock()
		d.refuse(w, r, http.StatusBadRequest, "launch", err)
		return
	}
	if err := j.confine(tok.Procs); err != nil {
		j.mu.Unlock()
		d.refuse(w, r, http.StatusInternalServerError, "launch", err)
		return
	}
	j.stopC = make(chan struct{})
	j.procs = []*proc{}
	j.run = &running{path: path, lr: lr, slots: tok.Procs, events: make(chan Event, 256)}
	events := j.run.events
	j.run.exits.Add(1) // the stream's own hold, released when it ends
	var startErr error
	for _, rk := range lr.Ranks {
		if startErr = j.startProc(rk); startErr != nil {
			break
		}
	}
	procs := j.procs
	j.mu.Unlock()
	go func() { j.run.exits.Wait(); close(events) }()
	if startErr != nil {
		j.endStream()
		go drain(events)
		d.refuse(w, r, http.StatusInternalServerError, "launch", startErr)
		j.stop("a process could not start")
		return
	}
	d.m.launches.Add(1)
	d.log.Info("daemon: launched", "submitter", name, "job", j.name, "procs", len(procs))

	rc := http.NewResponseController(w)
	// The stream lasts as long as the job: the read timeout of ordinary
	// requests does not apply (a submitter gone is noticed by the
	// stream's write timeout, its keep-alives failing).
	rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(ev Event) bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := enc.Encode(ev); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	exited := 0
	ok := send(Event{Alive: true})
	for ok && !j.allExited(exited) {
		select {
		case ev := <-events:
			if ev.Exited {
				exited++
			}
			ok = send(ev)
		case <-tick.C:
			ok = send(Event{Alive: true})
		case <-r.Context().Done():
			ok = false
		case <-j.stopC:
			j.mu.Lock()
			why := j.why
			j.mu.Unlock()
			send(Event{Error: why})
			ok = false
		}
	}
	j.endStream()
	if !ok {
		// The submitter is gone (or the job was stopped): stop the
		// processes; their last events go nowhere.
		go drain(events)
		j.stop("the submitter went away")
		return
	}
	// The processes may all have ended because the job was being stopped
	// (their exits can win the race with the stop's notice): say so
	// rather than report a finished job.
	select {
	case <-j.stopC:
		j.mu.Lock()
		why := j.why
		j.mu.Unlock()
		send(Event{Error: why})
		j.stop(why)
		return
	default:
	}
	// Freed before Done is sent: a submitter that reads Done finds the
	// slot, token and directory gone. What outlived the ranks is killed,
	// and the submitter told.
	news := j.cg.limitNews()
	j.stop("finished")
	if j.leftovers > 0 {
		news = append(news, fmt.Sprintf("%d processes of the job outlived its ranks and were killed", j.leftovers))
	}
	for _, msg := range news {
		send(Event{Rank: procs[0].rank, Out: "cohort daemon " + d.cfg.Name + ": " + msg, Stderr: true})
	}
	send(Event{Done: true})
}

// confine gives the job of slots processes, about to launch, its uid (its
// directory and files then its own), its cgroup and its cores. j.mu is
// held.
func (j *job) confine(slots int) error {
	uid, err := j.d.conf.takeUID()
	if err != nil {
		return err
	}
	if uid > 0 {
		if err := chownTree(j.dir.Root, uid, uid); err != nil {
			j.d.conf.releaseUID(uid)
			return fmt.Errorf("giving the job's directory to its uid: %w", err)
		}
	}
	cg, err := j.d.conf.cg.newJob(filepath.Base(j.dir.Root))
	if err != nil {
		j.d.conf.releaseUID(uid)
		return err
	}
	j.uid, j.cg = uid, cg
	cpus, shared := j.d.conf.cores.take(slots)
	j.cpus = cpus
	if shared {
		j.d.log.Warn("daemon: the job shares cores with other jobs: it needs more than are free", "job", j.name, "slots", slots, "cores", formatCPUs(cpus))
	} else if cpus != nil {
		j.d.log.Info("daemon: the job's cores", "job", j.name, "slots", slots, "cores", formatCPUs(cpus))
	}
	return nil
}

// spec is what the launcher of rank rk is told.
func (j *job) spec(path string, lr *LaunchRequest, rk *LaunchRank) launchSpec {
	s := launchSpec{
		Path:    path,
		Argv:    append([]string{path}, lr.Args...),
		Env:     append(append(baseEnv(j.dir.Root), lr.Env...), rk.Env...),
		Dir:     j.dir.Root,
		Cgroups: j.cg.procsFiles(),
		UID:     j.uid,
		GID:     j.uid,
		FSize:   j.d.conf.fsize,
		CPUs:    j.cpus,
	}
	if j.uid > 0 {
		s.NProc = j.d.conf.nproc
	}
	// The daemon's word holds whatever the submitter said.
	if j.cpus != nil {
		s.Env = setEnv(s.Env, EnvCPUs, formatCPUs(j.cpus))
	}
	if j.d.cfg.DialOutOnly {
		s.Env = setEnv(s.Env, launch.EnvDialOutOnly, "1")
	}
	return s
}

// setEnv sets key to val in env, dropping what env said of it before: a
// program's getenv (Go's, the C library's) reads the first entry of a
// key, so a later one alone would not hold.
func setEnv(env []string, key, val string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
	return append(env, key+"="+val)
}

// drain discards the events nobody will read, until the last process's.
func drain(events <-chan Event) {
	for range events {
	}
}

// pump sends each line of a rank's stream as an event.
func pump(rank int, rd io.Reader, stderr bool, events chan<- Event, wg *sync.WaitGroup) {
	defer wg.Done()
	br := bufio.NewReaderSize(rd, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			s := strings.TrimSuffix(string(line), "\n")
			if len(s) > maxLine {
				s = s[:maxLine]
			}
			events <- Event{Rank: rank, Out: s, Stderr: stderr}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return
		}
	}
}
