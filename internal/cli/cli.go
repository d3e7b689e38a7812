// Package cli implements the cohort command: it parses the command line,
// runs one subcommand and turns its outcome into an exit status.
//
// A subcommand is one file: it defines a [command] and registers it from an
// init function. Each subcommand parses its own arguments with its own
// flag.FlagSet (see [newFlags]), writes its results to the call's stdout and
// its diagnostics to stderr, and returns an error; Run maps the error to
// the exit status:
//
//	0  success (also for -h/--help)
//	1  the command ran and failed (a check failed, a run broke, a file
//	   could not be written)
//	2  bad usage: unknown command, unknown experiment, bad flag or value
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand of cohort.
type command struct {
	// name is the word after cohort.
	name string
	// synopsis is the argument pattern shown in usage, e.g.
	// "<experiment> [flags]".
	synopsis string
	// summary is one line for the command list.
	summary string
	// help is the long description with examples, shown by
	// `cohort help <name>` and -h.
	help string
	// helpFunc, if set, computes help at the time it is shown (for a
	// command whose help lists things registered by other files).
	helpFunc func() string
	// run executes the command with the arguments after its name.
	run func(ctx context.Context, c *call) error
	// hidden leaves the command out of the command list (it is run by
	// other commands, not by people: `cohort node`).
	hidden bool
}

// call is one invocation of a command.
type call struct {
	cmd            *command
	args           []string
	stdout, stderr io.Writer
}

var commands = map[string]*command{}

// register adds a command; called from init functions.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("cli: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// sortedCommands lists the commands by name.
func sortedCommands() []*command {
	out := make([]*command, 0, len(commands))
	for _, c := range commands {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usage error.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Run runs the cohort command with args (without the program name) and
// returns the exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeMainUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		writeMainUsage(stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "cohort: unknown command %q\n", name)
		fmt.Fprintf(stderr, "Run 'cohort help' for the list of commands.\n")
		return exitUsage
	}
	err := cmd.run(ctx, &call{cmd: cmd, args: args[1:], stdout: stdout, stderr: stderr})
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "cohort %s: %v\n", cmd.name, err)
		fmt.Fprintf(stderr, "Run 'cohort help %s' for usage.\n", cmd.name)
		return exitUsage
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "cohort %s: interrupted\n", cmd.name)
		return exitFailure
	default:
		fmt.Fprintf(stderr, "cohort %s: %v\n", cmd.name, err)
		return exitFailure
	}
}

// newFlags returns the FlagSet of a call. It prints nothing by itself:
// [call.parse] turns a bad flag into a usage error and -h into the
// command's usage on stdout.
func (c *call) newFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("cohort "+c.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with fs. For -h it prints the command's usage to
// stdout and returns flag.ErrHelp; a bad flag or more than maxArgs
// positional arguments give a usage error.
func (c *call) parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeCommandUsage(c.stdout, c.cmd, fs)
			return err
		}
		return &usageError{msg: err.Error()}
	}
	if fs.NArg() > maxArgs {
		return usagef("unexpected argument %q", fs.Arg(maxArgs))
	}
	return nil
}

func writeMainUsage(w io.Writer) {
	fmt.Fprint(w, `cohort is a fault-tolerant message-passing runtime, with a deterministic
simulator that runs its protocols at scale and reproduces its papers' figures.

Usage:
  cohort <command> [arguments]

Commands:
`)
	for _, c := range sortedCommands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, `
Run 'cohort help <command>' for the flags and examples of a command.

Examples:
  cohort demo                    16-queens on 8 processes, 2 killed: live detections, views, exact count
  cohort demo --sim              a simulated 1,024-node cluster, 5 crashes, BRR gossip detection
  cohort sim list                the experiments that reproduce the papers' figures
  cohort sim fd-detect --quick   detection time against n, in a few seconds
`)
}

func writeCommandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	help := c.help
	if c.helpFunc != nil {
		help = c.helpFunc()
	}
	fmt.Fprintf(w, "Usage: cohort %s %s\n\n%s\n", c.name, c.synopsis, strings.TrimSpace(help))
	if fs != nil && hasFlags(fs) {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
