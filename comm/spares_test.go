package comm

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cohort-mp/cohort/launch"
)

// A job of 3 ranks and 1 spare: the world has the 3 ranks (nil at the
// spare), Processes all 4; Create over Processes gives rank 1 to the spare
// (process 3), and a message to rank 1 reaches it there, not process 1.
func TestSparesCreateRetargetsARank(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss, err := LocalSpares(ctx, 3, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range ss {
			s.Finalize(context.Background())
		}
	})
	for p, s := range ss {
		spare := p == 3
		if s.IsSpare() != spare || s.Spares() != 1 || s.Processes().Size() != 4 || s.Processes().Rank() != p {
			t.Fatalf("process %d: IsSpare %v, Spares %d, Processes %d/%d", p, s.IsSpare(), s.Spares(), s.Processes().Rank(), s.Processes().Size())
		}
		if spare != (s.World() == nil) {
			t.Fatalf("process %d: World %v", p, s.World())
		}
		if !spare && (s.World().Size() != 3 || s.World().Rank() != p) {
			t.Fatalf("process %d: world rank %d of %d", p, s.World().Rank(), s.World().Size())
		}
	}
	tctx, tcancel := context.WithTimeout(ctx, testTimeout)
	defer tcancel()
	mapping := []int{0, 3, 2} // rank 1 now held by process 3
	comms := make([]*Comm, 4)
	for p, s := range ss {
		if comms[p], err = s.Processes().Create(mapping); err != nil {
			t.Fatal(err)
		}
	}
	if comms[1] != nil {
		t.Fatalf("process 1, left out, got a communicator")
	}
	if comms[3].Rank() != 1 || comms[3].Size() != 3 || comms[3].WorldRank(1) != 3 {
		t.Fatalf("the spare is rank %d of %d", comms[3].Rank(), comms[3].Size())
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for _, p := range []int{0, 2, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := comms[p]
			sum := []int{c.Rank() + 1}
			errs[p] = Allreduce(tctx, c, sum, sum, Sum[int]())
			if errs[p] == nil && sum[0] != 6 {
				errs[p] = errors.New("wrong sum")
			}
			if c.Rank() == 0 {
				errs[p] = errors.Join(errs[p], c.Send(tctx, []byte("to rank 1"), 1, 5))
			}
			if c.Rank() == 1 {
				buf := make([]byte, 16)
				st, err := c.Recv(tctx, buf, 0, 5)
				if err == nil && string(buf[:st.Count]) != "to rank 1" {
					err = errors.New("wrong message")
				}
				errs[p] = errors.Join(errs[p], err)
			}
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", p, err)
		}
	}
	for _, bad := range [][]int{{0, 0}, {4}, {-1}} {
		if _, err := ss[0].Processes().Create(bad); !errors.Is(err, ErrRank) {
			t.Errorf("Create(%v): got %v, want ErrRank", bad, err)
		}
	}
}

// A job without spares: Processes is the world.
func TestSparesNoneProcessesIsWorld(t *testing.T) {
	ss := job(t, 2)
	if ss[0].Processes() != ss[0].World() || ss[0].IsSpare() || ss[0].Spares() != 0 {
		t.Fatalf("Processes %p, World %p", ss[0].Processes(), ss[0].World())
	}
}

// Init refuses to make a spare of a program that did not say it takes
// spares, before it touches the network.
func TestSparesInitRefusesWithoutAllowSpares(t *testing.T) {
	boot := launch.Bootstrap{JobID: "j", Rank: 3, Size: 4, Spares: 1, Rendezvous: "127.0.0.1:1", Secret: make([]byte, 16)}
	if _, err := initBootstrap(context.Background(), boot); !errors.Is(err, ErrSpare) {
		t.Fatalf("got %v, want ErrSpare", err)
	}
	if !boot.IsSpare() {
		t.Fatal("process 3 of 4 with 1 spare is not a spare")
	}
}

// HostOf reads the host from the address table: loopback addresses are
// one host, a name stays a name, a Local job knows none.
func TestSparesHostOf(t *testing.T) {
	ss := job(t, 1)
	s := ss[0]
	if h := s.HostOf(0); h != "" {
		t.Fatalf("a Local job: HostOf(0) = %q, want \"\"", h)
	}
	s.addrs = []string{"127.0.0.1:4000", "127.0.0.2:4001", "10.0.0.2:5000", "node7:5000"}
	for p, want := range []string{"127.0.0.1", "127.0.0.1", "10.0.0.2", "node7", ""} {
		if got := s.HostOf(p); got != want {
			t.Errorf("HostOf(%d) = %q, want %q", p, got, want)
		}
	}
}
