package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/internal/launchbench"
)

func init() {
	registerBench(&benchmark{
		name:    "launch",
		summary: "time from a launcher's start to every rank in its first view: cohort run, srun, the peer-to-peer middleware",
		help: `The launch benchmark starts jobs of -n ranks with each launcher and
measures the time from the launcher's start to the moment the last rank
installed its first membership view (it can then communicate), and to the
end of the job (every rank finalized after a barrier). Each rank runs
'cohort launch-worker' (this executable): comm.Init, then the time of its
first view on one line.

Launchers:
  local  package launch on this machine, as 'cohort run' starts a job
         (rendezvous with the launcher over authenticated TCP)
  slurm  'srun -O -n N --mpi=pmi2' on the SLURM cluster that answers here
         (SLURM_CONF, /etc/slurm, or scripts/slurm-up's); the ranks find
         each other through SLURM's PMI-2 key-value space. The time
         includes slurmctld's allocation of the job.
  hosts  the peer-to-peer middleware, as 'cohort run --hosts … --alloc
         spread' starts a job: a supernode and 5 peer daemons (16
         processes of a job each, so at most 80 ranks), each on its own
         host, a network namespace of this machine, started once for the
         whole benchmark with this executable and removed at its end;
         the job is submitted from this process. The time includes the
         submission: the supernode's peer list, the pings, the
         reservations, the staging of the program on every host used, and
         the rendezvous over the hosts' links. Needs root (network
         namespaces, the ip command).

The table gives the median over --runs runs with the minimum and maximum;
launchers are alternated within each repetition. The baseline, "empty job",
is the same launcher running the program true on as many ranks (start to
end): what the launcher itself costs, before any cohort code runs.

Examples:
  cohort bench launch
  cohort bench launch --slurm
  cohort bench launch --hosts          (local and hosts, 4, 16 and 64 ranks)
  cohort bench launch --launchers local,slurm -n 8,32 --runs 5`,
		run: runBenchLaunch,
	})
	register(&command{
		name:     "launch-worker",
		synopsis: "",
		summary:  "one rank of `cohort bench launch`",
		help:     "Launch-worker is one rank of `cohort bench launch`: comm.Init, then it prints \"first-view RANK UNIXNANO\" when its first view is installed, waits in a barrier for every rank and leaves.",
		hidden:   true,
		run: func(ctx context.Context, c *call) error {
			return launchbench.Worker(ctx, c.stdout)
		},
	})
}

func runBenchLaunch(ctx context.Context, c *call) error {
	fs := c.newFlags()
	sizes := []int{8, 32}
	fs.Var((*intList)(&sizes), "n", "comma-separated numbers of `ranks`")
	runs := fs.Int("runs", 5, "launches per launcher and size")
	withSlurm := fs.Bool("slurm", false, "add the slurm launcher (same as --launchers local,slurm)")
	withHosts := fs.Bool("hosts", false, "add the hosts launcher, the middleware on 5 hosts of this machine (needs root); -n defaults to 4,16,64")
	names := fs.String("launchers", "local", "comma-separated `launchers`: "+launcherNames())
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	list := strings.Split(*names, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	if *withSlurm && !slices.Contains(list, "slurm") {
		list = append(list, "slurm")
	}
	if *withHosts && !slices.Contains(list, "hosts") {
		list = append(list, "hosts")
	}
	sizesGiven := false
	fs.Visit(func(f *flag.Flag) { sizesGiven = sizesGiven || f.Name == "n" })
	if slices.Contains(list, "hosts") && !sizesGiven {
		sizes = []int{4, 16, 64}
	}
	for _, n := range sizes {
		if n < 1 || n > 1024 {
			return usagef("-n %d: want 1 to 1024 ranks", n)
		}
		if n > launchbench.MaxHostsRanks && slices.Contains(list, "hosts") {
			return usagef("-n %d: the hosts launcher takes at most %d ranks", n, launchbench.MaxHostsRanks)
		}
	}
	if *runs < 1 {
		return usagef("--runs %d: want at least 1", *runs)
	}
	var ls []launchbench.Launcher
	for _, n := range list {
		l, ok := launchbench.Lookup(n)
		if !ok {
			return usagef("--launchers: %q is not one of %s", n, launcherNames())
		}
		ls = append(ls, l)
	}
	// A launcher that holds something across runs (the hosts' rig) is
	// closed at the end, whatever happened.
	defer func() {
		for _, l := range ls {
			if cl, ok := l.(io.Closer); ok {
				if err := cl.Close(); err != nil {
					fmt.Fprintf(c.stderr, "launcher %s: closing: %v\n", l.Name(), err)
				}
			}
		}
	}()
	for _, l := range ls {
		if err := l.Check(ctx); err != nil {
			return fmt.Errorf("launcher %s cannot run here: %w", l.Name(), err)
		}
	}
	prog, err := os.Executable()
	if err != nil {
		return err
	}
	start := time.Now()
	empty, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("the baseline needs the program true: %w", err)
	}
	results, err := launchbench.Bench(ctx, ls, sizes, *runs, prog, []string{"launch-worker"}, empty, func(r launchbench.Result) {
		fmt.Fprintf(c.stderr, "\r%s n=%d: run %d/%d ", r.Launcher, r.N, len(r.Runs), *runs)
	})
	fmt.Fprint(c.stderr, "\r\033[K")
	fmt.Fprintf(c.stdout, "Launch: from the launcher's start to every rank in its first view, and to the job's end\n(median of %d runs, [min, max]; %d CPUs)\n\n", *runs, runtime.NumCPU())
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "launcher\tranks\tfirst view\t[min, max]\tjob end\t[min, max]\tempty job\t[min, max]\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	for _, r := range results {
		if len(r.Runs) == 0 {
			continue
		}
		m, lo, hi := r.Stat(func(x launchbench.Run) time.Duration { return x.FirstView })
		em, elo, ehi := r.Stat(func(x launchbench.Run) time.Duration { return x.End })
		tm, tlo, thi := r.Stat(func(x launchbench.Run) time.Duration { return x.Empty })
		fmt.Fprintf(tw, "%s\t%d\t%s\t[%s, %s]\t%s\t[%s, %s]\t%s\t[%s, %s]\t\n", r.Launcher, r.N, ms(m), ms(lo), ms(hi), ms(em), ms(elo), ms(ehi), ms(tm), ms(tlo), ms(thi))
	}
	tw.Flush()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "(%.0f s; cohort bench launch --launchers %s -n %s --runs %d)\n", time.Since(start).Seconds(), strings.Join(list, ","), (*intList)(&sizes), *runs)
	return nil
}

func launcherNames() string {
	var names []string
	for _, l := range launchbench.Launchers() {
		names = append(names, l.Name())
	}
	return strings.Join(names, ", ")
}
