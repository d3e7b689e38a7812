package comm

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// Over TCP a newcomer registers late with the launcher's rendezvous:
// every member's transport learns its address first, it asks the
// processes of its table to admit it, and the members, once their views
// hold it, add it with Grow; an Allreduce on the grown communicator
// includes it, and the members place it on its host (HostOf).
func TestNewcomerOverTCP(t *testing.T) {
	const n = 3
	secret := bytes.Repeat([]byte{7}, 32)
	rv, err := launch.NewRendezvous(launch.RendezvousConfig{JobID: "commtest", Secret: secret, Size: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	boot := func(p int) launch.Bootstrap {
		return launch.Bootstrap{JobID: "commtest", Rank: p, Size: n, Rendezvous: rv.Addr(), Secret: secret, Newcomer: p >= n}
	}
	ss := make([]*Session, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() { ss[p], errs[p] = initBootstrap(ctx, boot(p), quiet) })
	}
	wg.Wait()
	t.Cleanup(func() {
		fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer fcancel()
		var wg sync.WaitGroup
		for _, s := range ss {
			if s != nil {
				wg.Go(func() { s.Finalize(fctx) })
			}
		}
		wg.Wait()
	})
	if _, err := initBootstrap(ctx, boot(n), quiet, AllowSpares()); err == nil || !errors.Is(err, launch.ErrRendezvous) {
		t.Fatalf("a newcomer the launcher did not expect: %v, want a refusal", err)
	}
	if _, err := initBootstrap(ctx, boot(n), quiet); !errors.Is(err, ErrSpare) {
		t.Fatalf("a newcomer of a program without spares: %v, want ErrSpare", err)
	}
	if err := rv.Expect(n); err != nil {
		t.Fatal(err)
	}
	nc, err := initBootstrap(ctx, boot(n), quiet, AllowSpares())
	if err != nil {
		t.Fatal(err)
	}
	ss[n] = nc
	if !nc.IsNewcomer() || nc.Process() != n || nc.Processes() != nil {
		t.Fatalf("newcomer: IsNewcomer %v, process %d, Processes %v", nc.IsNewcomer(), nc.Process(), nc.Processes())
	}
	waitNewcomers(ctx, t, ss[:n], []int{n})
	grown := make([]*Comm, n+1)
	for p := range n {
		if h := ss[p].HostOf(n); h != "127.0.0.1" {
			t.Errorf("process %d: HostOf(%d) = %q, want 127.0.0.1", p, n, h)
		}
		wg.Go(func() { grown[p], errs[p] = ss[p].World().Grow([]int{n}, []byte("hi")) })
	}
	wg.Wait()
	c, payload, err := nc.Welcome(ctx)
	if err != nil || string(payload) != "hi" {
		t.Fatalf("Welcome: %q, %v", payload, err)
	}
	grown[n], errs[n] = c, nil
	for p := range n + 1 {
		if errs[p] != nil {
			t.Fatalf("process %d: %v", p, errs[p])
		}
		wg.Go(func() {
			sum := []int{p}
			errs[p] = Allreduce(ctx, grown[p], sum, sum, Sum[int]())
			if errs[p] == nil && sum[0] != 6 {
				errs[p] = errors.New("wrong sum")
			}
		})
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", p, err)
		}
	}
}

// Before its welcome a newcomer takes frames for contexts of no
// communicator (the data lane may overtake the welcome over TCP), for a
// bounded number of contexts; once it has a communicator, the window
// rule of every process applies again.
func TestNewcomerTakesDataBeforeItsWelcome(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss, err := Local(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := JoinLocal(ss[0])
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, testTimeout)
	defer tcancel()
	waitNewcomers(tctx, t, ss, []int{2})
	id := childID(ss[0].World().st.id, ss[0].World().st.created.Load()+1)
	ok := func(ctxID uint64) bool {
		nc.mu.Lock()
		defer nc.mu.Unlock()
		return nc.contextErrLocked(0, ctxID) == nil
	}
	if !ok(id | subColl) {
		t.Fatalf("before its welcome, the newcomer refuses the grown communicator's frames")
	}
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() { s.World().Grow([]int{2}, nil) })
	}
	wg.Wait()
	if _, _, err := nc.Welcome(tctx); err != nil {
		t.Fatal(err)
	}
	if ok(12345 << 8) {
		t.Errorf("after its welcome, the newcomer takes a context of no communicator")
	}
	for _, s := range append(ss, nc) {
		s.Finalize(context.Background())
	}
}
