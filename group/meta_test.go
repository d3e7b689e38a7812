package group_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// viewLog records, per node, the views its Delegate was told of.
type viewLog struct {
	mu    sync.Mutex
	views map[string]map[uint64][]group.Member // node → epoch → members
}

func (l *viewLog) delegate(name string) group.Delegate {
	return group.DelegateFuncs{View: func(v group.View) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.views[name] == nil {
			l.views[name] = map[uint64][]group.Member{}
		}
		l.views[name][v.Epoch] = v.Members
	}}
}

// Metadata changed at run time, while a member crashes and another joins:
// at every member, the metadata delivered with epoch E is the same, and
// every change is delivered.
func TestMetaSameAtEveryMemberPerEpoch(t *testing.T) {
	log := &viewLog{views: map[string]map[uint64][]group.Member{}}
	withMeta := func(c *group.Config) {
		c.Meta = []byte(c.Name + "/0")
		c.Delegate = log.delegate(c.Name)
	}
	gs := startGroup(t, 4, group.DetectorBRR, withMeta)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const changes = 4
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, g := range gs[1:3] {
		wg.Go(func() {
			for k := 1; k <= changes; k++ {
				if err := g.SetMeta(ctx, fmt.Appendf(nil, "%s/%d", g.Name(), k)); err != nil {
					errs <- fmt.Errorf("%s: SetMeta %d: %w", g.Name(), k, err)
					return
				}
			}
		})
	}
	// Churn: n4 crashes, n5 joins, while the changes go on.
	closeAll(gs[3])
	c5 := testConfig(5, group.DetectorBRR)
	withMeta(&c5)
	n5, err := join(ctx, c5, gs[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(n5)
	if err := n5.SetMeta(ctx, []byte("n5/1")); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every live member ends with every last value.
	final := map[string]string{"n1": "n1/0", "n2": fmt.Sprint("n2/", changes), "n3": fmt.Sprint("n3/", changes), "n5": "n5/1"}
	live := []*group.Group{gs[0], gs[1], gs[2], n5}
	for _, g := range live {
		waitView(t, g.Views(), g.Name()+" final metadata", func(v group.View) bool {
			if len(v.Members) != len(final) {
				return false
			}
			for _, m := range v.Members {
				if final[m.Name] != string(m.Meta) {
					return false
				}
			}
			return true
		})
	}
	closeAll(live...) // the delegates have returned: the log is complete

	log.mu.Lock()
	defer log.mu.Unlock()
	byEpoch := map[uint64][]group.Member{}
	holders := map[uint64][]string{}
	for name, views := range log.views {
		for e, ms := range views {
			if prev, ok := byEpoch[e]; ok && !slices.EqualFunc(prev, ms, sameMember) {
				t.Errorf("epoch %d: %s delivered %v, %s %v", e, name, metas(ms), holders[e][0], metas(prev))
			}
			byEpoch[e] = ms
			holders[e] = append(holders[e], name)
		}
	}
	shared, distinct := 0, map[string]bool{}
	for e, hs := range holders {
		if len(hs) >= 3 {
			shared++
		}
		for _, m := range byEpoch[e] {
			distinct[m.Name+"="+string(m.Meta)] = true
		}
	}
	// 2·changes changes of n2 and n3, n5's, the initial values.
	if shared < changes || len(distinct) < 2*changes+4 {
		t.Errorf("only %d epochs delivered at 3 members or more, %d distinct values seen: the test saw too little", shared, len(distinct))
	}
}

func metas(ms []group.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name+"="+string(m.Meta))
	}
	return out
}
