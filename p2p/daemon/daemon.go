// Package daemon is the peer daemon of the peer-to-peer middleware
// (P2P-MPI §2–3: MPD, started by mpiboot; here `cohort boot`): it registers
// with the supernodes and keeps their merged peer list (cached when they
// are down, refreshed with back-off), measures its latency to the peers
// with application-level pings, and serves submitters over mutual TLS:
// reservations (at most J jobs and P processes per job, from allowed
// submitters: package p2p/reserve), staging of a job's files (package
// p2p/stage), and the launch of its processes, whose output and exits
// stream back to the submitter with a keep-alive every second.
//
// A job's processes live as long as its launch stream: when the submitter
// goes away (or cannot be reached: a write times out), the daemon kills
// them, removes the job's directory and frees its slots. On SIGTERM
// (Serve's context done) running jobs are told on their streams, their
// processes get SIGTERM, then SIGKILL after a grace period.
//
// A client's connection is bounded in time (Config's read_header_timeout,
// read_timeout, write_timeout, idle_timeout; a staged file's body may take
// as long as it needs while it keeps moving), and no job's lock is held
// while a client's bytes arrive: a slow or stalled client holds up only
// its own request, never ps, release, expiry or shutdown, and stopping
// the job cuts its upload short.
//
// # What is trusted, what is checked
//
// Every request must come with a certificate of the cluster's CA; its
// name is the caller. Any caller may ping the daemon and read its peer
// list. Reserving, staging and launching are for the submitters named in
// allowed, or for every certificate holder when allow_all = true is set
// (an empty list alone lets no one submit). A token, its files and its
// launch belong to the submitter that reserved it; job names are each
// submitter's own; ps shows a submitter its own jobs, and the daemon
// itself and its admins every job. Only they may halt it.
//
// What the daemon guarantees about its own doing: the work directory
// (work_dir) is the daemon user's own, not a link, 0700 (0711 with job
// uids); files are staged only beneath the job's directory, never through
// a link, never over another file; limits of size hold per file and per
// job.
//
// # How a job is confined
//
// A job's processes are started through a launcher, the daemon's own
// executable run again (marked by an environment variable, handled in
// this package's init, so any program importing the package can serve):
// told what to do on a pipe, it joins the job's cgroup, sets its rlimits
// (no core files; RLIMIT_FSIZE = max_job_mb; RLIMIT_NPROC = job_pids where
// there is no pids controller but a job uid), drops to the job's uid and
// gid with no supplementary groups, sets no_new_privs, and only then
// execs the job's program. No code of the job runs before it is confined.
//
// Each job has a cgroup, made under the daemon's own when the daemon
// starts and may write there (root, or a delegated cgroup):
//
//   - cgroup v2, when the unified hierarchy offers the pids controller:
//     pids.max = job_pids, and memory.max = job_memory_mb with
//     memory.swap.max = 0 when it offers memory too (on a hybrid host
//     whose memory controller is bound to v1, the v1 memory hierarchy's
//     memory.limit_in_bytes instead); stopping the job writes
//     cgroup.kill, so a process it detached (setsid, a double fork) dies
//     with it. Where the daemon's cgroup may not hand the controllers to
//     its children while it holds processes, a daemon alone in it moves
//     itself into a leaf "daemon" (a systemd service with
//     Delegate=yes); one sharing its cgroup does not use v2.
//   - cgroup v1 otherwise, with whichever of the freezer, memory and pids
//     hierarchies are mounted: memory.limit_in_bytes, pids.max; stopping
//     the job freezes it (no fork races the kill), SIGKILLs every process
//     in it, thaws it and waits until it is empty.
//
// The daemon's base cgroups are named cohort-daemon-PID-N; it removes its
// jobs' cgroups as they end and its own when it shuts down, and when it
// starts, kills what runs in the bases of daemons that are gone (killed
// without shutting down) and removes them.
//
// A fork refused at pids.max and a process killed at the memory limit are
// told to the submitter as a line of the rank's standard error (read from
// pids.events and memory.events or memory.oom_control), and so are the
// processes that outlived the ranks and were killed at the job's end.
//
// When the daemon runs as root, each running job has a uid of its own
// from job_uids (none of an account of /etc/passwd; its gid the same
// number); its directory and files are given to it at launch (0700), so a
// job cannot read the daemon's key or configuration, another job's
// directory or /proc/PID/environ, nor signal or trace another job's
// processes or the daemon. The work directory is then 0711: traversable,
// not listable, and every directory above it must be traversable by
// others; a job reaches its own directory by its name and no other. A uid
// is given to a job only when no process runs under it. job_uids = "none"
// runs jobs as root.
//
// Each running job gets a set of the daemon's cores, disjoint from the
// other jobs' while enough are free (cores.go): the launcher sets the
// job's affinity to it and names it in COHORT_CPUS, within which comm
// binds the ranks. It keeps jobs from stalling one another; it bounds
// nothing a job cannot change.
//
// What is not confined: a daemon that is not root runs its jobs as its
// own user, so a job may do whatever that user may (read the daemon's
// key, other jobs' files and environments, signal their processes); with
// no cgroup (none mounted, or none writable) a job's memory and processes
// are unbounded and, without a job uid either, a process it detaches
// outlives it. Files a job writes outside its directory (in /tmp) stay
// after it, readable by a later job given the same uid. A job's arguments
// are visible to every local user in /proc/PID/cmdline; its environment
// is not. The network is not confined. The daemon logs at start what is
// confined and what is not.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/reserve"
	"github.com/cohort-mp/cohort/p2p/stage"
	"github.com/cohort-mp/cohort/p2p/supernode"
	"golang.org/x/sys/unix"
)

const (
	// maxBody bounds a JSON request body.
	maxBody = 1 << 20
	// maxLine bounds a line of a rank's output sent on the stream (longer
	// lines are cut).
	maxLine = 64 << 10
	// keepAlive is the period of a launch stream's keep-alive events.
	keepAlive = time.Second
	// writeTimeout bounds a write on a launch stream: a submitter that
	// cannot be reached for that long is gone, and its job is stopped.
	writeTimeout = 10 * time.Second
	// grace is how long processes have between SIGTERM and SIGKILL.
	grace = 3 * time.Second
)

// Daemon is a running peer daemon.
type Daemon struct {
	cfg   Config
	creds *ca.Credentials
	log   *slog.Logger
	gate  *reserve.Gate
	m     *daemonMetrics
	// work is the open work directory, checked by openWorkDir: jobs'
	// directories are made and opened relative to it, so that a link
	// swapped in for its path later does not redirect them.
	work *os.File
	// conf confines the jobs: cgroups, uids.
	conf *confinement

	mu    sync.Mutex
	jobs  map[string]*job // by token
	ended []endedJob      // the last jobs that ended, oldest first
	peers []PeerInfo      // the cached list
	halt  chan struct{}   // closed by a halt request
	once  sync.Once
}

// New checks cfg and loads the credentials.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds, err := ca.Load(cfg.CA, cfg.Certs, cfg.Name)
	if err != nil {
		return nil, err
	}
	if err := watchRevocations(creds, cfg, log); err != nil {
		return nil, err
	}
	gate, err := reserve.New(reserve.Config{Jobs: cfg.Jobs, ProcsPerJob: cfg.ProcsPerJob, Allowed: cfg.Allowed, AllowAll: cfg.AllowAll, Hold: cfg.Hold.Duration}, nil)
	if err != nil {
		return nil, err
	}
	conf, err := newConfinement(cfg, log.With("daemon", cfg.Name))
	if err != nil {
		return nil, err
	}
	work, err := openWorkDir(cfg.WorkDir, conf.first > 0)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, creds: creds, log: log.With("daemon", cfg.Name), gate: gate, work: work, conf: conf,
		jobs: map[string]*job{}, halt: make(chan struct{})}
	d.m = newMetrics(d)
	return d, nil
}

// Serve runs the daemon until ctx is done or a halt request comes, then
// shuts down: running jobs are told and stopped. ready, if not nil,
// receives the address served on.
func (d *Daemon) Serve(ctx context.Context, ready func(addr string)) error {
	inner, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	ln := timeoutListener{inner}
	srv := &http.Server{
		Handler:           d.revocationGate(d.Handler()),
		TLSConfig:         d.creds.ServerConfig(nil),
		ReadHeaderTimeout: d.cfg.ReadHeaderTimeout.Duration,
		ReadTimeout:       d.cfg.ReadTimeout.Duration,
		WriteTimeout:      d.cfg.WriteTimeout.Duration,
		IdleTimeout:       d.cfg.IdleTimeout.Duration,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn), // refused handshakes, with their reason
	}
	advertise := d.cfg.Advertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if d.cfg.Metrics != "" {
		mln, err := net.Listen("tcp", d.cfg.Metrics)
		if err != nil {
			ln.Close()
			return fmt.Errorf("daemon: metrics: %w", err)
		}
		msrv := &http.Server{Handler: d.m.set.Handler(), ReadHeaderTimeout: d.cfg.ReadHeaderTimeout.Duration,
			ReadTimeout: d.cfg.ReadTimeout.Duration, WriteTimeout: d.cfg.WriteTimeout.Duration, IdleTimeout: d.cfg.IdleTimeout.Duration}
		go msrv.Serve(mln)
		defer msrv.Close()
	}
	wg.Add(2)
	go func() { defer wg.Done(); d.registerLoop(ctx, advertise) }()
	go func() { defer wg.Done(); d.pingLoop(ctx) }()
	var tl *tunnelListener
	if d.cfg.DialOutOnly {
		// Nobody can dial this host: callers come through the
		// supernodes, over connections this daemon opens.
		tl = newTunnelListener(ln.Addr())
		for _, s := range d.cfg.Supernodes {
			name, addr, _ := ParseSupernode(s) // checked by Validate
			sn := supernode.NewClient(d.creds, name, addr)
			defer sn.Close()
			wg.Add(1)
			go func() { defer wg.Done(); d.tunnelLoop(ctx, sn, tl) }()
		}
	}
	d.log.Info("daemon: serving", "addr", ln.Addr().String(), "advertise", advertise,
		"jobs", d.cfg.Jobs, "procs_per_job", d.cfg.ProcsPerJob, "dial_out_only", d.cfg.DialOutOnly)
	d.conf.setup()
	defer func() {
		if err := d.conf.cg.close(); err != nil {
			d.log.Warn("daemon: cgroups left behind", "err", err)
		}
	}()
	confined, not := d.conf.describe()
	d.log.Info("daemon: jobs confined by", "confined", confined)
	d.log.Warn("daemon: jobs not confined", "not_confined", not)
	if len(d.cfg.Allowed) == 0 && !d.cfg.AllowAll {
		d.log.Warn("daemon: no submitter is allowed: every reservation will be refused; list them in allowed, or set allow_all = true")
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	if tl != nil {
		go srv.ServeTLS(tl, "", "") // ends with the server, as the other does
	}
	select {
	case err := <-done:
		cancel()
		wg.Wait()
		d.stopAll("the daemon's server failed")
		return err
	case <-ctx.Done():
	case <-d.halt:
		d.log.Info("daemon: halt requested")
	}
	cancel()
	d.log.Info("daemon: shutting down", "running_jobs", d.running())
	d.stopAll("the daemon is shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), grace+2*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	wg.Wait()
	return err
}

// timeoutListener sets TCP_USER_TIMEOUT on every accepted connection.
type timeoutListener struct{ net.Listener }

func (l timeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		setUserTimeout(c)
	}
	return c, err
}

// running counts the jobs with processes.
func (d *Daemon) running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, j := range d.jobs {
		if j.launched() {
			n++
		}
	}
	return n
}

// stopAll tells every job why and stops its processes.
func (d *Daemon) stopAll(why string) {
	d.mu.Lock()
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() { defer wg.Done(); j.stop(why) }()
	}
	wg.Wait()
}

// caller is the verified name of a request's client certificate.
func caller(r *http.Request) string {
	if r.TLS == nil {
		return ""
	}
	return ca.PeerName(*r.TLS)
}

// refuse answers a refusal and logs it with its reason.
func (d *Daemon) refuse(w http.ResponseWriter, r *http.Request, status int, what string, err error) {
	d.log.Warn("daemon: "+what+" refused", "caller", caller(r), "remote", r.RemoteAddr, "reason", err.Error())
	http.Error(w, err.Error(), status)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// decode reads a bounded JSON body with no unknown fields.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed request: %w", err)
	}
	return nil
}

// Handler serves the daemon's API (see the package's API comment in
// api.go); it must be served over TLS with client certificates.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	authed := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			name := caller(r)
			if name == "" {
				d.refuse(w, r, http.StatusUnauthorized, r.URL.Path, errors.New("a client certificate of the cluster's CA is required"))
				return
			}
			h(w, r, name)
		}
	}
	mux.HandleFunc("GET /v1/ping", authed(func(w http.ResponseWriter, r *http.Request, _ string) {
		writeJSON(w, Info{Name: d.cfg.Name, ProcsPerJob: d.cfg.ProcsPerJob, FreeJobs: d.cfg.Jobs - len(d.gate.Tokens())})
	}))
	mux.HandleFunc("GET /v1/peers", authed(func(w http.ResponseWriter, r *http.Request, _ string) {
		d.mu.Lock()
		peers := slices.Clone(d.peers)
		d.mu.Unlock()
		writeJSON(w, map[string][]PeerInfo{"peers": peers})
	}))
	mux.HandleFunc("GET /v1/ps", authed(func(w http.ResponseWriter, r *http.Request, name string) {
		writeJSON(w, map[string][]JobInfo{"jobs": d.ps(name)})
	}))
	mux.HandleFunc("POST /v1/reserve", authed(d.reserve))
	mux.HandleFunc("POST /v1/release", authed(d.release))
	mux.HandleFunc("PUT /v1/jobs/{token}/files", authed(d.stageFile))
	mux.HandleFunc("POST /v1/jobs/{token}/launch", authed(d.launch))
	mux.HandleFunc("POST /v1/jobs/{token}/spawn", authed(d.spawn))
	mux.HandleFunc("POST /v1/jobs/{token}/stop", authed(d.stopProc))
	mux.HandleFunc("POST /v1/halt", authed(func(w http.ResponseWriter, r *http.Request, name string) {
		if !d.admin(name) {
			d.refuse(w, r, http.StatusForbidden, "halt", fmt.Errorf("%q may not halt this daemon (only %q and its admins)", name, d.cfg.Name))
			return
		}
		d.log.Info("daemon: halt", "caller", name)
		writeJSON(w, struct{}{})
		d.once.Do(func() { close(d.halt) })
	}))
	return mux
}

// admin says whether name may halt the daemon and see every job: the
// daemon itself and its admins.
func (d *Daemon) admin(name string) bool {
	return name == d.cfg.Name || slices.Contains(d.cfg.Admins, name)
}

// ps lists the jobs caller may see: its own, or every job for an admin.
func (d *Daemon) ps(caller string) []JobInfo {
	all := d.admin(caller)
	var out []JobInfo
	d.mu.Lock()
	byToken := map[string]*job{}
	for t, j := range d.jobs {
		byToken[t] = j
	}
	d.mu.Unlock()
	for _, t := range d.gate.Tokens() {
		if !all && t.Submitter != caller {
			continue
		}
		ji := JobInfo{Job: t.Job, Submitter: t.Submitter, Procs: t.Procs, Confirmed: t.Confirmed}
		if j := byToken[t.ID]; j != nil {
			ji.Ranks = j.info()
		}
		out = append(out, ji)
	}
	return out
}

func (d *Daemon) reserve(w http.ResponseWriter, r *http.Request, name string) {
	var req ReserveRequest
	if err := decode(r, &req); err != nil {
		d.refuse(w, r, http.StatusBadRequest, "reservation", err)
		return
	}
	if req.Job == "" || len(req.Job) > 64 {
		d.refuse(w, r, http.StatusBadRequest, "reservation", fmt.Errorf("job name %q: want 1 to 64 bytes", req.Job))
		return
	}
	if len(d.cfg.Allowed) == 0 && !d.cfg.AllowAll {
		d.m.reservationsRefused.Add(1)
		d.refuse(w, r, http.StatusForbidden, "reservation", fmt.Errorf("%w: daemon %s accepts no submitter yet: list the submitters in its configuration's allowed, or set allow_all = true to trust every certificate holder of the cluster",
			reserve.ErrNotAllowed, d.cfg.Name))
		return
	}
	t, err := d.gate.Reserve(name, req.Job, req.Procs)
	if err != nil {
		d.m.reservationsRefused.Add(1)
		status := http.StatusConflict
		if errors.Is(err, reserve.ErrNotAllowed) {
			status = http.StatusForbidden
		}
		d.refuse(w, r, status, "reservation", err)
		return
	}
	base := "job-" + t.ID[:16]
	dir := filepath.Join(d.cfg.WorkDir, base)
	if err := unix.Mkdirat(int(d.work.Fd()), base, 0o700); err != nil {
		d.gate.Release(name, t.ID)
		d.refuse(w, r, http.StatusInternalServerError, "reservation", fmt.Errorf("job directory: %w", err))
		return
	}
	j := &job{d: d, token: t.ID, submitter: name, name: req.Job, ended: make(chan struct{}),
		dir: stage.Dir{Root: dir, Anchor: d.work, MaxFile: d.cfg.MaxFileMB << 20, MaxTotal: d.cfg.MaxJobMB << 20}}
	d.mu.Lock()
	d.jobs[t.ID] = j
	d.mu.Unlock()
	d.m.reservationsGranted.Add(1)
	d.log.Info("daemon: reserved", "submitter", name, "job", req.Job, "procs", req.Procs, "token", t.ID[:8])
	// An unconfirmed token expires in the gate; its directory goes with it.
	time.AfterFunc(d.cfg.Hold.Duration+time.Second, func() { d.dropIfExpired(t.ID) })
	writeJSON(w, ReserveReply{Token: t.ID, Procs: t.Procs})
}

// dropIfExpired forgets a job whose token the gate no longer holds and
// that has no processes.
func (d *Daemon) dropIfExpired(token string) {
	for _, t := range d.gate.Tokens() {
		if t.ID == token {
			return
		}
	}
	d.mu.Lock()
	j := d.jobs[token]
	if j != nil && !j.launched() {
		delete(d.jobs, token)
	}
	d.mu.Unlock()
	if j != nil && !j.launched() {
		os.RemoveAll(j.dir.Root)
		d.log.Info("daemon: reservation expired", "job", j.name, "token", token[:8])
	}
}

// lookup returns the job of a token held by name.
func (d *Daemon) lookup(token, name string) (*job, error) {
	d.mu.Lock()
	j := d.jobs[token]
	d.mu.Unlock()
	if j == nil || j.submitter != name {
		return nil, fmt.Errorf("%w: token %.8s", reserve.ErrUnknown, token)
	}
	return j, nil
}

func (d *Daemon) release(w http.ResponseWriter, r *http.Request, name string) {
	var req struct {
		Token string `json:"token"`
	}
	if err := decode(r, &req); err != nil {
		d.refuse(w, r, http.StatusBadRequest, "release", err)
		return
	}
	j, err := d.lookup(req.Token, name)
	if err != nil {
		d.refuse(w, r, http.StatusNotFound, "release", err)
		return
	}
	j.stop("released by its submitter")
	d.log.Info("daemon: released", "submitter", name, "job", j.name)
	writeJSON(w, struct{}{})
}

// forget removes a job's token, directory and entry (its processes have
// ended).
func (d *Daemon) forget(j *job) {
	j.mu.Lock()
	why := j.why
	j.mu.Unlock()
	d.mu.Lock()
	delete(d.jobs, j.token)
	d.rememberLocked(j, why)
	d.mu.Unlock()
	d.gate.Release(j.submitter, j.token)
	os.RemoveAll(j.dir.Root)
}

func (d *Daemon) stageFile(w http.ResponseWriter, r *http.Request, name string) {
	j, err := d.lookup(r.PathValue("token"), name)
	if err != nil {
		d.refuse(w, r, http.StatusNotFound, "staging", err)
		return
	}
	q := r.URL.Query()
	size, err := strconv.ParseInt(q.Get("size"), 10, 64)
	if err != nil {
		d.refuse(w, r, http.StatusBadRequest, "staging", fmt.Errorf("size %q is not a number", q.Get("size")))
		return
	}
	f := stage.File{Path: q.Get("path"), Size: size, SHA256: q.Get("sha256"), Exec: q.Get("exec") == "1"}
	// The job's lock is held to check and to install, never while the
	// body arrives: a slow sender must not hold up ps, release, expiry or
	// shutdown. Stopping the job cuts the upload short.
	j.mu.Lock()
	if j.procs != nil || j.why != "" {
		j.mu.Unlock()
		d.refuse(w, r, http.StatusConflict, "staging", errors.New("the job is already launched or stopped"))
		return
	}
	up, err := j.dir.Begin(f)
	j.mu.Unlock()
	if err == nil {
		body := newUploadBody(r.Body, http.NewResponseController(w), d.cfg.ReadTimeout.Duration)
		cut := make(chan struct{})
		go func() {
			select {
			case <-j.ended:
				body.cut()
			case <-cut:
			}
		}()
		err = up.Write(body)
		close(cut)
		body.finish()
		j.mu.Lock()
		if err == nil && (j.procs != nil || j.why != "") {
			err = errors.New("the job was launched or stopped while the file arrived")
		}
		if err == nil {
			err = up.Install()
		}
		if err != nil {
			up.Abort()
		}
		j.mu.Unlock()
	}
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, stage.ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		d.refuse(w, r, status, "staging", err)
		return
	}
	d.m.stagedBytes.Add(size)
	d.log.Info("daemon: staged", "job", j.name, "path", f.Path, "bytes", size)
	writeJSON(w, struct{}{})
}
