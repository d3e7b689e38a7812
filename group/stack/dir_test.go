package stack

import (
	"fmt"
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

// A joiner's address is flooded once, by the seed the joiner introduces
// itself to; the members that learn it from that flood, and a joiner that
// learns everybody's address from the books, pass nothing on. When every
// member passed on whatever was new to it, one address cost n² messages
// and each joiner sent its n-entry book to all n members: the joins of 64
// nodes in one process sent 69,000 address messages, and the heartbeats
// queued behind them got live members declared failed.
func TestDirFloodsOnlyIntroductions(t *testing.T) {
	const n = 8
	var members []core.NodeID
	book := map[core.NodeID]string{}
	for id := core.NodeID(1); id <= n; id++ {
		members = append(members, id)
		book[id] = fmt.Sprintf("a%d", id)
	}
	node := func(id core.NodeID) (*dir, *coretest.Env) {
		env := coretest.NewEnv(id, 1)
		d := newDir(id, book[id], nil, book, 64)
		d.Start(env)
		d.Handle(member.ViewInstalled{Epoch: 1, Members: members})
		env.TakeSent()
		return d, env
	}

	// The seed floods the introduction to the view and to the nodes it
	// knows of beyond it (n9: admitted in a view the seed has not
	// installed yet, or waiting), and answers the joiner.
	seed, env := node(1)
	seed.Receive(9, &Addrs{Entries: []Entry{{9, "a9"}}})
	seed.Receive(100, &Addrs{Reply: true, Entries: []Entry{{100, "a100"}}})
	var to []core.NodeID
	for _, s := range env.TakeSent() {
		to = append(to, s.To)
	}
	slices.Sort(to)
	if want := []core.NodeID{2, 3, 4, 5, 6, 7, 8, 9, 100}; !slices.Equal(to, want) {
		t.Errorf("the seed sent to %v, want every other member, n9 and the joiner %v", to, want)
	}

	// A member that learns the address from the flood, or several new
	// ones from a book, sends nothing.
	m, env := node(2)
	m.Receive(1, &Addrs{Entries: []Entry{{100, "a100"}}})
	m.Receive(3, &Addrs{Entries: []Entry{{101, "a101"}, {102, "a102"}, {103, "a103"}}})
	if sent := env.TakeSent(); len(sent) != 0 {
		t.Errorf("a member passed on addresses it learnt: %d messages, first to %v", len(sent), sent[0].To)
	}
	if m.book[100] != "a100" || m.book[103] != "a103" {
		t.Errorf("the member did not learn the addresses: %v", m.book)
	}
}

// When a view with joiners is installed, the root alone tells them the
// addresses (its whole book: it admitted every member); the other members
// send them nothing. When every member sent its book, a joiner got n books
// of n entries and a connection from every member, and the joins of a
// group of 128 in one process were slowed down until live members were
// declared failed.
func TestDirOnlyRootTellsJoiners(t *testing.T) {
	old := []core.NodeID{1, 2, 3, 4, 5, 6}
	joiners := []core.NodeID{7, 8}
	members := append(slices.Clone(old), joiners...)
	book := map[core.NodeID]string{}
	for _, id := range members {
		book[id] = fmt.Sprintf("a%d", id)
	}
	for _, self := range old {
		env := coretest.NewEnv(self, 1)
		d := newDir(self, book[self], nil, book, 64)
		d.Start(env)
		d.Handle(member.ViewInstalled{Epoch: 1, Members: old})
		env.TakeSent()
		d.Handle(member.ViewInstalled{Epoch: 2, Members: members, Joined: joiners})
		// Only the addresses: the root's metadata questions and
		// publication are TestDirPublishesMetaOnce's.
		sent := slices.DeleteFunc(env.TakeSent(), func(s coretest.Sent) bool {
			_, ok := s.Msg.(*Addrs)
			return !ok
		})
		if self != 1 {
			if len(sent) != 0 {
				t.Errorf("n%d, not the root, sent %d messages to the joiners, first to %v", self, len(sent), sent[0].To)
			}
			continue
		}
		var to []core.NodeID
		for _, s := range sent {
			a, ok := s.Msg.(*Addrs)
			if !ok || len(a.Entries) != len(members) {
				t.Errorf("the root sent %v to %v, want its whole book (%d entries)", s.Msg, s.To, len(members))
			}
			to = append(to, s.To)
		}
		if !slices.Equal(to, joiners) {
			t.Errorf("the root told %v, want the joiners %v", to, joiners)
		}
	}
}

// The root of a view publishes its members' metadata once it knows all of
// it: it asks the member it lacks, publishes one MetaView in view order to
// the others, and, when a member changes its metadata, asks its membership
// for a new epoch. A MetaView that does not come from its epoch's root is
// ignored.
func TestDirPublishesMetaOnce(t *testing.T) {
	book := map[core.NodeID]string{1: "a1", 2: "a2", 3: "a3"}
	env := coretest.NewEnv(1, 1)
	d := newDir(1, "a1", nil, book, 8)
	d.metas[1] = metaRec{ver: 1, name: "one"}
	d.Start(env)
	d.Receive(2, &Meta{ID: 2, Ver: 4, Name: "two", Meta: []byte("x")})
	epoch := member.MakeEpoch(1, 1)
	d.Handle(member.ViewInstalled{Epoch: epoch, Members: []core.NodeID{1, 2, 3}})
	sent := env.TakeSent()
	if len(sent) != 1 || sent[0].To != 3 || !sent[0].Msg.(*Meta).Ask {
		t.Fatalf("with n3's metadata missing the root sent %v, want one question to n3", sent)
	}
	d.Receive(3, &Meta{ID: 3, Ver: 2, Name: "three"})
	var to []core.NodeID
	for _, s := range env.TakeSent() {
		mv, ok := s.Msg.(*MetaView)
		if !ok {
			continue
		}
		to = append(to, s.To)
		want := []MetaEntry{{1, 1, "one", "a1", nil}, {2, 4, "two", "a2", []byte("x")}, {3, 2, "three", "a3", nil}}
		if mv.Epoch != epoch || fmt.Sprint(mv.Entries) != fmt.Sprint(want) {
			t.Fatalf("published %v, want epoch %d with %v", mv, epoch, want)
		}
	}
	if !slices.Equal(to, []core.NodeID{2, 3}) {
		t.Fatalf("published to %v, want [n2 n3]", to)
	}
	refreshes := func() (n int) {
		for _, e := range env.Emitted {
			if _, ok := e.(member.Refresh); ok {
				n++
			}
		}
		env.Emitted = nil
		return n
	}
	d.Receive(2, &Meta{ID: 2, Ver: 4, Name: "two", Meta: []byte("x")})
	if n := refreshes(); n != 0 {
		t.Fatalf("a version already published asked for %d new epochs", n)
	}
	d.Receive(2, &Meta{ID: 2, Ver: 5, Name: "two", Meta: []byte("y")})
	if n := refreshes(); n != 1 {
		t.Fatalf("a member's change asked for %d new epochs, want 1", n)
	}

	m := newDir(2, "a2", nil, book, 8)
	menv := coretest.NewEnv(2, 1)
	m.Start(menv)
	m.Receive(3, &MetaView{Epoch: epoch, Entries: []MetaEntry{{ID: 1, Ver: 9, Name: "forged"}}})
	for _, e := range menv.Emitted {
		if _, ok := e.(MetaPublished); ok {
			t.Fatal("a MetaView from a node other than its epoch's root was taken")
		}
	}
}
