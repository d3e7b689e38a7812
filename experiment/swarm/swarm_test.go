package swarm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every protocol runs a few seeds and passes them.
func TestProtocolsPassAFewSeeds(t *testing.T) {
	for _, p := range Protocols() {
		t.Run(p.Name, func(t *testing.T) {
			var seen []uint64
			sum, err := Run(context.Background(), Options{Protocol: p.Name, Seeds: 3, From: 1, Workers: 2,
				OnResult: func(r Result) { seen = append(seen, r.Seed) }})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Seeds != 3 || sum.Passed != 3 || !sum.OK() || len(seen) != 3 {
				t.Fatalf("summary %+v, results for %v; want 3 passed seeds", sum, seen)
			}
		})
	}
}

// Failing, stuck and hanging seeds are counted, reported with their replay
// command, sorted by seed, and make the summary not OK; a seed over the
// time limit that finishes within five times it counts as it ended, marked
// slow.
func TestFailuresAreReported(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	p := Protocol{Name: "test", variants: []variant{{
		name: "v",
		run: func(seed uint64) ran {
			switch seed % 5 {
			case 1:
				return ran{err: errors.New("violation")}
			case 2:
				return ran{err: errors.New("split"), stuck: true}
			case 3:
				<-release // hangs until the test ends
			case 4:
				return ran{minority: true}
			}
			if seed == 5 {
				time.Sleep(120 * time.Millisecond) // slow, not stuck
			}
			return ran{}
		},
		replay: func(seed uint64) string { return "replay " + string(rune('0'+seed)) },
	}}}
	sum, err := p.run(context.Background(), Options{Seeds: 10, From: 0, Workers: 3, SeedTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Seeds != 10 || sum.Passed != 4 || sum.Failed != 2 || sum.Stuck != 4 || sum.Minority != 2 || sum.OK() {
		t.Fatalf("summary %+v: want 10 seeds, 4 passed, 2 failed, 4 stuck, 2 minority", sum)
	}
	if !slices.Equal(sum.Slow, []uint64{3, 5, 8}) {
		t.Errorf("slow seeds %v, want [3 5 8] (the hanging ones, and 5)", sum.Slow)
	}
	var got []uint64
	for _, f := range sum.Failures {
		got = append(got, f.Seed)
		if !strings.HasPrefix(f.Replay, "replay ") {
			t.Errorf("seed %d: replay %q", f.Seed, f.Replay)
		}
	}
	want := []uint64{1, 2, 3, 6, 7, 8}
	if len(got) != len(want) {
		t.Fatalf("failures %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("failures %v, want %v", got, want)
		}
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{{Protocol: "nope", Seeds: 1}, {Protocol: "member", Seeds: 0}, {Protocol: "member", Seeds: 1, Workers: -1},
		{Protocol: "vsync", Faults: FaultsPartial, Seeds: 1}, {Protocol: "member", Faults: "most", Seeds: 1}} {
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrOption) {
			t.Errorf("%+v: got %v, want ErrOption", o, err)
		}
	}
}

// TestPartialFaults runs the member swarm under partial partitions and
// one-way cuts over both detectors, and checks that the default member
// swarm is unchanged by the option's existence (its seeds replay as they
// did: the same variants).
func TestPartialFaults(t *testing.T) {
	sum, err := Run(context.Background(), Options{Protocol: "member", Faults: FaultsPartial, Seeds: 20, From: 1, Workers: 2})
	if err != nil || !sum.OK() || sum.Passed != 20 {
		t.Fatalf("partial: %+v, %v", sum, err)
	}
	p, _ := Lookup("member")
	if len(p.variants) != 2 || p.variants[0].name != "policy paper" || p.variants[1].name != "policy majority" {
		t.Fatalf("member variants changed: %+v", p.variants)
	}
	if r := memberPartial.RunSeed(7); r.Outcome != Passed || memberPartial.variants[0].replay(7) != "go test ./member/membertest -run 'TestPartialSwarm/heartbeat$' -seed=7" {
		t.Fatalf("seed 7: %+v, replay %q", r, memberPartial.variants[0].replay(7))
	}
}
