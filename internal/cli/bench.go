package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A benchmark is one `cohort bench <name>`: it parses its own flags from
// c.args (the arguments after its name) and prints its table to c.stdout.
// Each benchmark lives in its own file (bench_<name>.go) and registers itself
// from an init function with registerBench.
type benchmark struct {
	name    string
	summary string // one line for `cohort bench -h`
	help    string // the long description, shown by `cohort bench <name> -h`
	run     func(ctx context.Context, c *call) error
}

var benchmarks = map[string]*benchmark{}

// registerBench adds a benchmark; a duplicate name is a programming error.
func registerBench(b *benchmark) {
	if _, dup := benchmarks[b.name]; dup {
		panic("cli: benchmark " + b.name + " registered twice")
	}
	benchmarks[b.name] = b
}

// benchNames lists the benchmarks in name order.
func benchNames() []string {
	names := make([]string, 0, len(benchmarks))
	for n := range benchmarks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func init() {
	register(&command{
		name:     "bench",
		synopsis: "<benchmark> [flags]",
		summary:  "measure cohort on real processes of this machine",
		helpFunc: benchHelp, // benchmarks register from their own files, in any order
		run:      runBench,
	})
}

// benchHelp is the bench command's long help: every benchmark with its summary.
func benchHelp() string {
	var b strings.Builder
	b.WriteString("Bench runs a benchmark on real processes of this machine over TCP on\n127.0.0.1 and prints a table. `cohort bench <benchmark> -h` describes one.\n\nBenchmarks:\n")
	for _, n := range benchNames() {
		fmt.Fprintf(&b, "  %-12s %s\n", n, benchmarks[n].summary)
	}
	b.WriteString("\nExamples:\n  cohort bench membership -n 32,64 --fanout 2,4")
	return b.String()
}

func runBench(ctx context.Context, c *call) error {
	want := strings.Join(benchNames(), ", ")
	if len(c.args) == 0 {
		return usagef("missing the benchmark name (%s)", want)
	}
	name := c.args[0]
	switch {
	case name == "-h" || name == "-help" || name == "--help":
		writeCommandUsage(c.stdout, c.cmd, nil)
		return nil
	case strings.HasPrefix(name, "-"):
		return usagef("missing the benchmark name before %s (cohort bench <%s> %s)", name, want, name)
	}
	b, ok := benchmarks[name]
	if !ok {
		return usagef("unknown benchmark %q (want %s)", name, want)
	}
	sub := &call{cmd: &command{name: "bench " + b.name, synopsis: "[flags]", summary: b.summary, help: b.help},
		args: c.args[1:], stdout: c.stdout, stderr: c.stderr}
	return b.run(ctx, sub)
}

// intList is a flag.Value of comma-separated integers.
type intList []int

func (l *intList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}
