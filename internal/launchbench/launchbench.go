// Package launchbench measures how long launchers take to start a cohort
// job: from the moment the launcher is started to the moment every rank
// has installed its first membership view (and so can communicate), and to
// the end of the job. Each launcher is a [Launcher] in a list ([Register],
// [Launchers]); the local launcher of `cohort run`, SLURM's srun and the
// peer-to-peer middleware on several hosts of this machine ([Hosts]) are
// built in, and others register the same way. A launcher that holds
// something across runs (the hosts' rig) is also an io.Closer, closed by
// the caller when the benchmark is done.
//
// The ranks run a worker ([Worker]) that joins the job with comm.Init,
// waits for its first view, prints the wall-clock time of it on one line,
// waits in a barrier for every rank, and leaves. Launcher and ranks run on
// this machine, so their clocks agree.
package launchbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/internal/multihost"
	"github.com/cohort-mp/cohort/internal/netlab"
	"github.com/cohort-mp/cohort/internal/slurm"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/p2p/place"
	"github.com/cohort-mp/cohort/p2p/submit"
)

// Launcher starts the n ranks of a program and waits for their end.
type Launcher interface {
	// Name is the launcher's name in flags and tables ("local", "slurm").
	Name() string
	// Check returns nil if the launcher can run here, or why not.
	Check(ctx context.Context) error
	// Run starts n ranks of prog with args and the extra environment
	// entries env, copies their standard output to out (whole lines), and
	// returns when every rank has ended, with an error if one failed.
	Run(ctx context.Context, n int, prog string, args, env []string, out io.Writer) error
}

var (
	regMu     sync.Mutex
	launchers []Launcher
)

// Register adds a launcher to the list; a duplicate name panics.
func Register(l Launcher) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, o := range launchers {
		if o.Name() == l.Name() {
			panic("launchbench: launcher " + l.Name() + " registered twice")
		}
	}
	launchers = append(launchers, l)
}

// Launchers returns the registered launchers in registration order.
func Launchers() []Launcher {
	regMu.Lock()
	defer regMu.Unlock()
	return slices.Clone(launchers)
}

// Lookup returns the launcher named name.
func Lookup(name string) (Launcher, bool) {
	for _, l := range Launchers() {
		if l.Name() == name {
			return l, true
		}
	}
	return nil, false
}

func init() {
	Register(Local{})
	Register(&Slurm{})
	Register(&Hosts{})
}

// Local is the launcher of `cohort run` (package launch), on this machine.
type Local struct{}

func (Local) Name() string                    { return "local" }
func (Local) Check(ctx context.Context) error { return nil }
func (Local) Run(ctx context.Context, n int, prog string, args, env []string, out io.Writer) error {
	job, err := launch.Start(ctx, launch.Config{N: n, Program: prog, Args: args, Env: env, Stdout: out, Timeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	_, err = job.Wait()
	return err
}

// Slurm runs the ranks as one step of srun on the SLURM cluster that
// package slurm finds (-O: more tasks than CPUs; --mpi=pmi2). The step
// gets a fresh user secret of its own (COHORT_SLURM_SECRET).
type Slurm struct {
	mu sync.Mutex
	c  *slurm.Cluster // found by Check or the first Run
}

func (*Slurm) Name() string { return "slurm" }
func (s *Slurm) Check(ctx context.Context) error {
	_, err := s.cluster(ctx)
	return err
}

func (s *Slurm) cluster(ctx context.Context) (slurm.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		return *s.c, nil
	}
	c, err := slurm.Find(ctx)
	if err != nil {
		return c, err
	}
	s.c = &c
	return c, nil
}

func (s *Slurm) Run(ctx context.Context, n int, prog string, args, env []string, out io.Writer) error {
	c, err := s.cluster(ctx)
	if err != nil {
		return err
	}
	var secret [32]byte
	rand.Read(secret[:])
	srunArgs := append([]string{"-J", "cohort-bench-launch", "-O", "-n", strconv.Itoa(n), "--mpi=pmi2", prog}, args...)
	cmd := c.Command(ctx, "srun", srunArgs...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, launch.EnvUserSecret+"="+hex.EncodeToString(secret[:]))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("srun: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// HostsDaemons is how many daemon hosts the hosts launcher's rig has;
// HostsProcsPerJob how many processes of one job each runs, enough for
// MaxHostsRanks ranks spread over them.
const (
	HostsDaemons     = 5
	HostsProcsPerJob = 16
	MaxHostsRanks    = HostsDaemons * HostsProcsPerJob
)

// Hosts runs the ranks over the peer-to-peer middleware, as `cohort run
// --hosts … --alloc spread` does: a rig (package multihost) of a
// supernode and HostsDaemons peer daemons, each in its own network
// namespace of this machine, built by Check or the first Run and reused
// by every run until Close. The submitter runs in this process. The time
// of a run includes what a submission costs: asking the supernode for the
// peers, pinging them, reserving, staging the program on every host used
// (SHA-256 checked) and the rendezvous over the hosts' links.
type Hosts struct {
	// Cohort is the cohort executable the supernode and the daemons run
	// ("": this process's executable).
	Cohort string

	mu  sync.Mutex
	rig *multihost.Rig
}

func (*Hosts) Name() string { return "hosts" }

func (h *Hosts) Check(ctx context.Context) error {
	_, err := h.start(ctx)
	return err
}

// start builds the rig once.
func (h *Hosts) start(ctx context.Context) (*multihost.Rig, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rig != nil {
		return h.rig, nil
	}
	bin := h.Cohort
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("the cohort executable for the daemons: %w", err)
		}
	}
	rig, err := multihost.Start(ctx, HostsDaemons, HostsProcsPerJob, bin)
	if errors.Is(err, netlab.ErrUnavailable) {
		return nil, fmt.Errorf("needs root and network namespaces: %w", err)
	}
	if err != nil {
		return nil, err
	}
	h.rig = rig
	return rig, nil
}

func (h *Hosts) Run(ctx context.Context, n int, prog string, args, env []string, out io.Writer) error {
	if n > MaxHostsRanks {
		return fmt.Errorf("%d ranks: the rig takes at most %d (%d hosts of %d)", n, MaxHostsRanks, HostsDaemons, HostsProcsPerJob)
	}
	rig, err := h.start(ctx)
	if err != nil {
		return err
	}
	var stderr syncBuffer
	_, err = submit.Run(ctx, submit.Config{
		N: n, Strategy: place.Spread, Supernodes: []string{rig.Supernode}, Creds: rig.Creds,
		Program: prog, Args: args, Env: env, Stdout: out, Stderr: &stderr,
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Close stops the rig, if one was built, and removes it.
func (h *Hosts) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rig == nil {
		return nil
	}
	err := h.rig.Close()
	h.rig = nil
	return err
}

// ViewLine starts the line a worker prints: "first-view RANK UNIXNANO".
const ViewLine = "first-view"

// Worker is one rank of the benchmark: comm.Init, wait for the first
// view, print ViewLine with its time, a barrier, Finalize.
func Worker(ctx context.Context, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w := &viewWatch{seen: make(chan struct{})}
	s, err := comm.Init(ctx, comm.WithEvents(w))
	if err != nil {
		return err
	}
	defer func() {
		fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer fcancel()
		s.Finalize(fctx)
	}()
	select {
	case <-w.seen:
	case <-ctx.Done():
		return fmt.Errorf("no first view: %w", ctx.Err())
	}
	fmt.Fprintf(stdout, "%s %d %d\n", ViewLine, s.World().Rank(), w.at.UnixNano())
	return comm.Barrier(ctx, s.World())
}

// viewWatch is the event stream of a worker: it notes when the first
// member.ViewInstalled line goes by.
type viewWatch struct {
	once sync.Once
	at   time.Time
	seen chan struct{}
}

func (v *viewWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"type":"member.ViewInstalled"`)) {
		v.once.Do(func() {
			v.at = time.Now()
			close(v.seen)
		})
	}
	return len(p), nil
}

// Run is one launch: how long from the launcher's start until every rank
// had its first view, and until the job ended; and, for the baseline, how
// long the same launcher took to run the empty program (true) on as many
// ranks.
type Run struct {
	FirstView, End, Empty time.Duration
}

// MeasureEmpty runs n ranks of the empty program (prog, such as
// /bin/true) with l and returns how long the job took.
func MeasureEmpty(ctx context.Context, l Launcher, n int, prog string) (time.Duration, error) {
	start := time.Now()
	if err := l.Run(ctx, n, prog, nil, nil, io.Discard); err != nil {
		return 0, fmt.Errorf("%s, %d ranks of %s: %w", l.Name(), n, prog, err)
	}
	return time.Since(start), nil
}

// Measure launches n ranks of the worker (prog with args) once with l.
func Measure(ctx context.Context, l Launcher, n int, prog string, args []string) (Run, error) {
	var out syncBuffer
	start := time.Now()
	err := l.Run(ctx, n, prog, args, nil, &out)
	end := time.Since(start)
	if err != nil {
		return Run{}, fmt.Errorf("%s, %d ranks: %w", l.Name(), n, err)
	}
	views := map[int]time.Time{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != ViewLine {
			continue
		}
		r, err1 := strconv.Atoi(f[1])
		ns, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || r < 0 || r >= n {
			return Run{}, fmt.Errorf("%s: bad worker line %q", l.Name(), sc.Text())
		}
		views[r] = time.Unix(0, ns)
	}
	if len(views) != n {
		return Run{}, fmt.Errorf("%s: %d of %d ranks reported their first view", l.Name(), len(views), n)
	}
	var last time.Time
	for _, t := range views {
		if t.After(last) {
			last = t
		}
	}
	return Run{FirstView: last.Sub(start), End: end}, nil
}

// Result summarizes the runs of one launcher at one size.
type Result struct {
	Launcher string
	N        int
	Runs     []Run
}

// Stat returns the median, minimum and maximum of f over the runs.
func (r Result) Stat(f func(Run) time.Duration) (median, lo, hi time.Duration) {
	if len(r.Runs) == 0 {
		return 0, 0, 0
	}
	d := make([]time.Duration, len(r.Runs))
	for i, run := range r.Runs {
		d[i] = f(run)
	}
	slices.Sort(d)
	m := d[len(d)/2]
	if len(d)%2 == 0 {
		m = (d[len(d)/2-1] + d[len(d)/2]) / 2
	}
	return m, d[0], d[len(d)-1]
}

// Bench measures every launcher at every size, runs times each, launchers
// alternated within each repetition (so that a change in the machine's
// load hits them alike); each run is followed by the same launch of empty,
// the baseline. progress, if not nil, is called after each run.
func Bench(ctx context.Context, ls []Launcher, sizes []int, runs int, prog string, args []string, empty string, progress func(Result)) ([]Result, error) {
	if len(ls) == 0 || len(sizes) == 0 || runs < 1 {
		return nil, errors.New("launchbench: nothing to measure")
	}
	res := make([]Result, 0, len(ls)*len(sizes))
	for _, n := range sizes {
		for _, l := range ls {
			res = append(res, Result{Launcher: l.Name(), N: n})
		}
	}
	for i := 0; i < runs; i++ {
		for si, n := range sizes {
			for li, l := range ls {
				run, err := Measure(ctx, l, n, prog, args)
				if err != nil {
					return res, err
				}
				if run.Empty, err = MeasureEmpty(ctx, l, n, empty); err != nil {
					return res, err
				}
				r := &res[si*len(ls)+li]
				r.Runs = append(r.Runs, run)
				if progress != nil {
					progress(*r)
				}
			}
		}
	}
	return res, nil
}

// syncBuffer is a bytes.Buffer safe for the launchers' concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
