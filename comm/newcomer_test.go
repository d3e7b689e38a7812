package comm

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// waitNewcomers waits until every session lists want as its newcomers.
func waitNewcomers(ctx context.Context, t *testing.T, ss []*Session, want []int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		for _, s := range ss {
			all = all && slices.Equal(s.Newcomers(), want)
		}
		if all {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			for _, s := range ss {
				t.Logf("process %d: newcomers %v", s.self, s.Newcomers())
			}
			t.Fatalf("newcomers %v not admitted everywhere", want)
		}
	}
}

// A job of 3 ranks and 1 spare loses process 1; a newcomer joins through
// the membership (process 4, the first after the 4 of the start), the
// survivors add it to their communicator with Grow, and it gets the same
// communicator and the payload from Welcome. On the grown communicator an
// Allreduce includes it; then process 2 fails, and the newcomer agrees
// with the others on the survivors (Shrink), having learned of that
// failure from the views alone.
func TestNewcomerGrowAndShrink(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss, err := LocalSpares(ctx, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, testTimeout)
	defer tcancel()
	if _, _, err := ss[0].Welcome(tctx); !errors.Is(err, ErrNotNewcomer) {
		t.Fatalf("Welcome at a process of the start: %v, want ErrNotNewcomer", err)
	}
	ss[1].kill()
	live := []*Session{ss[0], ss[2], ss[3]}
	for _, s := range live {
		waitFailure(t, tctx, s, 1)
	}
	nc, err := JoinLocal(ss[0])
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(ss), nc)
	t.Cleanup(func() {
		for _, s := range all {
			s.Finalize(context.Background())
		}
	})
	if !nc.IsNewcomer() || !nc.IsSpare() || nc.World() != nil || nc.Processes() != nil || nc.self != 4 || nc.Started() != 4 {
		t.Fatalf("newcomer: IsNewcomer %v IsSpare %v World %v Processes %v, process %d of a job started with %d", nc.IsNewcomer(), nc.IsSpare(), nc.World(), nc.Processes(), nc.self, nc.Started())
	}
	waitNewcomers(tctx, t, live, []int{4})

	grown := make([]*Comm, 5)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for _, s := range live {
		p := int(s.self)
		wg.Add(1)
		go func() {
			defer wg.Done()
			next, err := s.Processes().Shrink(tctx)
			if err == nil {
				grown[p], err = next.Grow([]int{4}, []byte("payload"))
			}
			errs[p] = err
		}()
	}
	wg.Wait()
	c, payload, err := nc.Welcome(tctx)
	if err != nil {
		t.Fatal(err)
	}
	grown[4] = c
	if string(payload) != "payload" {
		t.Fatalf("payload %q", payload)
	}
	for _, p := range []int{0, 2, 3, 4} {
		if errs[p] != nil {
			t.Fatalf("process %d: %v", p, errs[p])
		}
		g := grown[p]
		var members []int
		for r := range g.Size() {
			members = append(members, g.WorldRank(r))
		}
		if !slices.Equal(members, []int{0, 2, 3, 4}) || g.WorldRank(g.Rank()) != p {
			t.Fatalf("process %d: grown communicator %v, rank %d", p, members, g.Rank())
		}
	}
	for _, p := range []int{0, 2, 3, 4} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum := []int{p}
			errs[p] = Allreduce(tctx, grown[p], sum, sum, Sum[int]())
			if errs[p] == nil && sum[0] != 9 {
				errs[p] = errors.New("wrong sum")
			}
		}()
	}
	wg.Wait()
	ss[2].kill()
	for _, p := range []int{0, 3, 4} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next, err := grown[p].Shrink(tctx)
			if err == nil && (next.Size() != 3 || next.WorldRank(2) != 4) {
				err = errors.New("wrong survivors")
			}
			errs[p] = err
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", p, err)
		}
	}
}

// Grow refuses a process that no view admitted, one listed twice, and a
// member.
func TestGrowRefusesUnknownNewcomers(t *testing.T) {
	ss := job(t, 2)
	for _, list := range [][]int{{2}, {5}, {1}, {-1}} {
		if _, err := ss[0].World().Grow(list, nil); !errors.Is(err, ErrBadArg) {
			t.Errorf("Grow(%v): %v, want ErrBadArg", list, err)
		}
	}
}

// A welcome parses or is refused with errMalformed, never a panic, and
// what parses encodes back the same way.
func FuzzWelcome(f *testing.F) {
	f.Add(appendWelcome(nil, welcomeMsg{id: 8, epoch: 3<<32 | 1, members: []core.NodeID{0, 2, 4}, failed: []core.NodeID{2}, payload: []byte("x")}))
	f.Add([]byte{8, 1, 2, 0, 0, 0})
	f.Add([]byte{9})
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := parseWelcome(p, 10)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v does not wrap errMalformed", err)
			}
			return
		}
		back, err := parseWelcome(appendWelcome(nil, m), 10)
		if err != nil || back.id != m.id || back.epoch != m.epoch || !slices.Equal(back.members, m.members) || !slices.Equal(back.failed, m.failed) || string(back.payload) != string(m.payload) {
			t.Fatalf("%+v encodes to %+v (%v)", m, back, err)
		}
	})
}
