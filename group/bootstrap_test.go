package group_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// freeAddrs returns n loopback addresses with ports free now, taken
// below the kernel's ephemeral range so that no outbound connection of a
// test running beside this one is given the port between this check and
// the group's bind.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	const base = 10000
	if lo <= base+1000 {
		t.Skipf("ephemeral port range starts at %d: no room below it", lo)
	}
	var out []string
	for try := 0; len(out) < n && try < 10000; try++ {
		port := base + rand.IntN(lo-base)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil || slices.Contains(out, addr) {
			continue
		}
		l.Close()
		out = append(out, addr)
	}
	if len(out) < n {
		t.Fatalf("found %d free ports below %d, want %d", len(out), lo, n)
	}
	return out
}

// Five nodes started at the same instant, each with the same list of all
// five as seeds (its own address among them, written as localhost in one
// round: the node must recognize itself), form one group: every New
// returns, and all five deliver one view of the five. Three rounds, in
// fresh ports (a second group would never merge with the first, and the
// view of five would not come).
func TestSimultaneousStartOneGroup(t *testing.T) {
	const n = 5
	portTaken := 0
	for round := 0; round < 3; round++ {
		addrs := freeAddrs(t, n)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		gs := make([]*group.Group, n)
		errs := make([]error, n)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range n {
			wg.Go(func() {
				cfg := testConfig(10*round+i, group.DetectorBRR)
				cfg.BindAddr = addrs[i]
				seeds := slices.Clone(addrs)
				if round == 1 {
					seeds[i] = strings.Replace(seeds[i], "127.0.0.1", "localhost", 1)
				}
				cfg.Seeds = group.SeedList(seeds)
				start.Wait()
				gs[i], errs[i] = group.New(ctx, cfg)
			})
		}
		start.Done()
		wg.Wait()
		if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
			closeAll(gs...)
			cancel()
			// Another test's listener took a port between freeAddrs's
			// check and the group's bind (packages' tests run in
			// parallel and pick ports in the same range): the round
			// starts again in fresh ports, a few times at most.
			if errors.Is(errs[i], syscall.EADDRINUSE) && portTaken < 3 {
				portTaken++
				round--
				continue
			}
			t.Fatalf("round %d: node %d: %v", round, i, errs[i])
		}
		var want []int
		for i := range n {
			want = append(want, 10*round+i)
		}
		// One group: the view of five is one epoch, with one leader.
		var first group.View
		for i, g := range gs {
			v := waitView(t, g.Views(), fmt.Sprintf("round %d: node %d", round, i), members(want...))
			if i == 0 {
				first = v
			} else if v.Epoch != first.Epoch || v.Leader().ID != first.Leader().ID {
				t.Errorf("round %d: node %d holds %v led by %v, node 0 %v led by %v", round, i, v, v.Leader(), first, first.Leader())
			}
		}
		closeAll(gs...)
		cancel()
	}
}

// fnvID is the id group derives from name (Member.ID: FNV-1a, 32 bits).
func fnvID(name string) group.NodeID {
	h := fnv.New32a()
	h.Write([]byte(name))
	return group.NodeID(h.Sum32())
}

// A node that decided to join a lower node which then crashed before
// forming is not stuck: not admitted, it probes its seeds again, finds
// nobody, and forms a group of its own.
func TestJoinerWhoseFormerCrashedProbesAgain(t *testing.T) {
	low, high := "n-low", "n-high"
	for i := 0; fnvID(low) > fnvID(high); i++ {
		low = fmt.Sprint("n-low-", i)
	}
	// A seed that accepts connections and never answers holds the low
	// node's probe phase (the handshake waits), so it is undecided when
	// the high node probes it.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	addrs := freeAddrs(t, 1)
	lctx, crash := context.WithCancel(context.Background())
	lowDone := make(chan error, 1)
	go func() {
		c := testConfig(0, group.DetectorBRR)
		c.Name, c.BindAddr, c.Seeds = low, addrs[0], group.SeedList{hole.Addr().String()}
		g, err := group.New(lctx, c)
		closeAll(g)
		lowDone <- err
	}()
	// The high node reaches the low one (retrying until it listens) and
	// decides to join it; then the low one crashes.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := testConfig(0, group.DetectorBRR)
	seeds := &countingSeeds{list: group.SeedList{addrs[0]}}
	c.Name, c.Seeds = high, seeds
	type result struct {
		g   *group.Group
		err error
	}
	highDone := make(chan result, 1)
	time.AfterFunc(200*time.Millisecond, func() {
		g, err := group.New(ctx, c)
		highDone <- result{g, err}
	})
	time.AfterFunc(time.Second, crash)
	if err := <-lowDone; err == nil {
		t.Fatal("the low node formed a group: the test needs it stuck probing")
	}
	r := <-highDone
	if r.err != nil {
		t.Fatalf("the high node: %v", r.err)
	}
	defer closeAll(r.g)
	if v := r.g.View(); len(v.Members) != 1 || v.Members[0].Name != high {
		t.Fatalf("the high node's view %v, want itself alone", v)
	}
	if n := seeds.calls.Load(); n < 2 {
		t.Errorf("the seed source was read %d times, want once per round of probes (2 or more)", n)
	}
}

// countingSeeds counts the reads of a seed list.
type countingSeeds struct {
	list  group.SeedList
	calls atomic.Int32
}

func (c *countingSeeds) Seeds(ctx context.Context) ([]string, error) {
	c.calls.Add(1)
	return c.list.Seeds(ctx)
}
