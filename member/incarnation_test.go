package member

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// TestRestartedJoinerRefusesItsFormerPlace: a restarted process (a joiner,
// new incarnation) that holds a proposal admitting it must not accept the
// next proposal of the same root if that one lists its id with the
// incarnation of the process before the restart. Accepting it, it was
// counted as that former member: a root made a majority of an installed
// view that the restart had halved with it, and the views forked (the
// oracle swarm, seed 29180, majority). The same proposal with the joiner's
// own incarnation is accepted (the check is not vacuous).
func TestRestartedJoinerRefusesItsFormerPlace(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Fanout = 2
	m, err := NewJoiner(cfg, JoinOptions{Contacts: []core.NodeID{0}, Recovered: true})
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(2, 3)
	m.Start(env)
	env.TakeSent()
	inc := m.inc
	if inc == 0 {
		t.Fatal("a joiner with incarnation 0")
	}
	base := MakeEpoch(1, 0) // [n0 n1 n2 n3], every incarnation 0
	acks := func() (n int) {
		for _, s := range env.TakeSent() {
			if _, ok := s.Msg.(*Ack); ok {
				n++
			}
		}
		return n
	}

	// P1 drops the former n2 and admits this process: n2 is at place 3 of
	// [n0 n1 n3 n2], under n1.
	p1 := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{base},
		Failed: []core.NodeID{2}, Joined: []Joiner{{ID: 2, Inc: inc}}, Committed: true,
		Full: true, Members: []core.NodeID{0, 1, 3, 2}, Incs: []Joiner{{ID: 2, Inc: inc}}}
	m.Receive(1, p1)
	if got := acks(); got != 1 {
		t.Fatalf("the proposal admitting the joiner: %d ACKs, want 1", got)
	}

	// P2 replaces P1 and keeps n2 at incarnation 0, at place 2 of
	// [n0 n1 n2], under n0: that is the former process's place.
	former := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(3, 0), Ancestry: []uint64{base},
		Failed: []core.NodeID{3}, Committed: true, Full: true, Members: []core.NodeID{0, 1, 2}}
	m.Receive(0, former)
	if got := acks(); got != 0 {
		t.Fatalf("a proposal listing the former incarnation was acknowledged (%d ACKs)", got)
	}
	if m.accepted != nil && m.accepted.epoch == former.Epoch {
		t.Fatalf("the joiner holds %s, which lists its former incarnation", FormatEpoch(former.Epoch))
	}

	// The same replacement with this process's incarnation is accepted.
	own := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(4, 0), Ancestry: []uint64{base},
		Failed: []core.NodeID{2, 3}, Joined: []Joiner{{ID: 2, Inc: inc}}, Committed: true,
		Full: true, Members: []core.NodeID{0, 1, 2}, Incs: []Joiner{{ID: 2, Inc: inc}}}
	m.Receive(0, own)
	if got := acks(); got != 1 {
		t.Fatalf("the replacement with the joiner's incarnation: %d ACKs, want 1", got)
	}
}
