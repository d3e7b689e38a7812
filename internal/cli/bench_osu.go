package cli

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
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
//	tcp        raw Go TCP sockets between processes started the same way
//	           (addresses exchanged through the launcher's rendezvous)
//	mpi-tcp    Open MPI, --mca btl self,tcp on the loopback interface
//	mpi-vader  Open MPI, --mca btl self,vader (shared memory)
//
// The Open MPI columns come from osu/osu.c, embedded here, built with mpicc
// into a temporary directory; they are left out when mpicc or mpirun is
// absent. Our and the raw TCP ranks are this executable started as the
// hidden command `cohort osu-worker`, with the same arguments as osu.c.

//go:embed osu/osu.c
var osuSource []byte

// osuLargeMessage is OSU's LARGE_MESSAGE_SIZE: larger messages use the
// "large" iteration counts.
const osuLargeMessage = 8192

// osuBench describes one OSU-style benchmark.
type osuBench struct {
	mode     string // latency, bw, allreduce (the first argument of osu.c)
	ranks    int    // processes per job
	minSize  int    // the first size (0, 1 or 8 bytes)
	unit     string // µs or MB/s
	higher   bool   // a higher figure is better (bandwidth)
	loop     int    // iterations, small messages (OSU's defaults)
	skip     int    // warm-up iterations, small messages
	loopL    int    // iterations, large messages
	skipL    int    // warm-up iterations, large messages
	window   int    // messages in flight per iteration (bw)
	maxSize  int
	impls    []string
	progress io.Writer
}

// osuImpls lists the implementations in table order.
var osuImpls = []string{"ours", "tcp", "mpi-tcp", "mpi-vader"}

var osuImplTitle = map[string]string{"ours": "cohort", "tcp": "raw TCP", "mpi-tcp": "OMPI tcp", "mpi-vader": "OMPI vader"}

// sizes returns the message sizes: minSize (0 or a power of two), then
// every power of two up to maxSize.
func (b *osuBench) sizes() []int {
	var out []int
	if b.minSize == 0 {
		out = append(out, 0)
	}
	for s := max(1, b.minSize); s <= b.maxSize; s *= 2 {
		out = append(out, s)
	}
	return out
}

// args are the arguments of osu.c and of the worker after the mode.
func (b *osuBench) args() []string {
	a := []string{strconv.Itoa(b.loop), strconv.Itoa(b.skip), strconv.Itoa(b.loopL), strconv.Itoa(b.skipL), strconv.Itoa(max(1, b.window))}
	for _, s := range b.sizes() {
		a = append(a, strconv.Itoa(s))
	}
	return a
}

// parseFlags declares the flags every OSU-style benchmark shares (and
// those extra declares), parses c's arguments and applies them to b.
func (b *osuBench) parseFlags(c *call, extra func(fs *flag.FlagSet)) error {
	fs := c.newFlags()
	maxText, implText := "4M", strings.Join(osuImpls, ",")
	iters, skip := 0, -1
	fs.StringVar(&maxText, "max", maxText, "largest message `size` in bytes (suffix K or M allowed)")
	fs.IntVar(&iters, "iters", 0, "timed `iterations` for small messages (0: OSU's default); large ones get OSU's proportion of it")
	fs.IntVar(&skip, "skip", -1, "warm-up `iterations` for small messages (-1: OSU's default)")
	fs.StringVar(&implText, "impl", implText, "comma-separated `implementations` to run: ours, tcp, mpi-tcp, mpi-vader (Open MPI ones are skipped when absent)")
	if extra != nil {
		extra(fs)
	}
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	size, err := parseSize(maxText)
	if err != nil {
		return usagef("--max %q: %v", maxText, err)
	}
	if size < max(1, b.minSize) || size > 64<<20 {
		return usagef("--max %s: want %d bytes to 64M", maxText, max(1, b.minSize))
	}
	b.maxSize = size
	if iters < 0 {
		return usagef("--iters %d: want at least 1", iters)
	}
	if iters > 0 {
		b.loopL = max(1, iters*b.loopL/b.loop)
		b.loop = iters
	}
	if skip < -1 {
		return usagef("--skip %d: want 0 or more", skip)
	}
	if skip >= 0 {
		b.skipL = skip * b.skipL / max(1, b.skip)
		b.skip = skip
	}
	b.impls = nil
	for _, f := range strings.Split(implText, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(osuImpls, f) {
			return usagef("--impl %q: unknown implementation %q (want %s)", implText, f, strings.Join(osuImpls, ", "))
		}
		if !slices.Contains(b.impls, f) {
			b.impls = append(b.impls, f)
		}
	}
	b.progress = c.stderr
	return nil
}

// parseSize reads a size in bytes: "4096", "64K", "4M".
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errors.New("not a size in bytes (e.g. 4096, 64K, 4M)")
	}
	return n * mult, nil
}

// osuResult is one implementation's figures by size, or why it is absent.
type osuResult struct {
	impl    string
	figures map[int]float64
	absent  string // why it did not run ("" if it ran)
}

// run measures every implementation and prints the table.
func (b *osuBench) run(ctx context.Context, c *call, title string) error {
	start := time.Now()
	results, err := b.measure(ctx)
	if err != nil {
		return err
	}
	b.writeTable(c.stdout, title, results)
	fmt.Fprintf(c.stdout, "(%.0f s; %s)\n", time.Since(start).Seconds(), b.loops())
	return nil
}

// loops describes the iteration counts.
func (b *osuBench) loops() string {
	s := fmt.Sprintf("loops %d/%d, warm-up %d/%d for sizes ≤/> %d B", b.loop, b.loopL, b.skip, b.skipL, osuLargeMessage)
	if b.mode == "bw" {
		s += fmt.Sprintf(", window %d", b.window)
	}
	return s
}

// measure runs every implementation in turn.
func (b *osuBench) measure(ctx context.Context) ([]osuResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var mpiProg, mpiAbsent string
	var cleanup func()
	defer func() {
		if cleanup != nil {
			cleanup()
		}
	}()
	var results []osuResult
	for _, impl := range b.impls {
		r := osuResult{impl: impl}
		fmt.Fprintf(b.progress, "bench: %s %s on %d processes…\n", impl, b.mode, b.ranks)
		switch impl {
		case "ours", "tcp":
			r.figures, err = b.runWorkers(ctx, exe, impl)
		default:
			if mpiProg == "" && mpiAbsent == "" {
				mpiProg, cleanup, mpiAbsent, err = buildOSU(ctx)
			}
			r.absent = mpiAbsent
			if r.absent == "" && err == nil {
				r.figures, err = b.runMPI(ctx, mpiProg, strings.TrimPrefix(impl, "mpi-"))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", impl, err)
		}
		if r.absent != "" {
			fmt.Fprintf(b.progress, "bench: %s skipped: %s\n", impl, r.absent)
		}
		results = append(results, r)
	}
	return results, nil
}

// runWorkers runs a job of b.ranks workers of this executable and reads
// rank 0's figures.
func (b *osuBench) runWorkers(ctx context.Context, exe, impl string) (map[int]float64, error) {
	var out bytes.Buffer
	args := append([]string{"osu-worker", b.mode, impl}, b.args()...)
	job, err := launch.Start(ctx, launch.Config{N: b.ranks, Program: exe, Args: args,
		Stdout: &out, Stderr: b.progress, Prefix: false, AbortOnFailure: true, Timeout: 30 * time.Minute})
	if err != nil {
		return nil, err
	}
	if _, err := job.Wait(); err != nil {
		return nil, err
	}
	return parseFigures(out.Bytes(), b.sizes())
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
func (b *osuBench) runMPI(ctx context.Context, prog, btl string) (map[int]float64, error) {
	args := []string{"-np", strconv.Itoa(b.ranks), "--oversubscribe", "--mca", "pml", "ob1", "--mca", "btl", "self," + btl}
	if btl == "tcp" {
		// Open MPI leaves out the loopback interface by default; our
		// ranks talk over 127.0.0.1 too.
		args = append(args, "--mca", "btl_tcp_if_include", "lo")
	}
	args = append(args, prog, b.mode)
	args = append(args, b.args()...)
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, b.progress
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("mpirun %s: %w", strings.Join(args, " "), err)
	}
	return parseFigures(out.Bytes(), b.sizes())
}

// parseFigures reads "size value" lines and checks that every size is
// there.
func parseFigures(out []byte, sizes []int) (map[int]float64, error) {
	figs := map[int]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
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

// writeTable prints size, each implementation's figure, and ours ÷ each
// baseline.
func (b *osuBench) writeTable(w io.Writer, title string, results []osuResult) {
	fmt.Fprintf(w, "# %s\n", title)
	var ran []osuResult
	for _, r := range results {
		if r.absent == "" {
			ran = append(ran, r)
		} else {
			fmt.Fprintf(w, "# %s: not run (%s)\n", osuImplTitle[r.impl], r.absent)
		}
	}
	var ours *osuResult
	for i := range ran {
		if ran[i].impl == "ours" {
			ours = &ran[i]
		}
	}
	fmt.Fprintf(w, "%10s", "size (B)")
	for _, r := range ran {
		fmt.Fprintf(w, " %14s", osuImplTitle[r.impl]+" "+b.unit)
	}
	if ours != nil {
		for _, r := range ran {
			if r.impl != "ours" {
				fmt.Fprintf(w, " %14s", "÷"+osuImplTitle[r.impl])
			}
		}
	}
	fmt.Fprintln(w)
	for _, s := range b.sizes() {
		fmt.Fprintf(w, "%10d", s)
		for _, r := range ran {
			fmt.Fprintf(w, " %14.2f", r.figures[s])
		}
		if ours != nil {
			for _, r := range ran {
				if r.impl == "ours" {
					continue
				}
				if r.figures[s] > 0 {
					fmt.Fprintf(w, " %14.2f", ours.figures[s]/r.figures[s])
				} else {
					fmt.Fprintf(w, " %14s", "—")
				}
			}
		}
		fmt.Fprintln(w)
	}
	if ours != nil && len(ran) > 1 {
		if b.higher {
			fmt.Fprintln(w, "(÷X = cohort's figure over X's: above 1, cohort is faster)")
		} else {
			fmt.Fprintln(w, "(÷X = cohort's figure over X's: below 1, cohort is faster)")
		}
	}
}
