package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

func init() {
	register(&command{
		name:     "run",
		synopsis: "-n N [flags] PROGRAM [-- ARGS]",
		summary:  "run a message-passing program as N processes, on this machine or on peers",
		help: `Run starts N processes of PROGRAM on this machine, ranks 0 to N−1 of one job,
each with its place in the job in its environment (job id, rank, size, the
address of this launcher's rendezvous, a fresh random job secret; never on
the command line). Processes that use package comm find each other through
the rendezvous. Their standard output and error are forwarded line by line
(with --prefix, each line starts with "[rank] ").

PROGRAM is an executable (a path, or a command in PATH) or a Go package (a
directory with Go files, or an import path), which is built once with
'go build' into a temporary directory first. ARGS are passed to every rank.

Run exits with status 0 only if every rank exits with status 0; otherwise it
names the ranks that failed and how (exit code, signal, killed by --kill).
Ctrl-C stops the whole job (SIGTERM, then SIGKILL after 3 s). --kill
injects crashes: SIGKILL to RANK at DURATION after the job's start, the
moment every rank has registered with the launcher (the time to build a Go
package and start the processes does not count; a program that does not
use package comm never registers, and its kills do not happen). A planned
kill that did not happen (the job ended first, the rank had already ended)
is reported on standard error; it does not change the exit status. By
default the other ranks keep running (a cohort program sees the failure as
an error naming the rank); --abort-on-failure stops the job at the first
failure, as mpirun does. A process that dies before it registers does not
stop the start either: the job starts without it, its rank failed from the
others' first view (a spare takes it with --spares); --abort-on-failure
then aborts the start instead, naming the process.

A rank that the others excluded from the job while it lived (their failure
detectors took it for failed while it was stopped, starved or cut off)
ends with an error saying so when it runs again. One still running once
every other rank has ended is stopped (SIGTERM, then SIGKILL after 3 s;
"cohort run: stopping rank R: ..."); with --hosts its daemon stops it
("cohort run: stopping rank R on HOST: ..."). Either way the run names
it as "excluded from the job by the others" and exits with status 1,
after the others' output. Under SLURM (srun) no such stop is made: the
step's time limit bounds it.

With --hosts the job runs on the peers of the peer-to-peer middleware
instead: the supernodes give the live peer daemons ('cohort boot'), ranked by
the latency of a ping; N slots are reserved with overbooking, the ranks
placed by --alloc (spread: as few per host as possible, closest hosts
first; concentrate: fill the closest hosts first), the program staged and
launched, and the output forwarded. A host lost during the job is reported
with its ranks, as a killed local rank is. A daemon on a host nobody can dial
(dial_out_only, see 'cohort boot') is reached through the supernodes, and its
ranks dial every other rank; --dial-out-only NAME,... marks more daemons
whose ranks the other hosts cannot dial (the submitter reaches them).

When the direct link between two ranks breaks (or cannot be dialled) while
both reach a third rank, their messages go through it; a line says so
("cohort: ranks 0 and 4: link down, relayed through rank 2") and another
when the direct link is back.

With -r R every rank runs as R processes (replicas) that execute the same
program: a rank lives, and the program sees nothing, while one of its
replicas does (P2P-MPI's transparent replication); when the last replica of
a rank dies, the others see the ordinary error naming the rank. Each line of
a rank's output is printed once. Replicated programs must be deterministic
(the same sends in the same order); what depends on timing (receives and
probes from AnySource, Iprobe, Test, WaitAny) is decided by each rank's
master replica, and Irecv from AnySource is refused. --kill then names
processes: replica j of rank r is process j·N+r. With --hosts the replicas
of a rank go to distinct hosts whenever the hosts allow it (cohort run says
which ranks share a host otherwise).

With --spares S the job starts S more processes, N to N+S−1, that hold no
rank: when a rank's process dies, a spare takes its rank and the program
goes on from its last checkpoint, without a relaunch (a program takes
spares through package resil; any other refuses to start as a spare).
--kill then names processes, and the job succeeds when every process that
was not killed exits with status 0. With --hosts the strategy places the
N+S processes in order (spread puts the spares on the hosts with the
fewest ranks; cohort run says where each spare went), and a process lost
with its host counts as replaced, as a killed one does.

With --respawn (and --spares) a process that a signal ends (a crash, a
kill) once the job has started is started again on this machine: the new
process, numbered from N+S on, joins the running job as a spare (its
address reaches every process before it asks the membership to admit it)
and takes the rank of a process that dies after every survivor admitted
it. Each line about a restart starts with "cohort run:". --respawn=K
starts each process of the job's start again at most K times, counting
the deaths of its restarts (default 3; at most 62 restarts in all); past
that, or if a restart fails to start, the job goes on with the spares it
has. A restart the job never needed is stopped once every other process
has ended, and does not fail the job. With --hosts the process starts
again on its host while that host's daemon answers, and a process lost
with its host starts again on another host of the job with a free slot
(the closest with concentrate, the least loaded with spread).

The ranks' connections are authenticated by the job's secret; --encrypt
also encrypts them, with TLS 1.3 and a certificate made for the job (its
key reaches the ranks in their environment, as the secret does). Credentials: --name (default
$USER, else the current user's login name, else the host name), --ca and
--certs (see 'cohort ca').

Examples:
  cohort run -n 8 ./examples/pi
  cohort run -n 12 --hosts supernode:sn1@10.0.0.2:7940 --alloc concentrate --name alice ./nqueens -- -n 14
  cohort run -n 8 --prefix --kill 3@200ms ./examples/pi
  cohort run -n 4 -r 2 --kill 5@300ms ./examples/allreduce
  cohort run -n 4 --spares 1 --kill 2@1s ./examples/jacobi
  cohort run -n 4 --spares 1 --respawn --kill 1@1s --kill 2@3s ./examples/jacobi -- -iters 8000
  cohort run -n 4 -r 2 --hosts supernode:sn1@10.0.0.2:7940 ./nqueens -- -n 16
  cohort run -n 4 --spares 2 --hosts supernode:sn1@10.0.0.2:7940 ./jacobi
  cohort run -n 4 --spares 1 --respawn --hosts supernode:sn1@10.0.0.2:7940 ./jacobi
  cohort run -n 2 ./examples/pingpong -- -iters 1000
  cohort run -n 4 --detector heartbeat --timeout 1m ./myprog`,
		run: runRun,
	})
}

// maxRunRanks bounds -n: every rank is a process.
const maxRunRanks = 1024

// killList is the repeatable --kill flag: RANK@DURATION.
type killList []launch.Kill

func (l *killList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, k := range *l {
		parts[i] = fmt.Sprintf("%d@%v", k.Rank, k.After)
	}
	return strings.Join(parts, ",")
}

func (l *killList) Set(s string) error {
	rankText, durText, ok := strings.Cut(s, "@")
	if !ok {
		return fmt.Errorf("%q: want RANK@DURATION, e.g. 3@200ms", s)
	}
	rank, err := strconv.Atoi(rankText)
	if err != nil || rank < 0 {
		return fmt.Errorf("%q: rank %q is not a number from 0", s, rankText)
	}
	after, err := time.ParseDuration(durText)
	if err != nil {
		return fmt.Errorf("%q: bad duration %q (e.g. 200ms, 1.5s)", s, durText)
	}
	if after < 0 {
		return fmt.Errorf("%q: negative duration", s)
	}
	*l = append(*l, launch.Kill{Rank: rank, After: after})
	return nil
}

func runRun(ctx context.Context, c *call) error {
	fs := c.newFlags()
	cfg := launch.Config{Stdout: c.stdout, Stderr: c.stderr}
	var kills killList
	fs.IntVar(&cfg.N, "n", 0, "number of `ranks` (processes), 1 to 1024")
	fs.IntVar(&cfg.Fanout, "fanout", 0, "membership radix tree `fan-out`, a power of two (0: the default)")
	fs.StringVar(&cfg.Detector, "detector", defaultDetector, detectorHelp)
	fs.Var(&kills, "kill", "inject a crash: SIGKILL to `RANK@DURATION` after every rank has registered (repeatable)")
	fs.BoolVar(&cfg.Prefix, "prefix", false, `start each output line with "[rank] "`)
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "stop the job after this `duration` (0: no limit)")
	fs.BoolVar(&cfg.AbortOnFailure, "abort-on-failure", false, "stop the whole job when a rank fails")
	fs.IntVar(&cfg.Replicas, "r", 1, "`replicas` of each rank (transparent replication: a rank lives while one of its replicas does)")
	fs.IntVar(&cfg.Spares, "spares", 0, "`spare` processes that take the rank of a process that dies (programs using package resil)")
	fs.BoolVar(&cfg.Encrypt, "encrypt", false, "encrypt the ranks' connections (TLS 1.3 with a certificate made for the job)")
	respawn := respawnFlag{limit: &cfg.Respawn}
	fs.Var(respawn, "respawn", "start a process that a signal ends again, as a spare (needs --spares); --respawn=K: at most K times per process, default 3")
	hf := addHostsFlags(fs)
	if err := c.parse(fs, c.args, math.MaxInt); err != nil {
		return err
	}
	rest := fs.Args()
	switch {
	case !flagSet(fs, "n"):
		return usagef("-n is required: the number of ranks, 1 to %d", maxRunRanks)
	case cfg.N < 1 || cfg.N > maxRunRanks:
		return usagef("-n %d: want 1 to %d ranks", cfg.N, maxRunRanks)
	case cfg.Fanout != 0 && cfg.Fanout < 2 || cfg.Fanout&(cfg.Fanout-1) != 0:
		return usagef("--fanout %d: want a power of two from 2", cfg.Fanout)
	case cfg.Detector != "" && !slices.Contains(launch.Detectors, cfg.Detector):
		return usagef("--detector %q: want brr, dbrr or heartbeat", cfg.Detector)
	case cfg.Timeout < 0:
		return usagef("--timeout %v: negative", cfg.Timeout)
	case cfg.Replicas < 1 || cfg.Replicas > launch.MaxReplicas:
		return usagef("-r %d: want 1 to %d replicas", cfg.Replicas, launch.MaxReplicas)
	case cfg.Spares < 0 || cfg.Spares > maxRunRanks:
		return usagef("--spares %d: want 0 to %d spare processes", cfg.Spares, maxRunRanks)
	case cfg.Spares > 0 && cfg.Replicas > 1:
		return usagef("--spares with -r %d: spares and replicas do not go together", cfg.Replicas)
	case cfg.Respawn > 0 && cfg.Spares < 1:
		return usagef("--respawn needs --spares: a process started again joins as a spare, which only a program that takes spares (package resil) uses")
	case len(rest) == 0 || rest[0] == "--" && len(rest) == 1:
		return usagef("missing the PROGRAM to run")
	}
	for _, k := range kills {
		if procs := cfg.N*cfg.Replicas + cfg.Spares; k.Rank >= procs {
			if cfg.Spares > 0 {
				return usagef("--kill %d@%v: process %d is out of range for -n %d --spares %d (0 to %d; the spares are processes %d to %d)", k.Rank, k.After, k.Rank, cfg.N, cfg.Spares, procs-1, cfg.N, procs-1)
			}
			if cfg.Replicas > 1 {
				return usagef("--kill %d@%v: process %d is out of range for -n %d -r %d (0 to %d; replica j of rank r is process j·%d+r)", k.Rank, k.After, k.Rank, cfg.N, cfg.Replicas, procs-1, cfg.N)
			}
			return usagef("--kill %d@%v: rank %d is out of range for -n %d (0 to %d)", k.Rank, k.After, k.Rank, cfg.N, cfg.N-1)
		}
	}
	cfg.Kills = kills
	cfg.StartWithout = !cfg.AbortOnFailure
	if *hf.hosts == "" && *hf.dialOutOnly != "" {
		return usagef("--dial-out-only names daemons: it goes with --hosts")
	}
	if *hf.hosts != "" && (len(kills) > 0 || cfg.AbortOnFailure) {
		return usagef("--kill and --abort-on-failure are for jobs on this machine, not with --hosts yet")
	}
	if *hf.hosts == "" {
		cfg.Notices = func(line string) { fmt.Fprintf(c.stderr, "cohort run: %s\n", line) }
	}
	if rest[0] == "--" {
		rest = rest[1:]
	}
	program, args := rest[0], rest[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	cfg.Args = args
	// The ranks say when a link of theirs goes through a third rank and
	// when it is direct again; their standard error brings it here.
	cfg.Env = append(cfg.Env, launch.EnvLinkNotices+"=1")
	path, cleanup, err := resolveProgram(ctx, program, c.stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.Program = path
	if *hf.hosts != "" {
		return runOnHosts(ctx, c, hf, cfg)
	}
	job, err := launch.Start(ctx, cfg)
	if err != nil {
		return err
	}
	exits, err := job.Wait()
	for _, m := range job.MissedKills() {
		fmt.Fprintf(c.stderr, "cohort run: --kill %d@%v did not happen: %s\n", m.Rank, m.After, m.Why)
	}
	if cfg.Replicas > 1 && err != nil {
		err = replicaOutcome(c, cfg, exits, err)
	}
	if cfg.Spares > 0 && err != nil {
		err = spareOutcome(c, cfg.N+cfg.Spares, err)
	}
	var fe *launch.FailedError
	if errors.As(err, &fe) {
		if errors.Is(fe.Cause, context.Canceled) {
			return context.Canceled
		}
		n := cfg.N + cfg.Spares + job.Restarts() // with spares, exits name processes
		if cfg.Replicas > 1 && fe.Cause != nil {
			n *= cfg.Replicas // the launcher's failure: counted in processes
		}
		return runFailure(n, fe)
	}
	return err
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// replicaOutcome judges a replicated job by its logical ranks: a rank
// succeeded if one of its replicas exited with status 0. The replicas lost
// meanwhile are reported; the error stands only if some rank has no
// successful replica (or the launcher stopped the job).
func replicaOutcome(c *call, cfg launch.Config, exits []launch.Exit, err error) error {
	var fe *launch.FailedError
	if !errors.As(err, &fe) || fe.Cause != nil {
		return err
	}
	okRank := make([]bool, cfg.N)
	for _, x := range exits {
		if x.OK() {
			okRank[x.Rank%cfg.N] = true
		}
	}
	for _, x := range fe.Failed {
		if okRank[x.Rank%cfg.N] {
			fmt.Fprintf(c.stderr, "cohort run: replica %d of rank %d (process %d) lost: %s; the rank lived on\n", x.Rank/cfg.N, x.Rank%cfg.N, x.Rank, x.How())
		}
	}
	if !slices.Contains(okRank, false) {
		return nil
	}
	// The failure in the program's terms: the logical ranks that lost
	// every replica, each with how its first replica ended.
	logical := &launch.FailedError{Cause: fe.Cause}
	for r, ok := range okRank {
		if ok {
			continue
		}
		var procs []string
		var first *launch.Exit
		for _, x := range fe.Failed {
			if x.Rank%cfg.N == r {
				procs = append(procs, fmt.Sprint(x.Rank))
				if first == nil {
					first = &x
				}
			}
		}
		if first == nil {
			continue
		}
		fmt.Fprintf(c.stderr, "cohort run: rank %d lost every replica (processes %s)\n", r, strings.Join(procs, ", "))
		x := *first
		x.Rank = r
		logical.Failed = append(logical.Failed, x)
	}
	return logical
}

// spareOutcome judges a job with spares, started with procs processes:
// the processes the launcher killed were replaced (a spare took each
// one's rank, or it was an idle spare), and so were the restarts
// (--respawn) that ended before they joined (they held nothing), so the
// job succeeded if every other process exited with status 0; those lost
// are reported. A process that failed on its own (the program's verdict:
// no spare left, a state lost) stands.
func spareOutcome(c *call, procs int, err error) error {
	var fe *launch.FailedError
	if !errors.As(err, &fe) || fe.Cause != nil {
		return err
	}
	replaced := func(x launch.Exit) bool { return x.Killed || x.Rank >= procs && !x.Registered }
	for _, x := range fe.Failed {
		if !replaced(x) {
			return err
		}
	}
	for _, x := range fe.Failed {
		if x.Rank >= procs {
			fmt.Fprintf(c.stderr, "cohort run: process %d (process %d started again) ended before it joined (%s); the job went on without it\n", x.Rank, x.Of, x.How())
			continue
		}
		fmt.Fprintf(c.stderr, "cohort run: process %d lost (%s); the job went on without it\n", x.Rank, x.How())
	}
	return nil
}

// defaultRespawns is how many times --respawn starts each process of the
// job's start again when no K is given.
const defaultRespawns = 3

// respawnFlag is --respawn, alone (defaultRespawns) or --respawn=K.
type respawnFlag struct{ limit *int }

func (f respawnFlag) IsBoolFlag() bool { return true }

func (f respawnFlag) String() string {
	if f.limit == nil || *f.limit == 0 {
		return ""
	}
	return strconv.Itoa(*f.limit)
}

func (f respawnFlag) Set(s string) error {
	switch s {
	case "true":
		*f.limit = defaultRespawns
		return nil
	case "false":
		*f.limit = 0
		return nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || k > launch.MaxNewcomers {
		return fmt.Errorf("%q: want --respawn alone or --respawn=K, K from 0 to %d restarts per process", s, launch.MaxNewcomers)
	}
	*f.limit = k
	return nil
}

// runFailure says which ranks failed and how, in the command's terms.
func runFailure(n int, fe *launch.FailedError) error {
	how := func(x launch.Exit) string {
		if x.Killed && x.Signal == syscall.SIGKILL {
			return "killed by --kill (SIGKILL)"
		}
		return x.How()
	}
	// The crashes injected first: they are usually the cause of the rest.
	failed := slices.Clone(fe.Failed)
	slices.SortStableFunc(failed, func(a, b launch.Exit) int {
		switch {
		case a.Killed == b.Killed:
			return 0
		case a.Killed:
			return -1
		}
		return 1
	})
	msg := launch.FormatExits(failed, how)
	if k := len(fe.Failed); k > 1 {
		msg = fmt.Sprintf("%d of %d", k, n) + strings.TrimPrefix(msg, fmt.Sprint(k)) // "3 of 8 ranks failed: …"
	}
	if fe.Cause != nil {
		cause := strings.TrimPrefix(fe.Cause.Error(), "launch: ")
		if msg == "" {
			return errors.New(cause)
		}
		return fmt.Errorf("%s; %s", cause, msg)
	}
	return errors.New(msg)
}

// errBuild: the Go package of PROGRAM did not build.
var errBuild = errors.New("the Go package did not build")

// resolveProgram finds the executable of PROGRAM: an existing file is
// run as it is; a directory must hold a Go package, built with 'go build'
// into a temporary directory (removed by cleanup); a name without a slash
// is looked up in PATH; any other path is taken for a Go import path and
// built. The build's output goes to stderr.
func resolveProgram(ctx context.Context, program string, stderr interface{ Write([]byte) (int, error) }) (path string, cleanup func(), err error) {
	none := func() {}
	info, statErr := os.Stat(program)
	switch {
	case statErr == nil && info.IsDir():
		gofiles, _ := filepath.Glob(filepath.Join(program, "*.go"))
		if len(gofiles) == 0 {
			return "", none, usagef("%s is a directory without Go files, not a program", program)
		}
		// Built from inside the directory, so that its own module (if it
		// is outside the current one) is found.
		return buildProgram(ctx, program, ".", stderr)
	case statErr == nil:
		if info.Mode()&0o111 == 0 {
			return "", none, usagef("%s is not executable", program)
		}
		abs, err := filepath.Abs(program)
		if err != nil {
			return "", none, err
		}
		return abs, none, nil
	case !strings.ContainsRune(program, '/'):
		p, err := exec.LookPath(program)
		if err != nil {
			return "", none, usagef("program %q: not a file, a directory or a command in PATH", program)
		}
		return p, none, nil
	case filepath.IsAbs(program) || strings.HasPrefix(program, "."):
		return "", none, usagef("program %s: no such file or directory", program)
	default:
		return buildProgram(ctx, "", program, stderr)
	}
}

// buildProgram builds the Go package pkg (in directory dir, if not "")
// into a temporary directory.
func buildProgram(ctx context.Context, dir, pkg string, stderr interface{ Write([]byte) (int, error) }) (string, func(), error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		} else {
			return "", func() {}, fmt.Errorf("building %s: the go command is not in PATH", pkg)
		}
	}
	tmp, err := os.MkdirTemp("", "cohort-run-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	name := filepath.Base(filepath.Clean(filepath.Join(dir, pkg)))
	if abs, err := filepath.Abs(filepath.Join(dir, pkg)); err == nil && dir != "" {
		name = filepath.Base(abs)
	}
	out := filepath.Join(tmp, name)
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		if ctx.Err() != nil {
			return "", func() {}, ctx.Err()
		}
		return "", func() {}, fmt.Errorf("%w: go build %s: %v", errBuild, filepath.Join(dir, pkg), err)
	}
	if info, err := os.Stat(out); err != nil || info.Mode()&0o111 == 0 {
		cleanup()
		return "", func() {}, usagef("%s is not a main package (no program to run)", filepath.Join(dir, pkg))
	}
	return out, cleanup, nil
}
