package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// The OSU-style benchmarks (p2p, bw, allreduce) run the loops of the OSU
// micro-benchmarks (osu_latency, osu_bw, osu_allreduce) over several
// implementations in one invocation and print them side by side:
//
//	ours       package comm over transport/tcp, ranks started by package launch
//	           (on one host over shared memory set up on its same-host Unix
//	           sockets, the default)
//	ours-unix  the same with COHORT_SHM=off: over the Unix sockets themselves
//	ours-tcp   the same with COHORT_UNIX=off: over loopback TCP, as between hosts
//	           but without the records that protect frames between hosts
//	ours-mac   the same with COHORT_INTEGRITY=on: over loopback TCP with the
//	           frames in authenticated records, as between hosts
//	ours-tls   the same as ours with the job encrypted (launch's Encrypt)
//	tcp        raw Go TCP sockets between processes started the same way
//	           (addresses exchanged through the launcher's rendezvous)
//	mpi-tcp    Open MPI, --mca btl self,tcp on the loopback interface
//	mpi-vader  Open MPI, --mca btl self,vader (shared memory)
//
// The Open MPI columns come from osu/osu.c, embedded here, built with mpicc
// into a temporary directory; they are left out when mpicc or mpirun is
// absent. Our and the raw TCP ranks are this executable started as the
// hidden command `cohort osu-worker` (which calls [RunOSURank]), with the
// same arguments as osu.c.

//go:embed osu/osu.c
var osuSource []byte

// OSULargeMessage is OSU's LARGE_MESSAGE_SIZE: larger messages use the
// "large" iteration counts.
const OSULargeMessage = 8192

// OSU describes one OSU-style benchmark.
type OSU struct {
	Mode     string   // latency, bw, allreduce (the first argument of osu.c)
	Ranks    int      // processes per job
	MinSize  int      // the first size (0, 1 or 8 bytes)
	Unit     string   // µs or MB/s
	Higher   bool     // a higher figure is better (bandwidth)
	Loop     int      // iterations, small messages (OSU's defaults)
	Skip     int      // warm-up iterations, small messages
	LoopL    int      // iterations, large messages
	SkipL    int      // warm-up iterations, large messages
	Window   int      // messages in flight per iteration (bw)
	MaxSize  int      // the largest size in bytes
	Impls    []string // implementations to run, in order (of OSUImpls)
	Replicas int      // cohort's ranks each run as this many replicas (0, 1: none)
	// Rounds is how many times every implementation runs (0, 1: once).
	// The implementations alternate within each round, and each figure
	// is the median of its rounds: a shared machine's slow and fast
	// phases, which last minutes and moved one run's ratios by twice,
	// then fall on every implementation alike.
	Rounds   int
	Progress io.Writer // where progress lines go
	// CPUProfile, when set, is a directory where each rank of cohort's and
	// the raw TCP jobs writes a CPU profile of its run (go tool pprof):
	// IMPL-MODE-rankN.pprof.
	CPUProfile string
}

// osuProfileEnv names the profile a rank writes (a path without the rank
// and extension); set by [OSU.Measure] when CPUProfile is.
const osuProfileEnv = "COHORT_BENCH_CPUPROFILE"

// OSUImpls lists the implementations in table order.
var OSUImpls = []string{"ours", "ours-unix", "ours-tcp", "ours-mac", "ours-tls", "tcp", "shm", "mpi-tcp", "mpi-vader"}

var osuImplTitle = map[string]string{"ours": "cohort", "ours-unix": "cohort Unix", "ours-tcp": "cohort TCP", "ours-mac": "cohort TCP+MAC", "ours-tls": "cohort TLS", "tcp": "raw TCP", "shm": "raw shm", "mpi-tcp": "OMPI tcp", "mpi-vader": "OMPI vader"}

// osuUnixEnv is the environment of cohort's ranks per implementation:
// the same-host paths on for ours (whatever the caller's environment
// says), shared memory off for ours-unix (comm's COHORT_SHM), the Unix
// socket off for ours-tcp (COHORT_UNIX) and ours-mac, which also puts
// the frames in records (COHORT_INTEGRITY); ours-tls keeps to the socket (TLS
// does not move to shared memory).
var osuUnixEnv = map[string][]string{
	"ours":      {"COHORT_UNIX=on", "COHORT_SHM=on"},
	"ours-unix": {"COHORT_UNIX=on", "COHORT_SHM=off"},
	"ours-tls":  {"COHORT_UNIX=on"},
	"ours-tcp":  {"COHORT_UNIX=off", "COHORT_INTEGRITY=auto"},
	"ours-mac":  {"COHORT_UNIX=off", "COHORT_INTEGRITY=on"},
}

// Sizes returns the message sizes: minSize (0 or a power of two), then
// every power of two up to maxSize.
func (b *OSU) Sizes() []int {
	var out []int
	if b.MinSize == 0 {
		out = append(out, 0)
	}
	for s := max(1, b.MinSize); s <= b.MaxSize; s *= 2 {
		out = append(out, s)
	}
	return out
}

// Args are the arguments of osu.c and of the worker after the mode.
func (b *OSU) Args() []string {
	a := []string{strconv.Itoa(b.Loop), strconv.Itoa(b.Skip), strconv.Itoa(b.LoopL), strconv.Itoa(b.SkipL), strconv.Itoa(max(1, b.Window))}
	for _, s := range b.Sizes() {
		a = append(a, strconv.Itoa(s))
	}
	return a
}

// OSUResult is one implementation's figures by size, or why it is absent.
type OSUResult struct {
	Impl    string
	Figures map[int]float64 // by size: the median of PerRound
	// PerRound holds each round's figures by size, in round order.
	PerRound []map[int]float64
	// Allocs is, per size, the heap allocations of rank 0's process per
	// message (per call for allreduce) in the timed loop, the most of any
	// round; cohort's rows only, nil for the others.
	Allocs map[int]float64
	Absent string // why it did not run ("" if it ran)
}

// Loops describes the iteration counts.
func (b *OSU) Loops() string {
	s := fmt.Sprintf("loops %d/%d, warm-up %d/%d for sizes ≤/> %d B", b.Loop, b.LoopL, b.Skip, b.SkipL, OSULargeMessage)
	if b.Mode == "bw" {
		s += fmt.Sprintf(", window %d", b.Window)
	}
	return s
}

// Measure runs every implementation in turn, b.Rounds times over.
func (b *OSU) Measure(ctx context.Context) ([]OSUResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var mpi osuMPI
	defer mpi.close()
	rounds := max(1, b.Rounds)
	results := make([]OSUResult, len(b.Impls))
	for i, impl := range b.Impls {
		results[i].Impl = impl
	}
	for round := 1; round <= rounds; round++ {
		for i, impl := range b.Impls {
			r := &results[i]
			if r.Absent != "" {
				continue
			}
			of := ""
			if rounds > 1 {
				of = fmt.Sprintf(", round %d of %d", round, rounds)
			}
			fmt.Fprintf(b.Progress, "bench: %s %s on %d processes%s…\n", impl, b.Mode, b.Ranks, of)
			figs, allocs, absent, err := b.measureOnce(ctx, exe, impl, &mpi)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", impl, err)
			}
			if absent != "" {
				r.Absent = absent
				fmt.Fprintf(b.Progress, "bench: %s skipped: %s\n", impl, absent)
				continue
			}
			r.PerRound = append(r.PerRound, figs)
			if allocs != nil && r.Allocs == nil {
				r.Allocs = map[int]float64{}
			}
			for s, a := range allocs {
				r.Allocs[s] = max(r.Allocs[s], a)
			}
		}
	}
	for i := range results {
		results[i].Figures = medianBySize(results[i].PerRound)
	}
	return results, nil
}

// osuMPI is the OSU program built with mpicc, once per Measure, or why
// Open MPI is absent.
type osuMPI struct {
	built   bool
	prog    string
	absent  string
	cleanup func()
}

func (o *osuMPI) close() {
	if o.cleanup != nil {
		o.cleanup()
	}
}

// measureOnce runs impl once and returns its figures and, for ours, its
// allocations, or why it does not run here (absent).
func (b *OSU) measureOnce(ctx context.Context, exe, impl string, mpi *osuMPI) (figs, allocs map[int]float64, absent string, err error) {
	switch impl {
	case "shm":
		if b.Mode != "latency" {
			return nil, nil, "latency only", nil
		}
		figs, _, err = b.runWorkers(ctx, exe, impl)
	case "ours", "ours-unix", "ours-tcp", "ours-mac", "ours-tls", "tcp":
		figs, allocs, err = b.runWorkers(ctx, exe, impl)
		if impl != "ours" {
			allocs = nil
		}
	default:
		if !mpi.built {
			mpi.built = true
			if mpi.prog, mpi.cleanup, mpi.absent, err = buildOSU(ctx); err != nil {
				return nil, nil, "", err
			}
		}
		if mpi.absent != "" {
			return nil, nil, mpi.absent, nil
		}
		figs, err = b.runMPI(ctx, mpi.prog, strings.TrimPrefix(impl, "mpi-"))
	}
	return figs, allocs, "", err
}

// medianBySize is, per size, the median of the rounds' figures; nil
// without rounds.
func medianBySize(rounds []map[int]float64) map[int]float64 {
	if len(rounds) == 0 {
		return nil
	}
	out := map[int]float64{}
	for s := range rounds[0] {
		v := make([]float64, 0, len(rounds))
		for _, r := range rounds {
			if f, ok := r[s]; ok {
				v = append(v, f)
			}
		}
		slices.Sort(v)
		out[s] = median(v)
	}
	return out
}

// runWorkers runs a job of b.Ranks workers of this executable and reads
// rank 0's figures.
func (b *OSU) runWorkers(ctx context.Context, exe, impl string) (figs, allocs map[int]float64, err error) {
	var out bytes.Buffer
	args := append([]string{"osu-worker", b.Mode, impl}, b.Args()...)
	env := osuUnixEnv[impl]
	if b.CPUProfile != "" {
		env = append(slices.Clip(env), osuProfileEnv+"="+filepath.Join(b.CPUProfile, impl+"-"+b.Mode))
	}
	// A job still running at ctx's deadline or the timeout is stopped
	// with SIGQUIT: its ranks print their goroutine stacks to b.Progress,
	// so the log shows where each waited.
	job, err := launch.Start(ctx, launch.Config{N: b.Ranks, Program: exe, Args: args, Env: env, Encrypt: impl == "ours-tls", Replicas: b.Replicas,
		Stdout: &out, Stderr: b.Progress, Prefix: false, AbortOnFailure: true, Timeout: 30 * time.Minute, DumpStacks: true})
	if err != nil {
		return nil, nil, err
	}
	if _, err := job.Wait(); err != nil {
		return nil, nil, err
	}
	figs, err = parseFigures(out.Bytes(), b.Sizes())
	return figs, parseAllocs(out.Bytes()), err
}

// parseAllocs reads the third field of "size value allocs" lines (absent
// from the baselines' output: then the map is empty).
func parseAllocs(out []byte) map[int]float64 {
	allocs := map[int]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		size, err1 := strconv.Atoi(f[0])
		v, err2 := strconv.ParseFloat(f[2], 64)
		if err1 == nil && err2 == nil {
			allocs[size] = v
		}
	}
	return allocs
}

// buildOSU builds osu.c with mpicc. absent says why Open MPI is not
// there (then err is nil).
func buildOSU(ctx context.Context) (prog string, cleanup func(), absent string, err error) {
	mpicc, err1 := exec.LookPath("mpicc")
	_, err2 := exec.LookPath("mpirun")
	if err1 != nil || err2 != nil {
		return "", nil, "mpicc or mpirun is not in PATH (install Open MPI: openmpi-bin libopenmpi-dev)", nil
	}
	dir, err := os.MkdirTemp("", "cohort-osu-")
	if err != nil {
		return "", nil, "", err
	}
	cleanup = func() { os.RemoveAll(dir) }
	src := filepath.Join(dir, "osu.c")
	if err := os.WriteFile(src, osuSource, 0o644); err != nil {
		cleanup()
		return "", nil, "", err
	}
	prog = filepath.Join(dir, "osu")
	out, err := exec.CommandContext(ctx, mpicc, "-O2", "-o", prog, src).CombinedOutput()
	if err != nil {
		cleanup()
		return "", nil, "", fmt.Errorf("mpicc osu.c: %v\n%s", err, out)
	}
	return prog, cleanup, "", nil
}

// runMPI runs osu.c under mpirun with the given byte transfer layer.
func (b *OSU) runMPI(ctx context.Context, prog, btl string) (map[int]float64, error) {
	args := []string{"-np", strconv.Itoa(b.Ranks), "--oversubscribe", "--mca", "pml", "ob1", "--mca", "btl", "self," + btl}
	if btl == "tcp" {
		// Open MPI leaves out the loopback interface by default; our
		// ranks talk over 127.0.0.1 too.
		args = append(args, "--mca", "btl_tcp_if_include", "lo")
	}
	args = append(args, prog, b.Mode)
	args = append(args, b.Args()...)
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, b.Progress
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("mpirun %s: %w", strings.Join(args, " "), err)
	}
	return parseFigures(out.Bytes(), b.Sizes())
}

// parseFigures reads "size value" lines and checks that every size is
// there.
func parseFigures(out []byte, sizes []int) (map[int]float64, error) {
	figs := map[int]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 && len(f) != 3 {
			continue
		}
		size, err1 := strconv.Atoi(f[0])
		v, err2 := strconv.ParseFloat(f[1], 64)
		if err1 == nil && err2 == nil {
			figs[size] = v
		}
	}
	for _, s := range sizes {
		if _, ok := figs[s]; !ok {
			return nil, fmt.Errorf("no figure for %d bytes in the output:\n%s", s, out)
		}
	}
	return figs, nil
}

// WriteTable prints size, each implementation's figure, and ours ÷ each
// baseline.
func (b *OSU) WriteTable(w io.Writer, title string, results []OSUResult) {
	fmt.Fprintf(w, "# %s\n", title)
	var ran []OSUResult
	for _, r := range results {
		if r.Absent == "" {
			ran = append(ran, r)
		} else {
			fmt.Fprintf(w, "# %s: not run (%s)\n", osuImplTitle[r.Impl], r.Absent)
		}
	}
	var ours *OSUResult
	for i := range ran {
		if ran[i].Impl == "ours" {
			ours = &ran[i]
		}
	}
	fmt.Fprintf(w, "%10s", "size (B)")
	for _, r := range ran {
		fmt.Fprintf(w, " %14s", osuImplTitle[r.Impl]+" "+b.Unit)
	}
	if ours != nil {
		for _, r := range ran {
			if r.Impl != "ours" {
				fmt.Fprintf(w, " %14s", "÷"+osuImplTitle[r.Impl])
			}
		}
	}
	withAllocs := ours != nil && len(ours.Allocs) > 0
	if withAllocs {
		fmt.Fprintf(w, " %12s", "allocs/"+map[bool]string{true: "call", false: "msg"}[b.Mode == "allreduce"])
	}
	fmt.Fprintln(w)
	for _, s := range b.Sizes() {
		fmt.Fprintf(w, "%10d", s)
		for _, r := range ran {
			fmt.Fprintf(w, " %14.2f", r.Figures[s])
		}
		if ours != nil {
			for _, r := range ran {
				if r.Impl == "ours" {
					continue
				}
				if r.Figures[s] > 0 {
					fmt.Fprintf(w, " %14.2f", ours.Figures[s]/r.Figures[s])
				} else {
					fmt.Fprintf(w, " %14s", "—")
				}
			}
		}
		if withAllocs {
			if a, ok := ours.Allocs[s]; ok {
				fmt.Fprintf(w, " %12.2f", a)
			} else {
				fmt.Fprintf(w, " %12s", "—")
			}
		}
		fmt.Fprintln(w)
	}
	if withAllocs {
		fmt.Fprintln(w, "(allocs: cohort's heap allocations in rank 0's process per message, or per call for allreduce, in the timed loop)")
	}
	if rounds := maxRounds(ran); rounds > 1 {
		fmt.Fprintf(w, "(each figure is the median of %d rounds, the implementations alternating within each round; allocs the most of any round)\n", rounds)
	}
	if ours != nil && len(ran) > 1 {
		if b.Higher {
			fmt.Fprintln(w, "(÷X = cohort's figure over X's: above 1, cohort is faster)")
		} else {
			fmt.Fprintln(w, "(÷X = cohort's figure over X's: below 1, cohort is faster)")
		}
	}
}

// maxRounds is the most rounds any of results ran.
func maxRounds(results []OSUResult) int {
	n := 0
	for _, r := range results {
		n = max(n, len(r.PerRound))
	}
	return n
}
