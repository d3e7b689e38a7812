package member

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// TestMergeRetriedWhileViewStays: a member told that a newer view without
// it exists asks that view's root to admit it, a few times; when those
// tries go unanswered (the root was cut off from it just then) it gives
// up, but tries again at each probe while it still holds the same view.
// The members of its view may all be alive, reachable and in the newer
// view, so that its detector never declares them and nobody tells it
// again: without the retry it kept its view for good (the partial
// partition swarm, gossip seed 30257 and heartbeat seed 38535). Every
// other retry goes through a member of its own view, which forwards it to
// its root.
func TestMergeRetriedWhileViewStays(t *testing.T) {
	cfg := DefaultConfig()
	m, err := New(cfg, ids(0, 1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(2, 1)
	m.Start(env)
	env.TakeSent()
	newer := MakeEpoch(5, 7)
	m.Receive(7, &Notice{Epoch: newer, Root: 7})
	joins := func() []core.NodeID {
		var to []core.NodeID
		for _, s := range env.TakeSent() {
			if _, ok := s.Msg.(*JoinRequest); ok {
				to = append(to, s.To)
			}
		}
		return to
	}
	if to := joins(); len(to) != 1 || to[0] != 7 {
		t.Fatalf("on the notice asked %v to admit us, want n7", to)
	}
	env.Advance(time.Duration(maxMergeTries)*cfg.JoinRetry+cfg.JoinRetry/2, m)
	if to := joins(); len(to) != maxMergeTries-1 {
		t.Fatalf("retried the merge through %v, want %d more tries", to, maxMergeTries-1)
	}
	env.Advance(2*cfg.ProbeInterval, m)
	to := joins()
	if len(to) < 2 || to[0] != 7 || to[1] != 0 && to[1] != 1 && to[1] != 3 {
		t.Fatalf("after giving up asked %v, want n7 again, then a member of the node's view", to)
	}
}

// TestRetriedMergeAsksRootHeldFailed: a member cut off from the rest of
// its view declared them all failed, and stays in a minority of it; told
// of a newer view whose root is one of them, it asks through the outsider
// that told it, gives up when those tries go unanswered, and retries at
// each probe, every other try through a member of its own view (n1, dead
// here) and the others to the newer view's root, which it holds failed.
// Given every try, as a merge whose root is held failed gives them, the
// dead member took them all, and the node stayed outside for good (the
// partial-partition swarm, gossip seed 17536).
func TestRetriedMergeAsksRootHeldFailed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Partition = PartitionMajority
	m, err := New(cfg, ids(0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(2, 1)
	m.Start(env)
	m.Handle(core.Failed{Node: 0})
	m.Handle(core.Failed{Node: 1})
	env.TakeSent()
	if !m.IsRoot() || m.View().Epoch != MakeEpoch(1, 0) {
		t.Fatalf("n2 holds %s, root %v: want the initial view, n2 its root in a minority", FormatEpoch(m.View().Epoch), m.IsRoot())
	}
	joins := func() []core.NodeID {
		var to []core.NodeID
		for _, s := range env.TakeSent() {
			if _, ok := s.Msg.(*JoinRequest); ok {
				to = append(to, s.To)
			}
		}
		return to
	}
	m.Receive(7, &Notice{Epoch: MakeEpoch(5, 0), Root: 0})
	env.Advance(time.Duration(maxMergeTries)*cfg.JoinRetry+cfg.JoinRetry/2, m)
	if to := joins(); len(to) != maxMergeTries || slices.ContainsFunc(to, func(id core.NodeID) bool { return id != 7 }) {
		t.Fatalf("merging asked %v, want n7, which told, %d times (the root is held failed)", to, maxMergeTries)
	}
	// The retry starts at the next probe, and its tries follow every
	// JoinRetry.
	env.Advance(cfg.ProbeInterval+time.Duration(maxMergeTries-1)*cfg.JoinRetry, m)
	to := joins()
	if want := []core.NodeID{0, 1, 0, 1}; !slices.Equal(to, want) {
		t.Fatalf("retrying the merge asked %v, want %v: the newer view's root and the member of n2's view in turn", to, want)
	}
}
