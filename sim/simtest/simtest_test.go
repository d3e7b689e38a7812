package simtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fakeTB records what Seeds reports instead of failing the real test.
type fakeTB struct {
	testing.TB
	name  string
	fatal []string
	logs  []string
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return f.name }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = append(f.fatal, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func TestSeedsDerived(t *testing.T) {
	t.Setenv(SeedEnv, "")
	t.Setenv(BaseEnv, "")
	a := &fakeTB{name: "TestA"}
	sa := Seeds(a, 50)
	if len(sa) != 50 || len(a.fatal) != 0 {
		t.Fatalf("got %d seeds, errors %v", len(sa), a.fatal)
	}
	if again := Seeds(&fakeTB{name: "TestA"}, 50); !slices.Equal(sa, again) {
		t.Fatal("the same test got different seeds on a second call")
	}
	if other := Seeds(&fakeTB{name: "TestB"}, 50); slices.Equal(sa, other) {
		t.Fatal("two tests got the same seeds")
	}
	distinct := map[uint64]bool{}
	for _, s := range sa {
		distinct[s] = true
		if s >= 1<<32 {
			t.Fatalf("seed %d is longer than 32 bits", s)
		}
	}
	if len(distinct) != 50 {
		t.Fatalf("only %d distinct seeds of 50", len(distinct))
	}
	if len(a.logs) != 1 || !strings.Contains(a.logs[0], fmt.Sprint(sa[0])) || !strings.Contains(a.logs[0], "-seed=N") {
		t.Fatalf("seeds not logged with the replay hint: %q", a.logs)
	}
	t.Setenv(BaseEnv, "99")
	if rebased := Seeds(&fakeTB{name: "TestA"}, 50); slices.Equal(sa, rebased) {
		t.Fatal("a new base gave the same seeds")
	}
}

func TestSeedsReplay(t *testing.T) {
	t.Setenv(SeedEnv, "12345")
	f := &fakeTB{name: "TestA"}
	if s := Seeds(f, 50); !slices.Equal(s, []uint64{12345}) || len(f.logs) != 1 || !strings.Contains(f.logs[0], "12345") {
		t.Fatalf("replay gave %v, logs %q", s, f.logs)
	}
	t.Setenv(SeedEnv, "0x10")
	if s := Seeds(&fakeTB{name: "TestA"}, 5); !slices.Equal(s, []uint64{16}) {
		t.Fatalf("hex seed gave %v", s)
	}
	t.Setenv(SeedEnv, "twelve")
	f = &fakeTB{name: "TestA"}
	Seeds(f, 5)
	if len(f.fatal) != 1 || !strings.Contains(f.fatal[0], `bad seed "twelve"`) {
		t.Fatalf("malformed seed: %q", f.fatal)
	}
}

func TestEachNamesSubtests(t *testing.T) {
	t.Setenv(SeedEnv, "7")
	var names []string
	Each(t, 3, func(t *testing.T, seed uint64) { names = append(names, fmt.Sprintf("%s:%d", t.Name(), seed)) })
	if !slices.Equal(names, []string{"TestEachNamesSubtests/seed=7:7"}) {
		t.Fatalf("subtests %v", names)
	}
}
