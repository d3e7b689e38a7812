package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
)

// The OSU-style benchmarks (p2p, bw, allreduce; package bench runs them):
// the flags they share, and the table they print.

// parseOSUFlags declares the flags every OSU-style benchmark shares (and
// those extra declares), parses c's arguments and applies them to b.
func parseOSUFlags(c *call, b *bench.OSU, extra func(fs *flag.FlagSet)) error {
	fs := c.newFlags()
	maxText, implText := "4M", strings.Join(bench.OSUImpls, ",")
	iters, skip := 0, -1
	fs.StringVar(&maxText, "max", maxText, "largest message `size` in bytes (suffix K or M allowed)")
	minText := ""
	fs.StringVar(&minText, "min", "", "smallest message `size` in bytes, a power of two (suffix K or M allowed; default: the benchmark's first size)")
	fs.IntVar(&iters, "iters", 0, "timed `iterations` for small messages (0: OSU's default); large ones get OSU's proportion of it")
	fs.IntVar(&skip, "skip", -1, "warm-up `iterations` for small messages (-1: OSU's default)")
	fs.StringVar(&implText, "impl", implText, "comma-separated `implementations` to run: ours (cohort; on one host over shared memory), ours-unix (cohort over Unix sockets, COHORT_SHM=off), ours-tcp (cohort over loopback TCP, COHORT_UNIX=off), ours-mac (the same with the frames in authenticated records as between hosts, COHORT_INTEGRITY=on), ours-tls (cohort with --encrypt), tcp, shm (raw shared memory, latency only), mpi-tcp, mpi-vader (Open MPI ones are skipped when absent)")
	rounds := max(1, b.Rounds)
	fs.IntVar(&rounds, "rounds", rounds, "run every implementation this many `times`, alternating them within each round; each figure is the median of its rounds")
	fs.StringVar(&b.CPUProfile, "cpuprofile", "", "write each rank's CPU profile of cohort's and the raw TCP runs into this `directory` (IMPL-MODE-rankN.pprof, for go tool pprof)")
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
	if size < max(1, b.MinSize) || size > 64<<20 {
		return usagef("--max %s: want %d bytes to 64M", maxText, max(1, b.MinSize))
	}
	b.MaxSize = size
	if minText != "" {
		lo, err := parseSize(minText)
		if err != nil {
			return usagef("--min %q: %v", minText, err)
		}
		if lo < max(1, b.MinSize) || lo > size || lo&(lo-1) != 0 {
			return usagef("--min %s: want a power of two from %d bytes to --max (%d)", minText, max(1, b.MinSize), size)
		}
		b.MinSize = lo
	}
	if rounds < 1 || rounds > maxOSURounds {
		return usagef("--rounds %d: want 1 to %d", rounds, maxOSURounds)
	}
	b.Rounds = rounds
	if iters < 0 {
		return usagef("--iters %d: want at least 1", iters)
	}
	if iters > 0 {
		b.LoopL = max(1, iters*b.LoopL/b.Loop)
		b.Loop = iters
	}
	if skip < -1 {
		return usagef("--skip %d: want 0 or more", skip)
	}
	if skip >= 0 {
		b.SkipL = skip * b.SkipL / max(1, b.Skip)
		b.Skip = skip
	}
	if b.CPUProfile != "" {
		if err := os.MkdirAll(b.CPUProfile, 0o755); err != nil {
			return usagef("--cpuprofile: %v", err)
		}
		if b.CPUProfile, err = filepath.Abs(b.CPUProfile); err != nil {
			return usagef("--cpuprofile: %v", err)
		}
	}
	b.Impls = nil
	for _, f := range strings.Split(implText, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(bench.OSUImpls, f) {
			return usagef("--impl %q: unknown implementation %q (want %s)", implText, f, strings.Join(bench.OSUImpls, ", "))
		}
		if !slices.Contains(b.Impls, f) {
			b.Impls = append(b.Impls, f)
		}
	}
	b.Progress = c.stderr
	return nil
}

// maxOSURounds bounds --rounds: each round runs every implementation.
const maxOSURounds = 99

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

// run measures every implementation and prints the table.
func runOSU(ctx context.Context, c *call, b *bench.OSU, title string) error {
	start := time.Now()
	results, err := b.Measure(ctx)
	if err != nil {
		return err
	}
	b.WriteTable(c.stdout, title, results)
	fmt.Fprintf(c.stdout, "(%.0f s; %s)\n", time.Since(start).Seconds(), b.Loops())
	return nil
}
