package scripttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const sample = `# A counter.
add n=2
----
2

# Several values at once.
add n=(1,3)
----
6

echo
hello

world
----
----
hello

world
----
----

noop
----
`

// counter is the script's machine: add sums its arguments, echo returns its
// input, noop returns nothing.
func counter() func(t *testing.T, c *Cmd) string {
	sum := 0
	return func(t *testing.T, c *Cmd) string {
		switch c.Name {
		case "add":
			for _, v := range c.Ints(t, "n") {
				sum += v
			}
			return strconv.Itoa(sum)
		case "echo":
			return c.Input
		case "noop":
			return ""
		}
		t.Fatalf("%s: unknown command %q", c.Pos, c.Name)
		return ""
	}
}

func writeScript(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunPasses(t *testing.T) {
	Run(t, writeScript(t, sample), counter())
}

// recorder collects what run reports.
type recorder struct{ errors []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }

func TestRunReportsMismatch(t *testing.T) {
	path := writeScript(t, strings.Replace(sample, "----\n6\n", "----\n7\n", 1))
	do := counter()
	var r recorder
	run(&r, path, func(c *Cmd) string { return do(t, c) })
	want := "s.txt:7: add n=(1,3): output differs (-want +got):\n- 7\n+ 6\n(rerun with -rewrite to accept the new output)"
	if len(r.errors) != 1 || r.errors[0] != want {
		t.Errorf("reported %q, want one error %q", r.errors, want)
	}
}

func TestRewrite(t *testing.T) {
	stale := strings.Replace(sample, "----\n6\n", "----\n7\nand more\n", 1)
	stale = strings.Replace(stale, "----\n2\n", "----\n", 1)
	path := writeScript(t, stale)
	*rewrite = true
	defer func() { *rewrite = false }()
	Run(t, path, counter())
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != sample {
		t.Errorf("rewrite gave:\n%s\nwant:\n%s", got, sample)
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		"add n=2\n",                // no separator
		"add =2\n----\n",           // argument without a name
		"add n=(1,2\n----\n",       // list not closed
		"echo\n----\n----\nopen\n", // double separator never closed
	} {
		if _, err := parse("bad.txt", bad); err == nil {
			t.Errorf("parse(%q) succeeded, want an error", bad)
		}
	}
}

func TestDiff(t *testing.T) {
	got := diff("a\nb\nc", "a\nc\nd")
	want := "  a\n- b\n  c\n+ d"
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
}
