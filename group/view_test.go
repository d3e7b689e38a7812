package group_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// viewOf is a view of members named names, in that order.
func viewOf(epoch uint64, names ...string) group.View {
	v := group.View{Epoch: epoch}
	for i, n := range names {
		v.Members = append(v.Members, group.Member{ID: group.NodeID(i), Name: n})
	}
	return v
}

// Owner is a function of the members' names: the same in every copy of a
// view, whatever the order; a departure moves only the departed member's
// keys, a join only the keys the joiner takes; keys spread evenly.
// Leader is the first member.
func TestOwnerAndLeader(t *testing.T) {
	v := viewOf(7, "a", "b", "c", "d", "e")
	shuffled := viewOf(7, "d", "b", "e", "a", "c")
	without := viewOf(8, "a", "b", "d", "e")
	with := viewOf(9, "a", "b", "c", "d", "e", "f")
	const keys = 10000
	count := map[string]int{}
	for i := range keys {
		k := fmt.Sprint("key-", i)
		o := v.Owner(k)
		count[o.Name]++
		if s := shuffled.Owner(k); s.Name != o.Name {
			t.Fatalf("%s: owner %s, in another order %s", k, o.Name, s.Name)
		}
		if w := without.Owner(k); o.Name != "c" && w.Name != o.Name {
			t.Fatalf("%s moved from %s to %s when c departed", k, o.Name, w.Name)
		}
		if w := with.Owner(k); w.Name != o.Name && w.Name != "f" {
			t.Fatalf("%s moved from %s to %s when f joined", k, o.Name, w.Name)
		}
	}
	for name, n := range count {
		if n < keys/5*8/10 || n > keys/5*12/10 {
			t.Errorf("%s owns %d of %d keys, want about %d", name, n, keys, keys/5)
		}
	}
	if l := v.Leader(); l.Name != "a" {
		t.Errorf("leader %s, want the first member a", l.Name)
	}
	if (group.View{}).Owner("k").Name != "" || (group.View{}).Leader().Name != "" {
		t.Error("an empty view has an owner or a leader")
	}
}

// A Delegate is told of views in order from one goroutine; while it is
// stuck (or not yet started), a queue of EventBuffer entries keeps the
// newest views and counts the oldest it drops, and the reader, released,
// sees the gap in Prev.
func TestDelegateSlowReader(t *testing.T) {
	release := make(chan struct{})
	seen := make(chan group.View, 100)
	c := testConfig(1, group.DetectorBRR)
	c.EventBuffer = 2
	c.Delegate = group.DelegateFuncs{View: func(v group.View) {
		<-release
		seen <- v
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := group.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(g)
	// Runs before closeAll: Close waits for the delegate, which a failed
	// check would otherwise leave stuck.
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	// Five changes make five more views; the stuck delegate holds one at
	// most, and the queue keeps two.
	for k := range 5 {
		if err := g.SetMeta(ctx, fmt.Appendf(nil, "m%d", k)); err != nil {
			t.Fatal(err)
		}
	}
	// SetMeta returns once the view is delivered; the delegate's queue is
	// given it just after, so the count of drops may trail by a view.
	for g.Stats().ViewsDropped < 3 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d views dropped, want at least 3", g.Stats().ViewsDropped)
		case <-time.After(time.Millisecond):
		}
	}
	unblock()
	var got []group.View
	for len(got) == 0 || got[len(got)-1].Epoch != g.View().Epoch {
		select {
		case v := <-seen:
			got = append(got, v)
		case <-ctx.Done():
			t.Fatalf("the delegate saw %d views, not the last", len(got))
		}
	}
	gap := got[0].Prev != 0 // the first view read was not the node's first
	for i := 1; i < len(got); i++ {
		if got[i].Epoch <= got[i-1].Epoch {
			t.Fatalf("views out of order: %v after %v", got[i], got[i-1])
		}
		gap = gap || got[i].Prev != got[i-1].Epoch
	}
	if !gap || len(got) > 3 {
		t.Errorf("the delegate saw %d views, gap %v: want at most 3 and a gap in Prev", len(got), gap)
	}
	if m, _ := got[len(got)-1].Member(g.ID()); string(m.Meta) != "m4" {
		t.Errorf("last view shows %q, want m4", m.Meta)
	}
}
