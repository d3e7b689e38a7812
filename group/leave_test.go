package group_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// collectViews reads the views g delivers until one satisfies ok, and
// returns them all by epoch.
func collectViews(t *testing.T, g *group.Group, ok func(group.View) bool) map[uint64]group.View {
	t.Helper()
	got := map[uint64]group.View{}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case v, open := <-g.Views():
			if !open {
				t.Fatalf("node %v: views channel closed", g.Name())
			}
			got[v.Epoch] = v
			if ok(v) {
				return got
			}
		case <-deadline:
			t.Fatalf("node %v: no such view within 30 s (got %v)", g.Name(), got)
		}
	}
}

// sameLeftPerEpoch checks that the nodes whose views are given report the
// same Departed and Left for every epoch that more of them delivered after
// the same previous view.
func sameLeftPerEpoch(t *testing.T, views map[string]map[uint64]group.View) {
	t.Helper()
	type seen struct {
		node string
		v    group.View
	}
	first := map[[2]uint64]seen{}
	for _, node := range slices.Sorted(func(yield func(string) bool) {
		for k := range views {
			if !yield(k) {
				return
			}
		}
	}) {
		for ep, v := range views[node] {
			key := [2]uint64{ep, v.Prev}
			f, ok := first[key]
			if !ok {
				first[key] = seen{node, v}
				continue
			}
			if !slices.Equal(names(v.Left), names(f.v.Left)) || !slices.Equal(names(v.Departed), names(f.v.Departed)) {
				t.Errorf("epoch %#x after %#x: %s reports departed %v left %v, %s departed %v left %v",
					ep, v.Prev, node, names(v.Departed), names(v.Left), f.node, names(f.v.Departed), names(f.v.Left))
			}
		}
	}
}

// cutFrom drops the frames of one node to the nodes cut says, once set.
type cutFrom struct {
	transport.Transport
	cut func(to core.NodeID) bool
}

func (c cutFrom) Send(ctx context.Context, to core.NodeID, f wire.Frame) error {
	if c.cut(to) {
		return nil
	}
	return c.Transport.Send(ctx, to, f)
}

// A member leaves while another member hears nothing from it (its
// announcement included): the others, the cut-off member too, deliver
// the same view without it and report it in Left, and every epoch any two
// members delivered after the same view reports the same Left. Leave
// returns, the leaver being told by a member that installed that view.
func TestLeaveAgreedWithoutTheAnnouncement(t *testing.T) {
	for _, det := range []group.Detector{group.DetectorBRR, group.DetectorHeartbeat} {
		t.Run(string(det), func(t *testing.T) {
			var cutting atomic.Bool
			var n4 core.NodeID
			gs := startGroup(t, 4, det, func(c *group.Config) {
				// The cut-off member's detector races the leaver's LEAVE to
				// the others: the LAN preset's slower verdicts leave that
				// LEAVE a second to arrive on a loaded host.
				lan := group.DefaultLANConfig()
				c.GossipInterval, c.PingTimeout = lan.GossipInterval, lan.PingTimeout
				c.HeartbeatInterval, c.SuspectTimeout, c.FailTimeout = lan.HeartbeatInterval, lan.SuspectTimeout, lan.FailTimeout
				if c.Name == "n2" {
					c.WrapTransport = func(tr transport.Transport) transport.Transport {
						return cutFrom{Transport: tr, cut: func(to core.NodeID) bool { return cutting.Load() && to == n4 }}
					}
				}
			})
			n4 = gs[3].ID()
			cutting.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := gs[1].Leave(ctx); err != nil {
				t.Fatalf("leave: %v", err)
			}
			closeAll(gs[1])
			views := map[string]map[uint64]group.View{}
			var epoch uint64
			for _, g := range []*group.Group{gs[0], gs[2], gs[3]} {
				views[g.Name()] = collectViews(t, g, members(1, 3, 4))
				v := g.View()
				if !slices.Equal(names(v.Left), []string{"n2"}) || !slices.Equal(names(v.Departed), []string{"n2"}) {
					t.Errorf("%s: view %v departed %v left %v, want n2 left", g.Name(), v, names(v.Departed), names(v.Left))
				}
				if epoch != 0 && v.Epoch != epoch {
					t.Errorf("%s delivers the view without n2 as %#x, another as %#x", g.Name(), v.Epoch, epoch)
				}
				epoch = v.Epoch
			}
			sameLeftPerEpoch(t, views)
		})
	}
}

// A leaver cut off from every member from the moment it leaves (nobody
// hears its announcement) is excluded as a failed member, at every member
// alike, and its Leave is never confirmed. The heartbeat detector counts
// any traffic as a sign of life, so this also checks that a leaver sends
// nothing that would keep it in the group.
func TestLeaveUnheardIsADeparture(t *testing.T) {
	var cutting atomic.Bool
	gs := startGroup(t, 3, group.DetectorHeartbeat, func(c *group.Config) {
		if c.Name == "n2" {
			c.WrapTransport = func(tr transport.Transport) transport.Transport {
				return cutFrom{Transport: tr, cut: func(core.NodeID) bool { return cutting.Load() }}
			}
		}
	})
	cutting.Store(true)
	left := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { left <- gs[1].Leave(ctx) }()
	views := map[string]map[uint64]group.View{}
	for _, g := range []*group.Group{gs[0], gs[2]} {
		views[g.Name()] = collectViews(t, g, members(1, 3))
		if v := g.View(); len(v.Left) != 0 || !slices.Equal(names(v.Departed), []string{"n2"}) {
			t.Errorf("%s: view %v departed %v left %v, want n2 departed, nobody left", g.Name(), v, names(v.Departed), names(v.Left))
		}
	}
	sameLeftPerEpoch(t, views)
	select {
	case err := <-left:
		t.Fatalf("Leave returned %v with nobody having heard the leave", err)
	default:
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("Leave returned %v, want context.Canceled", err)
	}
}

// A leave races the leaver's end: Close follows Leave at once, the
// announcement reaching some members or none. Whatever each member makes
// of it, every epoch any two delivered after the same view reports the
// same Left: a left member for all, or a departed one for all.
func TestLeaveRacingClose(t *testing.T) {
	for i := range 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			gs := startGroup(t, 4, group.DetectorBRR, nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { gs[2].Leave(ctx); close(done) }()
			closeAll(gs[2])
			cancel()
			<-done
			views := map[string]map[uint64]group.View{}
			for _, g := range []*group.Group{gs[0], gs[1], gs[3]} {
				views[g.Name()] = collectViews(t, g, members(1, 2, 4))
			}
			sameLeftPerEpoch(t, views)
		})
	}
}
