package tracker

import (
	"github.com/cohort-mp/cohort/internal/record"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

func ids(xs ...int) []core.NodeID {
	out := make([]core.NodeID, len(xs))
	for i, x := range xs {
		out[i] = core.NodeID(x)
	}
	return out
}

// TestTrackerLines: the tracker prints one line per view once every live
// member has installed it, with the departed nodes, the time since their
// kill and the root's T_s; a view some member skipped is printed as
// superseded before the next complete one; Agreement holds only when every
// live node holds one view of exactly the live nodes.
func TestTrackerLines(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := NewTracker(t0)
	var lines []string
	add := func(node, ms int, e any) {
		lines = append(lines, tr.Add(record.Record{Node: core.NodeID(node), Time: at(ms), Event: e})...)
	}
	for i := range 4 {
		add(i, 0, record.Spawned{PID: 100 + i})
	}
	e1, e2, e3 := member.MakeEpoch(1, 0), member.MakeEpoch(2, 0), member.MakeEpoch(3, 1)
	for i := range 4 {
		add(i, 10+i, member.ViewInstalled{Epoch: e1, Members: ids(0, 1, 2, 3)})
		if i < 3 && len(lines) != 0 {
			t.Fatalf("line before every member installed the view: %q", lines)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "epoch 1.n0 installed by 4/4 live members within 3.00 ms: 4 members [n0–n3], root n0") {
		t.Fatalf("lines %q", lines)
	}
	if v, ok := tr.Agreement(nil); !ok || v.Epoch != e1 {
		t.Fatal("no agreement on the first view")
	}
	lines = nil
	add(3, 100, record.Killed{})
	add(0, 300, member.Stabilized{Epoch: e2, Began: 5 * time.Millisecond, At: 7 * time.Millisecond, Members: 3})
	add(0, 301, member.ViewInstalled{Epoch: e2, Members: ids(0, 1, 2)})
	add(1, 302, member.ViewInstalled{Epoch: e2, Members: ids(0, 1, 2)})
	if _, ok := tr.Agreement(nil); ok {
		t.Fatal("agreement while n2 still holds the first view")
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "killed n3 (SIGKILL, pid 103)") {
		t.Fatalf("lines %q", lines)
	}
	// n2 skips e2; n0 is killed and n1, n2 install e3.
	add(0, 400, record.Killed{})
	add(1, 500, member.ViewInstalled{Epoch: e3, Members: ids(1, 2)})
	add(2, 502, member.ViewInstalled{Epoch: e3, Members: ids(1, 2)})
	want := []string{
		"killed n3",
		"killed n0",
		"epoch 2.n0 installed by 1/2 live members (superseded) within 1.00 ms: 3 members [n0–n2], root n0, departed [n3]; 202 ms after the kill of n3; T_s 2.00 ms at the root",
		"epoch 3.n1 installed by 2/2 live members within 2.00 ms: 2 members [n1 n2], root n1, departed [n0 n3]; 102 ms after the kill of n0",
	}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
	if v, ok := tr.Agreement(nil); !ok || v.Epoch != e3 {
		t.Fatalf("no agreement on %s", member.FormatEpoch(e3))
	}
	// A live node outside the view breaks agreement unless it is excluded.
	add(9, 600, record.Spawned{PID: 109, Join: true})
	if _, ok := tr.Agreement(nil); ok {
		t.Fatal("agreement although n9 has no view")
	}
	if _, ok := tr.Agreement(map[core.NodeID]bool{9: true}); !ok {
		t.Fatal("no agreement with n9 left out")
	}
	if d := tr.Disagreement(nil); !strings.Contains(d, "[n9] have no view") || !strings.Contains(d, "[n1 n2] hold epoch 3.n1") {
		t.Fatalf("Disagreement = %q", d)
	}
}
