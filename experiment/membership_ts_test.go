package experiment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/model"
)

// TestMembershipTSTiny runs a small membership-ts (Varma et al. §7, Figures
// 4–8: T_s after one crash on the base, torus and switch networks) with one
// and two workers: every check passes (the protocol's message pattern, the
// growth with the height, the steps of §7.2, the models of §4 and §7) and
// the outputs are identical.
func TestMembershipTSTiny(t *testing.T) {
	args := []string{"--max-n", "64", "--samples", "2"}
	one, checks := runTiny(t, "membership-ts", 1, args...)
	if len(checks) < 8 {
		t.Errorf("%d checks recorded, want at least 8", len(checks))
	}
	mustPass(t, checks)
	two, _ := runTiny(t, "membership-ts", 2, args...)
	sameFiles(t, one, two, "ts.csv", "ts-runs.csv", "report.md")
}

// TestLogPStabilizationCompleteTree checks the closed form the report
// gives for the critical path of a complete tree (§4, Eq. 2 with O_cp
// charged per received message): 2·L·(H−1) + O_cp·(H−1)·(1 + a), and that
// without the overhead it is Eq. 2's communication part 2·L·(H−1).
func TestLogPStabilizationCompleteTree(t *testing.T) {
	const l, ocp = 4600 * time.Nanosecond, 2 * time.Microsecond
	for _, c := range []struct{ a, h int }{{2, 1}, {2, 2}, {2, 5}, {4, 4}, {8, 3}} {
		m := 1
		for range c.h - 1 {
			m = m*c.a + 1 // a complete tree of height h has (a^h − 1)/(a − 1) nodes
		}
		members := make([]core.NodeID, m)
		for i := range members {
			members[i] = core.NodeID(i)
		}
		constant := func(_, _ core.NodeID) time.Duration { return l }
		got, err := logpStabilization(members, c.a, constant, 0, ocp, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := 2*l*time.Duration(c.h-1) + ocp*time.Duration((c.h-1)*(1+c.a))
		if got != want {
			t.Errorf("a=%d H=%d (m=%d): %v, want %v", c.a, c.h, m, got, want)
		}
		got, _ = logpStabilization(members, c.a, constant, 0, 0, 0)
		if ocm, _ := model.CommOverhead(l, c.h); got != ocm {
			t.Errorf("a=%d H=%d without overhead: %v, want O_cm = %v", c.a, c.h, got, ocm)
		}
	}
	// The reporter's FAILURE_DET_ACK reaches a child of the root together
	// with the Prepare and is handled first: that child's subtree, the only
	// deep one, starts one O_cp late.
	members := []core.NodeID{0, 1, 2, 3}
	constant := func(_, _ core.NodeID) time.Duration { return l }
	plain, _ := logpStabilization(members, 2, constant, 0, ocp, 0)
	delayed, _ := logpStabilization(members, 2, constant, 0, ocp, 1)
	if delayed != plain+ocp {
		t.Errorf("reporter at depth 1: %v, want %v + O_cp", delayed, plain)
	}
}

// TestTSSizes checks the sweep's sizes around the height changes of §7.2
// (a = 4: the survivors' tree grows above 5 and 21 members, so n = 6 → 7
// and 22 → 23) and that the BG/L partitions grow to the 64×32×32 machine.
func TestTSSizes(t *testing.T) {
	ns := tsSizes(4, 64)
	for _, n := range []int{4, 6, 7, 8, 12, 16, 22, 23, 24, 32, 48, 64} {
		if !slices.Contains(ns, n) {
			t.Errorf("a=4: sizes %v lack %d", ns, n)
		}
	}
	if !slices.IsSorted(ns) || ns[0] != 4 || ns[len(ns)-1] != 64 {
		t.Errorf("a=4: sizes %v", ns)
	}
	for _, c := range []struct {
		n       int
		x, y, z int
	}{{4, 8, 8, 8}, {512, 8, 8, 8}, {513, 16, 8, 8}, {4096, 16, 16, 16}, {16384, 32, 32, 16}, {65536, 64, 32, 32}} {
		tr := blueGeneTorus(c.n, time.Microsecond)
		if tr.X != c.x || tr.Y != c.y || tr.Z != c.z || tr.Mesh {
			t.Errorf("n=%d: torus %d×%d×%d (mesh %v), want %d×%d×%d", c.n, tr.X, tr.Y, tr.Z, tr.Mesh, c.x, c.y, c.z)
		}
	}
}

// TestMembershipTSBadOptions checks that bad flags and a size over the
// memory budget are refused before anything runs.
func TestMembershipTSBadOptions(t *testing.T) {
	spec, _ := Lookup("membership-ts")
	for _, args := range [][]string{
		{"--max-n", "3"},
		{"--max-n", "131072"},
		{"--fanouts", "3"},
		{"--networks", "ring"},
		{"--samples", "-1"},
		{"--latency", "0s"},
		{"--max-n", "4096", "--mem-budget", "0.001"},
	} {
		e := spec.New()
		if err := flagSetFor(e).Parse(args); err != nil {
			t.Fatal(err)
		}
		_, err := Execute(context.Background(), spec, e, Options{Seed: 1, Out: t.TempDir(), Workers: 1})
		if !errors.Is(err, ErrBadOption) {
			t.Errorf("%v: got %v, want ErrBadOption", args, err)
		}
	}
}

// TestMembershipTSWorldIsLinear checks that a world of n member machines
// (package member: one shared initial view per job, one shared view per
// proposal) holds O(n) bytes: the heap per member at n = 8,192 is within
// 1.5× of that at 2,048 (when every machine held its own member list, the
// ratio was 4). It also checks that the crash of §3.4 was handled.
func TestMembershipTSWorldIsLinear(t *testing.T) {
	e := &membershipTS{latency: 4600 * time.Nanosecond, tcp: 118 * time.Microsecond, ocp: 2 * time.Microsecond, perNode: 5 * time.Microsecond}
	per := map[int]float64{}
	for _, n := range []int{2048, 8192} {
		h, err := e.tsWorldHeap(context.Background(), tsRun{net: tsBaseTCP, a: 2, n: n})
		if err != nil {
			t.Fatal(err)
		}
		per[n] = h.after / float64(n)
		t.Logf("n = %d: %.1f MB started, %.1f MB after the crash, %.0f bytes per member", n, h.started/1e6, h.after/1e6, per[n])
	}
	if per[8192] > 1.5*per[2048] {
		t.Errorf("heap per member %.0f B at n = 8192, %.0f B at n = 2048: the world grows faster than n", per[8192], per[2048])
	}
}

// BenchmarkMembershipTSWorld runs one world of the sweep (base-tcp, a = 2:
// n members start, one crashes, the survivors stabilize and install the
// view) per iteration.
func BenchmarkMembershipTSWorld(b *testing.B) {
	e := &membershipTS{latency: 4600 * time.Nanosecond, tcp: 118 * time.Microsecond, ocp: 2 * time.Microsecond, perNode: 5 * time.Microsecond}
	for _, n := range []int{4096, 16384, 65536} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r, err := e.runOne(context.Background(), uint64(i), tsRun{net: tsBaseTCP, a: 2, n: n})
				if err != nil || r.installs != n-1 {
					b.Fatalf("%v, %d of %d installed", err, r.installs, n-1)
				}
			}
		})
	}
}
