package group

import (
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/member"
)

// The directory keeps the addresses of the most recently departed nodes
// (the membership probes them to heal partitions) and forgets older ones,
// telling the runtime to stop dialling them; a node that comes back is
// not forgotten.
func TestDirRemembersRecentDeparted(t *testing.T) {
	env := coretest.NewEnv(1, 1)
	d := newDir(1, "a1", nil, map[core.NodeID]string{2: "a2", 3: "a3", 4: "a4", 5: "a5"}, 2)
	d.Start(env)
	install := func(epoch uint64, members, departed []core.NodeID) {
		d.Handle(member.ViewInstalled{Epoch: epoch, Members: members, Departed: departed})
	}
	forgotten := func() []core.NodeID {
		var ids []core.NodeID
		for _, e := range env.Emitted {
			if f, ok := e.(AddrForgotten); ok {
				ids = append(ids, f.Node)
			}
		}
		return ids
	}
	install(1, []core.NodeID{1, 2, 3, 4, 5}, nil)
	install(2, []core.NodeID{1, 3, 4, 5}, []core.NodeID{2})
	install(3, []core.NodeID{1, 4, 5}, []core.NodeID{3})
	if got := forgotten(); len(got) != 0 {
		t.Fatalf("forgot %v with 2 departed, want none", got)
	}
	install(4, []core.NodeID{1, 5}, []core.NodeID{4})
	if got := forgotten(); !slices.Equal(got, []core.NodeID{2}) {
		t.Fatalf("forgot %v, want the oldest departed [n2]", got)
	}
	if _, ok := d.book[2]; ok {
		t.Error("n2's address is still in the book")
	}
	// n3 comes back: it is no longer departed, and n5's departure does not
	// forget it.
	install(5, []core.NodeID{1, 5, 3}, nil)
	install(6, []core.NodeID{1, 3}, []core.NodeID{5})
	if got := forgotten(); !slices.Equal(got, []core.NodeID{2}) {
		t.Fatalf("forgot %v, want only n2 (n3 is back; n4 and n5 are the 2 kept)", got)
	}
}
