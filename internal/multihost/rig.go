package multihost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/internal/netlab"
	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/submit"
	"golang.org/x/sys/unix"
)

// Submitter is the name of the one member allowed to submit jobs to a
// rig's daemons; Rig.Creds are its credentials.
const Submitter = "alice"

// The ports the supernode and the daemons listen on, each in its own
// namespace (so rigs on one machine do not collide).
const (
	supernodePort = "7940"
	daemonPort    = "7950"
)

// readyTimeout bounds the wait for the supernode to list every daemon.
const readyTimeout = 60 * time.Second

// Rig is a supernode on the first host of a lab and a peer daemon on
// each of the others. Its processes live until Close.
type Rig struct {
	// Lab holds the hosts: Lab.Hosts[0] the supernode's, then Daemons.
	Lab *netlab.Lab
	// Daemons are the daemons' hosts; daemon i+1 is named "d<i+1>".
	Daemons []*netlab.Host
	// Supernode is the supernode's specification, "sn@IP:PORT", as
	// submit.Config.Supernodes and `cohort run --hosts supernode:…` take it.
	Supernode string
	// Dir holds the CA (ca.crt), every member's NAME.crt and NAME.key and
	// the daemons' configurations, closed to all but root. Close removes
	// it.
	Dir string
	// Work holds the daemons' work directories, Work/NAME: traversable by
	// others (0711), since the daemons run their jobs under uids of their
	// own. Close removes it.
	Work string
	// Creds are the submitter's (Submitter's) credentials.
	Creds *ca.Credentials

	cancel       context.CancelFunc
	procs        []*exec.Cmd
	supernodeLog *logBuffer
	daemonLogs   []*logBuffer
	closeOnce    sync.Once
	closeErr     error
}

// CAFile is the path of the rig's CA certificate (`cohort run --ca`).
func (r *Rig) CAFile() string { return filepath.Join(r.Dir, "ca.crt") }

// DaemonName is the name of the daemon on Daemons[i].
func DaemonName(i int) string { return fmt.Sprintf("d%d", i+1) }

// Start builds a lab of k+1 hosts, a CA with certificates for the
// supernode "sn", Submitter and the k daemons, and starts `cohortBin
// supernode` on the first host and `cohortBin boot` on each of the others:
// every daemon runs up to procsPerJob processes of one job and 2 jobs at
// once, and serves only Submitter; daemon i runs its jobs under uids
// 61000+100i to 61099+100i. It returns once the supernode lists all k
// daemons; ctx bounds that wait only (the processes run until Close).
// Without root it returns an error wrapping netlab.ErrUnavailable.
func Start(ctx context.Context, k, procsPerJob int, cohortBin string) (*Rig, error) {
	return StartWith(ctx, k, procsPerJob, cohortBin, "")
}

// StartWith is Start with more settings for every daemon: extraTOML is
// added to each one's configuration (job_pids = 64, say).
func StartWith(ctx context.Context, k, procsPerJob int, cohortBin, extraTOML string) (*Rig, error) {
	return StartOpts(ctx, k, procsPerJob, cohortBin, Options{ExtraTOML: extraTOML})
}

// Options are a rig's settings beyond Start's.
type Options struct {
	// ExtraTOML is added to every daemon's configuration.
	ExtraTOML string
	// DialOutOnly lists the daemons (by index in Daemons) on hosts nobody
	// can dial: the lab's firewall drops every connection to them
	// (netlab SetDialOutOnly) from before they start, and their
	// configuration says dial_out_only = true, as such a host's would.
	DialOutOnly []int
}

// StartOpts is Start with opts.
func StartOpts(ctx context.Context, k, procsPerJob int, cohortBin string, opts Options) (*Rig, error) {
	if k < 1 || procsPerJob < 1 {
		return nil, fmt.Errorf("multihost: %d daemons of %d processes per job: want at least 1 of each", k, procsPerJob)
	}
	if err := netlab.Available(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cohortBin); err != nil {
		return nil, fmt.Errorf("multihost: the cohort executable: %w", err)
	}
	lab, err := netlab.Build(k + 1)
	if err != nil {
		return nil, err
	}
	procCtx, cancel := context.WithCancel(context.Background())
	r := &Rig{Lab: lab, Daemons: lab.Hosts[1:], cancel: cancel, supernodeLog: &logBuffer{}}
	fail := func(err error) (*Rig, error) {
		return nil, errors.Join(err, r.Close())
	}
	if r.Dir, err = os.MkdirTemp("", "cohort-rig-"); err != nil {
		return fail(err)
	}
	if r.Work, err = os.MkdirTemp("", "cohort-rig-work-"); err != nil {
		return fail(err)
	}
	if err := os.Chmod(r.Work, 0o711); err != nil {
		return fail(err)
	}
	if err := ca.Init(r.Dir, "cohort-rig"); err != nil {
		return fail(err)
	}
	names := []string{"sn", Submitter}
	for i := range k {
		names = append(names, DaemonName(i))
	}
	for _, n := range names {
		if err := ca.Issue(r.Dir, r.Dir, n); err != nil {
			return fail(err)
		}
	}
	if r.Creds, err = ca.Load(r.CAFile(), r.Dir, Submitter); err != nil {
		return fail(err)
	}
	run := func(h *netlab.Host, log *logBuffer, args ...string) error {
		cmd := h.Command(procCtx, cohortBin, args...)
		start := cmd.Start
		cmd.WaitDelay = 5 * time.Second
		if args[0] == "boot" {
			cmd = exec.CommandContext(procCtx, cohortBin, args...)
			start = func() error { return startInNetns(cmd, h.Name) }
			// A daemon killed outright leaves its jobs' cgroups and
			// its own behind: it is asked to shut down, and killed
			// only if it has not within its jobs' grace and then some.
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = 15 * time.Second
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := start(); err != nil {
			return fmt.Errorf("multihost: %s %s: %w", cohortBin, args[0], err)
		}
		r.procs = append(r.procs, cmd)
		return nil
	}
	sn := lab.Hosts[0]
	r.Supernode = "sn@" + sn.Addr + ":" + supernodePort
	if err := run(sn, r.supernodeLog, "supernode", "--name", "sn", "--listen", sn.Addr+":"+supernodePort,
		"--expiry", "5s", "--ca", r.CAFile(), "--certs", r.Dir); err != nil {
		return fail(err)
	}
	for i, h := range r.Daemons {
		name := DaemonName(i)
		conf := filepath.Join(r.Dir, name+".toml")
		text := fmt.Appendf(nil, `name = %q
listen = "%s:%s"
advertise = "%s:%s"
supernodes = [%q]
ca = %q
certs = %q
work_dir = %q
jobs = 2
procs_per_job = %d
allowed = [%q]
refresh = "500ms"
ping = "1s"
job_uids = "%d-%d"
job_cores = false  # the rig's daemons share one machine's cores
%s
`, name, h.Addr, daemonPort, h.Addr, daemonPort, r.Supernode, r.CAFile(), r.Dir,
			filepath.Join(r.Work, name), procsPerJob, Submitter, 61000+100*i, 61099+100*i, opts.ExtraTOML)
		if slices.Contains(opts.DialOutOnly, i) {
			if err := lab.SetDialOutOnly(h, true); err != nil {
				return fail(err)
			}
			text = append(text, "dial_out_only = true\n"...)
		}
		if err := os.WriteFile(conf, text, 0o600); err != nil {
			return fail(err)
		}
		log := &logBuffer{}
		r.daemonLogs = append(r.daemonLogs, log)
		if err := run(h, log, "boot", "--config", conf); err != nil {
			return fail(err)
		}
	}
	if err := r.waitReady(ctx, k); err != nil {
		return fail(err)
	}
	return r, nil
}

// waitReady asks the supernode for its peers until it lists k, for at
// most readyTimeout.
func (r *Rig) waitReady(ctx context.Context, k int) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		peers, err := submit.Peers(pctx, r.Creds, []string{r.Supernode})
		pcancel()
		if err == nil && len(peers) == k {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("multihost: the supernode lists %d of %d daemons (%v; %w)\nsupernode: %s\n%s: %s",
				len(peers), k, err, ctx.Err(), r.supernodeLog, DaemonName(0), r.daemonLogs[0])
		}
	}
}

// DaemonAddr is the address the daemon on Daemons[i] serves on.
func (r *Rig) DaemonAddr(i int) string { return r.Daemons[i].Addr + ":" + daemonPort }

// SupernodeLog is what the supernode wrote so far.
func (r *Rig) SupernodeLog() string { return r.supernodeLog.String() }

// DaemonLog is what the daemon on Daemons[i] wrote so far.
func (r *Rig) DaemonLog(i int) string { return r.daemonLogs[i].String() }

// Close stops the supernode and the daemons (and so their jobs), removes
// the lab and Dir. It is idempotent.
func (r *Rig) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		for _, p := range r.procs {
			p.Wait()
		}
		var errs []error
		if r.Lab != nil {
			errs = append(errs, r.Lab.Close())
		}
		for _, d := range []string{r.Dir, r.Work} {
			if d != "" {
				errs = append(errs, os.RemoveAll(d))
			}
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}

// startInNetns starts cmd in the network namespace ns, and in this
// process's other namespaces. A daemon is not started through `ip netns
// exec`, which also mounts a sysfs of the namespace's over /sys and so
// hides the machine's cgroups, where the daemon confines its jobs: the
// command is forked from a thread moved into ns for the while, then moved
// back (a thread left in ns, the main one say, would make this process
// one of ns's, which the lab kills when it closes).
func startInNetns(cmd *exec.Cmd, ns string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("multihost: this thread's network namespace: %w", err)
			return
		}
		defer own.Close()
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("multihost: network namespace %s: %w", ns, err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("multihost: entering network namespace %s: %w", ns, err)
			return
		}
		err = cmd.Start()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with the goroutine
		errc <- err
	}()
	return <-errc
}

// logBuffer collects a process's output, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
