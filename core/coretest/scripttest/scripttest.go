// Package scripttest runs protocol tests written as scripts in testdata
// files, in the style of etcd-io/raft's interaction tests: each file reads
// like a scenario of the paper, a command per step, each followed by the
// output it must produce.
//
// A script is a sequence of commands. A command is one line, a name and
// arguments; the lines after it up to a line "----" are its input (most
// commands have none); the lines after "----" up to a blank line are the
// output it must produce. An output that holds blank lines is written
// between two "----" lines and ends at a "----" line followed by another:
//
//	# Lines starting with '#' are comments, kept on rewrite.
//	crash n=1
//	----
//
//	deliver
//	----
//	n5->n0 NODE_FAILURE [n1]
//	n0->n5 FAILURE_DET_ACK [n1]
//
// Arguments are bare words ("verbose"), key=value pairs ("n=7") or key=list
// pairs ("ids=(1,2,3)").
//
// The test binary's -rewrite flag replaces every expected output with the
// output the code produced, keeping commands and comments as they are:
//
//	go test ./member -run TestScripts -rewrite
//
// Review the diff of testdata before committing a rewrite: it is the test.
package scripttest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts with the output the code produces")

// separator ends a command's input and starts its expected output.
const separator = "----"

// Arg is one argument of a command: Key alone for a bare word, Key with
// Vals for key=value ("n=7": one value) and key=list ("ids=(1,2)").
type Arg struct {
	Key  string
	Vals []string
}

// Cmd is one command of a script.
type Cmd struct {
	Pos   string // "file:line" of the command, for messages
	Name  string
	Args  []Arg
	Input string // lines between the command and "----", without the final newline
	Want  string // the expected output as written in the file
}

// String renders the command line as it is written in the script.
func (c *Cmd) String() string {
	var b strings.Builder
	b.WriteString(c.Name)
	for _, a := range c.Args {
		b.WriteByte(' ')
		b.WriteString(a.Key)
		switch {
		case a.Vals == nil:
		case len(a.Vals) == 1:
			b.WriteString("=" + a.Vals[0])
		default:
			b.WriteString("=(" + strings.Join(a.Vals, ",") + ")")
		}
	}
	return b.String()
}

// Has reports whether the command has an argument named key.
func (c *Cmd) Has(key string) bool {
	return c.arg(key) != nil
}

func (c *Cmd) arg(key string) *Arg {
	for i := range c.Args {
		if c.Args[i].Key == key {
			return &c.Args[i]
		}
	}
	return nil
}

// Strings returns the values of argument key; it fails the test if the
// argument is missing.
func (c *Cmd) Strings(t testing.TB, key string) []string {
	t.Helper()
	a := c.arg(key)
	if a == nil {
		t.Fatalf("%s: %s: missing argument %s", c.Pos, c.Name, key)
	}
	return a.Vals
}

// StringOr returns the single value of argument key, or def if it is absent.
func (c *Cmd) StringOr(t testing.TB, key, def string) string {
	t.Helper()
	a := c.arg(key)
	if a == nil {
		return def
	}
	if len(a.Vals) != 1 {
		t.Fatalf("%s: %s: argument %s wants one value, has %d", c.Pos, c.Name, key, len(a.Vals))
	}
	return a.Vals[0]
}

// Ints returns the values of argument key as integers; it fails the test if
// the argument is missing or a value is not an integer. A value may carry a
// one-letter prefix naming what it counts ("n5" for node 5).
func (c *Cmd) Ints(t testing.TB, key string) []int {
	t.Helper()
	vals := c.Strings(t, key)
	out := make([]int, len(vals))
	for i, v := range vals {
		n, err := parseInt(v)
		if err != nil {
			t.Fatalf("%s: %s: argument %s: %v", c.Pos, c.Name, key, err)
		}
		out[i] = n
	}
	return out
}

// Int returns the single integer value of argument key; it fails the test if
// the argument is missing or not one integer.
func (c *Cmd) Int(t testing.TB, key string) int {
	t.Helper()
	vals := c.Ints(t, key)
	if len(vals) != 1 {
		t.Fatalf("%s: %s: argument %s wants one value, has %d", c.Pos, c.Name, key, len(vals))
	}
	return vals[0]
}

// IntOr is Int with a default for an absent argument.
func (c *Cmd) IntOr(t testing.TB, key string, def int) int {
	t.Helper()
	if !c.Has(key) {
		return def
	}
	return c.Int(t, key)
}

func parseInt(v string) (int, error) {
	s := v
	if len(s) > 1 && (s[0] < '0' || s[0] > '9') && s[0] != '-' {
		s = s[1:]
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	return n, nil
}

// Walk runs every file of dir whose name ends in ".txt" as a subtest named
// after the file; run replays one file, usually by calling Run with a fresh
// state.
func Walk(t *testing.T, dir string, run func(t *testing.T, path string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scripts (*.txt) in %s", dir)
	}
	slices.Sort(files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { run(t, f) })
	}
}

// Run replays the script at path: do is called for every command, in order,
// and returns the command's output, which must equal the expected output
// (trailing white space ignored). A mismatch fails the test and the script
// goes on. With -rewrite, the file is written again with the outputs do
// returned.
func Run(t *testing.T, path string, do func(t *testing.T, c *Cmd) string) {
	t.Helper()
	run(t, path, func(c *Cmd) string { return do(t, c) })
}

// reporter is what run needs of a *testing.T.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

func run(t reporter, path string, do func(c *Cmd) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
		return
	}
	chunks, err := parse(filepath.Base(path), string(data))
	if err != nil {
		t.Fatal(err)
		return
	}
	var out strings.Builder
	for _, ch := range chunks {
		out.WriteString(ch.text)
		if ch.cmd == nil {
			continue
		}
		got := strings.TrimRight(do(ch.cmd), " \t\n")
		writeOutput(&out, got, ch.last)
		if *rewrite {
			continue
		}
		if want := strings.TrimRight(ch.cmd.Want, " \t\n"); got != want {
			t.Errorf("%s: %s: output differs (-want +got):\n%s\n(rerun with -rewrite to accept the new output)",
				ch.cmd.Pos, ch.cmd, diff(want, got))
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeOutput writes "----", the output and the blank line that ends it.
func writeOutput(b *strings.Builder, got string, last bool) {
	b.WriteString(separator + "\n")
	if strings.Contains(got, "\n\n") || strings.HasPrefix(got, separator) {
		b.WriteString(separator + "\n" + got + "\n" + separator + "\n" + separator + "\n")
	} else if got != "" {
		b.WriteString(got + "\n")
	}
	if !last {
		b.WriteString("\n")
	}
}

// chunk is a piece of the file: text kept verbatim on rewrite (comments,
// blank lines, a command and its input, up to and including nothing of the
// output), and the command it ends with, if any.
type chunk struct {
	text string
	cmd  *Cmd
	last bool // the output ends the file
}

func parse(name, data string) ([]chunk, error) {
	lines := strings.Split(data, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var chunks []chunk
	var text strings.Builder
	i := 0
	for i < len(lines) {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			text.WriteString(line + "\n")
			i++
			continue
		}
		cmd, err := parseCommand(trimmed)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, i+1, err)
		}
		cmd.Pos = fmt.Sprintf("%s:%d", name, i+1)
		text.WriteString(line + "\n")
		i++
		var input []string
		for i < len(lines) && lines[i] != separator {
			input = append(input, lines[i])
			text.WriteString(lines[i] + "\n")
			i++
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: command %q has no %q line", cmd.Pos, cmd.Name, separator)
		}
		cmd.Input = strings.Join(input, "\n")
		i++ // the separator
		var want []string
		if i < len(lines) && lines[i] == separator {
			// An output with blank lines, closed by two separator lines.
			i++
			for ; ; i++ {
				if i+1 >= len(lines) {
					return nil, fmt.Errorf("%s: output opened with two %q lines is not closed by two", cmd.Pos, separator)
				}
				if lines[i] == separator && lines[i+1] == separator {
					i += 2
					break
				}
				want = append(want, lines[i])
			}
		} else {
			for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
				want = append(want, lines[i])
				i++
			}
		}
		if i < len(lines) && strings.TrimSpace(lines[i]) == "" {
			i++ // the blank line that ends the output
		}
		cmd.Want = strings.Join(want, "\n")
		chunks = append(chunks, chunk{text: text.String(), cmd: cmd, last: i >= len(lines)})
		text.Reset()
	}
	if text.Len() > 0 {
		chunks = append(chunks, chunk{text: text.String()})
	}
	return chunks, nil
}

func parseCommand(line string) (*Cmd, error) {
	fields := strings.Fields(line)
	c := &Cmd{Name: fields[0]}
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			c.Args = append(c.Args, Arg{Key: f})
			continue
		}
		if key == "" {
			return nil, fmt.Errorf("argument %q has no name", f)
		}
		if strings.HasPrefix(val, "(") {
			if !strings.HasSuffix(val, ")") {
				return nil, fmt.Errorf("argument %q: list not closed by ')' (lists hold no spaces)", f)
			}
			val = val[1 : len(val)-1]
			vals := []string{}
			if val != "" {
				vals = strings.Split(val, ",")
			}
			c.Args = append(c.Args, Arg{Key: key, Vals: vals})
			continue
		}
		c.Args = append(c.Args, Arg{Key: key, Vals: []string{val}})
	}
	return c, nil
}

// diff is a line diff of want and got, good enough for short traces: the
// longest common subsequence, with "-" for lines only wanted and "+" for
// lines only got.
func diff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	if want == "" {
		a = nil
	}
	if got == "" {
		b = nil
	}
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out.WriteString("  " + a[i] + "\n")
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i] + "\n")
			i++
		default:
			out.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return strings.TrimRight(out.String(), "\n")
}
