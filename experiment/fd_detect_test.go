package experiment

import (
	"context"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/topo"
)

// TestFDDetectTiny runs a small fd-detect (P2P-MPI §5.3, Fig. 13) with one
// and two workers: every detection lies inside fd.DetectionBound, every
// crash is declared by every live node, nothing live is declared failed,
// and the outputs are identical.
func TestFDDetectTiny(t *testing.T) {
	args := []string{"--max-n", "32", "--seeds", "2"}
	one, checks := runTiny(t, "fd-detect", 1, args...)
	mustPass(t, checks, "every BRR and DBRR detection time", "every crash declared", "no false failure", "BRR/DBRR mean")
	two, _ := runTiny(t, "fd-detect", 2, args...)
	sameFiles(t, one, two, "detect.csv", "detect-runs.csv", "report.md")
}

// TestGossipClusterCompletion checks the cluster's bookkeeping with two
// overlapping crashes: each is complete once every node alive at that time
// has declared it, and the node that crashes second no longer counts for
// the first.
func TestGossipClusterCompletion(t *testing.T) {
	cfg := fd.SimGossipConfig()
	cfg.Schedule = topo.BinaryRoundRobin
	c, err := NewGossipCluster(3, 16, cfg, time.Millisecond, 2*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []ProgressKind
	c.OnProgress = func(p Progress) { kinds = append(kinds, p.Kind) }
	if err := c.CrashAt(5*time.Second, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.CrashAt(6*time.Second, 9); err != nil {
		t.Fatal(err)
	}
	if err := c.CrashAt(7*time.Second, 9); err == nil {
		t.Error("a node crashed twice")
	}
	if err := c.Run(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if !c.Done() {
		t.Fatal("crashes not all detected within a minute")
	}
	for _, cr := range c.Crashes() {
		if n := len(cr.Delays(c.World)); n != 14 {
			t.Errorf("%v declared by %d live nodes, want 14", cr.Node, n)
		}
		if len(cr.Missing(c.World)) != 0 || cr.CompleteAt < cr.FirstAt || cr.First == core.None {
			t.Errorf("%v: first %v at %v, complete %v", cr.Node, cr.First, cr.FirstAt, cr.CompleteAt)
		}
		last := time.Duration(0)
		for i, at := range cr.DetectedAt {
			if c.World.Alive(core.NodeID(i)) {
				last = max(last, at)
			}
		}
		if cr.CompleteAt != last {
			t.Errorf("%v: complete at %v, last live detection at %v", cr.Node, cr.CompleteAt, last)
		}
	}
	counts := map[ProgressKind]int{}
	for _, k := range kinds {
		counts[k]++
	}
	if counts[CrashHappened] != 2 || counts[FirstDetected] != 2 || counts[AllDetected] != 2 || counts[FalseFailure] != 0 {
		t.Errorf("progress reports %v", counts)
	}
	if _, err := NewGossipCluster(1, 1, cfg, 0, 0, 0); err == nil {
		t.Error("a one-node cluster was accepted")
	}
}
