package stack_test

// Graceful leaves through whole stacks with the directory (package
// group's nodes), simulated: the membership agrees on who left, and the
// directory confirms the leave to the leaver.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// leaveWorld is a simulated group of n nodes, each a stack with the
// directory, and what they reported.
type leaveWorld struct {
	w *sim.World
	// installed[node][epoch] is the ViewInstalled that node emitted for
	// epoch.
	installed []map[uint64]member.ViewInstalled
	// done lists the nodes that emitted stack.LeaveDone, in order.
	done []core.NodeID
}

func newLeaveWorld(t *testing.T, seed uint64, n int, det stack.Detector) *leaveWorld {
	t.Helper()
	lw := &leaveWorld{w: sim.New(sim.Config{Seed: seed, Network: sim.Uniform(200*time.Microsecond, 2*time.Millisecond)}),
		installed: make([]map[uint64]member.ViewInstalled, n)}
	members := make([]core.NodeID, n)
	for i := range members {
		members[i] = core.NodeID(i)
	}
	for _, id := range members {
		c := stack.DefaultLocalConfig()
		c.ID = id
		c.Detector = det
		st, err := stack.New(c, members, stack.Options{Directory: &stack.Directory{
			Addr: fmt.Sprintf("sim:%d", id), Name: fmt.Sprint("n", id), MetaVersion: 1}})
		if err != nil {
			t.Fatal(err)
		}
		lw.w.Add(st.Machine)
		lw.installed[id] = map[uint64]member.ViewInstalled{}
	}
	lw.w.OnEmit(func(_ time.Duration, node core.NodeID, e core.Event) {
		switch e := e.(type) {
		case member.ViewInstalled:
			lw.installed[node][e.Epoch] = e
		case stack.LeaveDone:
			lw.done = append(lw.done, node)
		}
	})
	return lw
}

// leave hands id the membership's LeaveRequest, as Group.Leave does.
func (lw *leaveWorld) leave(id core.NodeID) { lw.w.Node(id).Handle(member.LeaveRequest{}) }

// agreed checks that the nodes of survivors that installed an epoch
// installed the same members and reported the same Departed and Left with
// it (they are all in the group from the start, so each installs every
// view after the first); it returns the view, as installed, that excluded
// gone at every survivor.
func (lw *leaveWorld) agreed(t *testing.T, seed uint64, survivors []core.NodeID, gone core.NodeID) member.ViewInstalled {
	t.Helper()
	var epochs []uint64
	for _, id := range survivors {
		for ep := range lw.installed[id] {
			epochs = append(epochs, ep)
		}
	}
	slices.Sort(epochs)
	epochs = slices.Compact(epochs)
	var exclusion member.ViewInstalled
	for _, ep := range epochs {
		var first member.ViewInstalled
		var firstNode core.NodeID
		for _, id := range survivors {
			v, ok := lw.installed[id][ep]
			if !ok {
				t.Errorf("seed %d: n%d did not install epoch %#x, which n%d did", seed, id, ep, firstNode)
				continue
			}
			if first.Epoch == 0 {
				first, firstNode = v, id
				continue
			}
			if !slices.Equal(v.Members, first.Members) || !slices.Equal(v.Departed, first.Departed) || !slices.Equal(v.Left, first.Left) {
				t.Errorf("seed %d: epoch %#x: n%d installed members %v departed %v left %v, n%d members %v departed %v left %v",
					seed, ep, id, v.Members, v.Departed, v.Left, firstNode, first.Members, first.Departed, first.Left)
			}
		}
		if slices.Contains(first.Departed, gone) {
			exclusion = first
		}
	}
	if exclusion.Epoch == 0 {
		t.Fatalf("seed %d: no survivor installed a view without n%d", seed, gone)
	}
	return exclusion
}

// A member leaves while one other member is cut off from it (it hears
// nothing the leaver sends, its announcement included): every survivor,
// the cut-off member too, installs the view that excludes the leaver with
// the leaver in Left, and the leaver is told that it is out. The leaver
// is the root in one run of each detector.
func TestLeaveAgreedWithoutTheAnnouncement(t *testing.T) {
	const n = 6
	for i, seed := range simtest.Seeds(t, 6) {
		det := []stack.Detector{stack.DetectorBRR, stack.DetectorHeartbeat}[i%2]
		leaver := core.NodeID(seed % n)
		if i < 2 {
			leaver = 0 // the root
		}
		cut := (leaver + 1 + core.NodeID(seed/n%(n-1))) % n
		lw := newLeaveWorld(t, seed, n, det)
		lw.w.At(2*time.Second, func() {
			lw.w.CutOneWay(leaver, cut)
			lw.leave(leaver)
		})
		lw.w.RunUntil(10 * time.Second)
		var survivors []core.NodeID
		for id := range core.NodeID(n) {
			if id != leaver {
				survivors = append(survivors, id)
			}
		}
		v := lw.agreed(t, seed, survivors, leaver)
		if !slices.Equal(v.Left, []core.NodeID{leaver}) {
			t.Errorf("seed %d (replay: go test ./group/stack -run TestLeaveAgreedWithoutTheAnnouncement -seed %d), %s: leaver n%d, n%d cut off from it: the view excluding it has Left %v, want [n%d]",
				seed, seed, det, leaver, cut, v.Left, leaver)
		}
		if !slices.Equal(lw.done, []core.NodeID{leaver}) {
			t.Errorf("seed %d, %s: LeaveDone emitted by %v, want once by the leaver n%d", seed, det, lw.done, leaver)
		}
	}
}

// A leaver that crashes before any member heard its announcement (every
// link from it is cut as it leaves), or that stays cut off from them all,
// is a departure at every survivor, as any crash; one whose announcement
// reached a single member that crashes with it is counted alike
// everywhere, left or failed, whichever the proposal said.
func TestLeaveRacingCrash(t *testing.T) {
	const n = 6
	for i, seed := range simtest.Seeds(t, 8) {
		det := []stack.Detector{stack.DetectorBRR, stack.DetectorHeartbeat}[i%2]
		leaver := core.NodeID(seed % n)
		heard := core.NodeID(n) // nobody
		if i >= 4 {
			heard = (leaver + 1 + core.NodeID(seed/n%(n-1))) % n
		}
		lw := newLeaveWorld(t, seed, n, det)
		lw.w.At(2*time.Second, func() {
			for id := range core.NodeID(n) {
				if id != leaver && id != heard {
					lw.w.CutOneWay(leaver, id)
				}
			}
			lw.leave(leaver)
		})
		if i%4 != 3 {
			lw.w.CrashAt(2*time.Second+time.Duration(seed%3)*time.Millisecond, leaver)
		}
		if heard < n {
			lw.w.CrashAt(2*time.Second+time.Duration(seed%5)*time.Millisecond, heard)
		}
		lw.w.RunUntil(15 * time.Second)
		var survivors []core.NodeID
		for id := range core.NodeID(n) {
			if id != leaver && id != heard {
				survivors = append(survivors, id)
			}
		}
		v := lw.agreed(t, seed, survivors, leaver)
		if heard == n && len(v.Left) != 0 {
			t.Errorf("seed %d (replay: go test ./group/stack -run TestLeaveRacingCrash -seed %d), %s: n%d crashed before anyone heard it leave, yet the view excluding it has Left %v",
				seed, seed, det, leaver, v.Left)
		}
	}
}
