// Command memberlist compares cohort's membership (package group, with the
// heartbeat and the BRR gossip detectors) with hashicorp/memberlist: n
// nodes of each system in this process on 127.0.0.1, at matched message
// rates per member. For each system, size and rate it measures, in a quiet
// window, the messages, bytes and CPU per member and any member declared
// failed while alive; then it crashes one member per trial (no goodbye) and
// times the first detection anywhere and the moment every survivor agrees
// it is gone. It prints the medians, the ratios cohort/memberlist, and
// writes a CSV.
//
//	cd bench/memberlist && go run . --quick
package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/host"
)

func main() {
	raiseFileLimit()
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "memberlist bench:", err)
		os.Exit(1)
	}
}

// raiseFileLimit lifts the limit on open files as far as the process may:
// the hard limit too when it is allowed to (root), up to wantFiles, else
// the soft limit to the hard one. A process holding hundreds of nodes, each
// with a TCP connection to many others, needs tens of thousands of
// descriptors (256 nodes talking to nearly every other: about 130,000).
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return
	}
	if l.Max < wantFiles {
		raised := syscall.Rlimit{Cur: wantFiles, Max: wantFiles}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return
		}
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// wantFiles is the open-files limit raiseFileLimit asks for.
const wantFiles = 1 << 20

func run(args []string, out, log io.Writer) error {
	fs := flag.NewFlagSet("memberlist", flag.ContinueOnError)
	fs.SetOutput(log)
	sizes := fs.String("sizes", "16,64,128,256", "group sizes, comma-separated")
	rates := fs.String("rates", "2,20", "target messages per member per second, comma-separated")
	systems := fs.String("systems", "heartbeat,brr,memberlist", "systems to run: heartbeat, brr (cohort's detectors), memberlist")
	trials := fs.Int("trials", 5, "crash trials per configuration")
	quiet := fs.Duration("quiet", time.Minute, "quiet window (traffic, CPU, false deaths)")
	quick := fs.Bool("quick", false, "a short run: sizes 16,64, 3 trials, 10 s quiet window (explicit flags win)")
	outPath := fs.String("out", "mlbench.csv", "CSV output file (empty: none)")
	seed := fs.Uint64("seed", 0, "random seed (0: from the clock); printed, pass it to replay the victims' choice")
	limit := fs.Duration("limit", 90*time.Second, "how long a crash may take to be agreed on before the trial counts as timed out")
	faults := fs.Bool("faults", false, "after the crash trials, a quiet window with 5% loss and a 200 ms delay on one member's outgoing messages")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	eventsPath := fs.String("events", "", "write every cohort node's events (views, suspicions, stabilizations) to this file as JSON lines")
	partial := fs.String("partial", "", "instead of the quiet window and crashes, cut the path between two members (both still reach the rest): both, oneway (A→B lost, B→A delivered) or both,oneway; sizes 16,64, rate 20, 3 trials unless given")
	cutFor := fs.Duration("cut", 30*time.Second, "with --partial: how long the path stays cut")
	after := fs.Duration("after", 30*time.Second, "with --partial: the quiet window after the heal")
	pair := fs.String("pair", pairBusiest, "with --partial: how B is chosen once A is drawn: busiest (the member A sent the most messages to over 2 s) or random")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["sizes"] {
			*sizes = "16,64"
		}
		if !set["trials"] {
			*trials = 3
		}
		if !set["quiet"] {
			*quiet = 10 * time.Second
		}
	}
	var pp partialParams
	if *partial != "" {
		var err error
		if pp.variants, err = parseVariants(*partial); err != nil {
			return fmt.Errorf("--partial: %w", err)
		}
		if *cutFor <= 0 || *after <= 0 {
			return errors.New("--cut and --after must be positive")
		}
		pp.cut, pp.after = *cutFor, *after
		if *pair != pairBusiest && *pair != pairRandom {
			return fmt.Errorf("--pair: %q is neither %s nor %s", *pair, pairBusiest, pairRandom)
		}
		pp.pair = *pair
		if !set["sizes"] {
			*sizes = "16,64"
		}
		if !set["rates"] {
			*rates = "20"
		}
		if !set["trials"] {
			*trials = 3
		}
	} else if set["cut"] || set["after"] || set["pair"] {
		return errors.New("--cut, --after and --pair need --partial")
	}
	p := params{trials: *trials, quiet: *quiet, limit: *limit, seed: *seed, warmup: 3 * time.Second, faults: *faults}
	if *quick {
		p.warmup = time.Second
	}
	if p.seed == 0 {
		p.seed = uint64(time.Now().UnixNano())
	}
	var err error
	if p.sizes, err = parseInts(*sizes); err != nil {
		return fmt.Errorf("--sizes: %w", err)
	}
	if p.rates, err = parseFloats(*rates); err != nil {
		return fmt.Errorf("--rates: %w", err)
	}
	for _, s := range strings.Split(*systems, ",") {
		if _, err := newSystem(s, 1, 1); err != nil {
			return fmt.Errorf("--systems: %w", err)
		}
		p.systems = append(p.systems, s)
	}
	if p.trials < 1 || p.quiet <= 0 {
		return errors.New("--trials must be at least 1 and --quiet positive")
	}
	if *eventsPath != "" {
		f, err := os.Create(*eventsPath)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		cohortEvents = host.NewLockedWriter(bw)
		defer func() {
			bw.Flush()
			f.Close()
		}()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if pp.variants != nil {
		for _, n := range p.sizes {
			if n < 3 {
				return fmt.Errorf("--partial needs groups of at least 3 (two cut apart and one that reaches both), not %d", n)
			}
		}
		return runPartials(p, pp, *outPath, out, log)
	}
	fmt.Fprintf(log, "seed %d; sizes %v, rates %v msgs/s per member, %d trials, quiet window %v\n",
		p.seed, p.sizes, p.rates, p.trials, p.quiet)
	var results []result
	for _, rate := range p.rates {
		for _, n := range p.sizes {
			for _, name := range p.systems {
				r := runOne(p, name, rate, n, log)
				if r.err != "" {
					fmt.Fprintf(log, "  %s n=%d rate=%g: %s\n", name, n, rate, r.err)
				}
				results = append(results, r)
			}
		}
	}
	printTable(out, results)
	printRatios(out, results)
	if *outPath != "" {
		if err := writeCSV(*outPath, results); err != nil {
			return err
		}
		fmt.Fprintf(log, "wrote %s\n", *outPath)
	}
	return nil
}

// runPartials runs the partial-partition scenario for every system, size
// and rate, then prints the side-by-side table and writes one CSV row per
// trial.
func runPartials(p params, pp partialParams, outPath string, out, log io.Writer) error {
	fmt.Fprintf(log, "seed %d; sizes %v, rates %v msgs/s per member, cuts %v, pair %s, %d trials each: cut %v, then %v after the heal\n",
		p.seed, p.sizes, p.rates, pp.variants, pp.pair, p.trials, pp.cut, pp.after)
	var trials []partialTrial
	var failed []string
	for _, rate := range p.rates {
		for _, n := range p.sizes {
			for _, name := range p.systems {
				ts, err := runPartial(p, pp, name, rate, n, log)
				if err != nil {
					msg := fmt.Sprintf("%s n=%d rate=%g: %v", name, n, rate, err)
					fmt.Fprintln(log, "  "+msg)
					failed = append(failed, msg)
				}
				trials = append(trials, ts...)
			}
		}
	}
	printPartial(out, aggregate(trials))
	for _, f := range failed {
		fmt.Fprintln(out, "failed:", f)
	}
	if outPath != "" {
		if err := writePartialCSV(outPath, trials); err != nil {
			return err
		}
		fmt.Fprintf(log, "wrote %s\n", outPath)
	}
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 2 {
			return nil, fmt.Errorf("%q is not a size of at least 2", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive rate", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatFloat(d.Seconds()*1000, 'f', 0, 64)
}

func printTable(out io.Writer, rs []result) {
	tw := tabwriter.NewWriter(out, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate\tn\tsystem\tmsgs/s/member\tB/s/member\tcpu cores\tdetect ms (med)\tagreed ms (med)\ttrials ok\tfalse deaths quiet\tfalse deaths all\tfalse deaths faults\t")
	for _, r := range rs {
		if r.err != "" && len(r.agree) == 0 {
			fmt.Fprintf(tw, "%g\t%d\t%s\tfailed: %s\t\t\t\t\t\t\t\t\t\n", r.rate, r.n, r.system, r.err)
			continue
		}
		faults := "-"
		if r.faultsRun {
			faults = strconv.Itoa(r.falseFaults)
		}
		fmt.Fprintf(tw, "%g\t%d\t%s\t%.2f\t%.0f\t%.2f\t%s\t%s\t%d/%d\t%d\t%d\t%s\t\n", r.rate, r.n, r.system,
			r.msgsPerSec, r.bytesPerSec, r.cpuCores, ms(median(r.detect)), ms(median(r.agree)),
			len(r.agree), len(r.agree)+r.timeouts, r.falseQuiet, r.falseTotal, faults)
	}
	tw.Flush()
}

// printRatios prints cohort/memberlist for each cohort detector.
func printRatios(out io.Writer, rs []result) {
	type key struct {
		rate float64
		n    int
	}
	ml := map[key]result{}
	for _, r := range rs {
		if r.system == "memberlist" {
			ml[key{r.rate, r.n}] = r
		}
	}
	if len(ml) == 0 {
		return
	}
	ratio := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "-"
		}
		return strconv.FormatFloat(a/b, 'f', 2, 64)
	}
	fmt.Fprintln(out, "\ncohort / memberlist (below 1: cohort lower)")
	tw := tabwriter.NewWriter(out, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate\tn\tdetector\tagreed\tdetect\tmsgs\tbytes\tcpu\t")
	for _, r := range rs {
		m, ok := ml[key{r.rate, r.n}]
		if r.system == "memberlist" || !ok {
			continue
		}
		fmt.Fprintf(tw, "%g\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.rate, r.n, r.system,
			ratio(median(r.agree).Seconds(), median(m.agree).Seconds()),
			ratio(median(r.detect).Seconds(), median(m.detect).Seconds()),
			ratio(r.msgsPerSec, m.msgsPerSec), ratio(r.bytesPerSec, m.bytesPerSec), ratio(r.cpuCores, m.cpuCores))
	}
	tw.Flush()
}

func writeCSV(path string, rs []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"system", "rate", "n", "msgs_per_member_s", "bytes_per_member_s", "cpu_cores",
		"detect_median_ms", "agreed_median_ms", "detect_ms", "agreed_ms", "timeouts",
		"false_deaths_quiet", "false_deaths_all", "false_deaths_faults", "error"})
	list := func(ds []time.Duration) string {
		var s []string
		for _, d := range ds {
			s = append(s, strconv.FormatFloat(d.Seconds()*1000, 'f', 1, 64))
		}
		return strings.Join(s, ";")
	}
	for _, r := range rs {
		faults := ""
		if r.faultsRun {
			faults = strconv.Itoa(r.falseFaults)
		}
		w.Write([]string{r.system, strconv.FormatFloat(r.rate, 'g', -1, 64), strconv.Itoa(r.n),
			strconv.FormatFloat(r.msgsPerSec, 'f', 3, 64), strconv.FormatFloat(r.bytesPerSec, 'f', 1, 64),
			strconv.FormatFloat(r.cpuCores, 'f', 3, 64),
			strconv.FormatFloat(median(r.detect).Seconds()*1000, 'f', 1, 64),
			strconv.FormatFloat(median(r.agree).Seconds()*1000, 'f', 1, 64),
			list(r.detect), list(r.agree), strconv.Itoa(r.timeouts),
			strconv.Itoa(r.falseQuiet), strconv.Itoa(r.falseTotal), faults, r.err})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
