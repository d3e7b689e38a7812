package group_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp/tcptest"
	"github.com/cohort-mp/cohort/wire"
)

var testSecret = []byte("0123456789abcdef-group-test")

// testConfig is node n<id>'s configuration (named so: ids are derived
// from names).
func testConfig(id int, det group.Detector) group.Config {
	c := group.DefaultLocalConfig()
	c.Name = fmt.Sprint("n", id)
	c.Cluster = "group-test"
	c.Secret = testSecret
	c.Detector = det
	return c
}

// waitView reads views from ch until one satisfies ok, or fails the test
// after a deadline.
func waitView(t *testing.T, ch <-chan group.View, what string, ok func(group.View) bool) group.View {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case v, open := <-ch:
			if !open {
				t.Fatalf("%s: views channel closed", what)
			}
			if ok(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("%s: no such view within 30 s", what)
		}
	}
}

// names lists the names of ms, sorted.
func names(ms []group.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// members is a view whose members are n<id> for ids.
func members(ids ...int) func(group.View) bool {
	var want []string
	for _, id := range ids {
		want = append(want, fmt.Sprint("n", id))
	}
	slices.Sort(want)
	return func(v group.View) bool { return slices.Equal(names(v.Members), want) }
}

// join starts cfg with seeds.
func join(ctx context.Context, cfg group.Config, seeds ...string) (*group.Group, error) {
	cfg.Seeds = group.SeedList(seeds)
	return group.New(ctx, cfg)
}

func closeAll(gs ...*group.Group) {
	for _, g := range gs {
		if g != nil {
			g.Close(context.Background())
		}
	}
}

// startGroup starts node 1 and has nodes 2…n join through it; it returns
// them once every node has installed the view of all n.
func startGroup(t *testing.T, n int, det group.Detector, tweak func(*group.Config)) []*group.Group {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := testConfig(1, det)
	if tweak != nil {
		tweak(&cfg)
	}
	first, err := group.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gs := []*group.Group{first}
	t.Cleanup(func() { closeAll(gs...) })
	for id := 2; id <= n; id++ {
		cfg := testConfig(id, det)
		if tweak != nil {
			tweak(&cfg)
		}
		g, err := join(ctx, cfg, first.Addr())
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		gs = append(gs, g)
	}
	var all []int
	for id := 1; id <= n; id++ {
		all = append(all, id)
	}
	for _, g := range gs {
		waitView(t, g.Views(), fmt.Sprintf("node %v", g.ID()), members(all...))
	}
	return gs
}

func TestJoinCrashAgree(t *testing.T) {
	for _, det := range []group.Detector{group.DetectorBRR, group.DetectorHeartbeat} {
		t.Run(string(det), func(t *testing.T) {
			gs := startGroup(t, 4, det, nil)
			// Crash node 3 (no leave): the survivors agree on one view
			// without it, reported as departed, not as left.
			closeAll(gs[2])
			var views []group.View
			for _, g := range []*group.Group{gs[0], gs[1], gs[3]} {
				v := waitView(t, g.Views(), fmt.Sprintf("node %v", g.ID()), members(1, 2, 4))
				if !slices.Equal(names(v.Departed), []string{"n3"}) || len(v.Left) != 0 {
					t.Errorf("node %v: %+v: want 3 departed and nobody left", g.ID(), v)
				}
				views = append(views, v)
			}
			for _, v := range views[1:] {
				if v.Epoch != views[0].Epoch || !slices.EqualFunc(v.Members, views[0].Members, sameMember) {
					t.Errorf("survivors disagree: %v vs %v", v, views[0])
				}
			}
		})
	}
}

func TestRootCrash(t *testing.T) {
	gs := startGroup(t, 4, group.DetectorBRR, nil)
	root := gs[0].View().Leader()
	var rest []*group.Group
	var ids []int
	for i, g := range gs {
		if g.ID() == root.ID {
			closeAll(g)
			continue
		}
		rest = append(rest, g)
		ids = append(ids, i+1)
	}
	var epoch uint64
	for _, g := range rest {
		v := waitView(t, g.Views(), fmt.Sprintf("node %v", g.ID()), members(ids...))
		if epoch != 0 && v.Epoch != epoch {
			t.Errorf("node %v installs %v, another %d", g.ID(), v, epoch)
		}
		epoch = v.Epoch
	}
}

func TestLeaveIsNotAFailure(t *testing.T) {
	gs := startGroup(t, 3, group.DetectorBRR, nil)
	sus := gs[0].Suspicions()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gs[1].Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	closeAll(gs[1])
	for _, g := range []*group.Group{gs[0], gs[2]} {
		v := waitView(t, g.Views(), fmt.Sprintf("node %v", g.ID()), members(1, 3))
		if !slices.Equal(names(v.Left), []string{"n2"}) {
			t.Errorf("node %v: view %v has Left %v, want [2]", g.ID(), v, v.Left)
		}
	}
	for {
		select {
		case s := <-sus:
			if s.Node == gs[1].ID() && s.Kind == group.Declared {
				t.Errorf("the leaver was declared failed")
			}
			continue
		default:
		}
		break
	}
}

// A crashed node restarted under its name, from another address, rejoins
// as itself (same name, same id): the others learn the new address, and
// reach it directly.
func TestRejoinAfterCrashUnderSameName(t *testing.T) {
	gs := startGroup(t, 3, group.DetectorBRR, nil)
	old := gs[2].ID()
	closeAll(gs[2])
	waitView(t, gs[0].Views(), "node 1", members(1, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := join(ctx, testConfig(3, group.DetectorBRR), gs[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(g)
	if g.ID() != old || g.Name() != "n3" {
		t.Fatalf("restarted as %q id %v, want n3 id %v", g.Name(), g.ID(), old)
	}
	for _, x := range []*group.Group{gs[0], gs[1], g} {
		waitView(t, x.Views(), fmt.Sprintf("node %v", x.ID()), members(1, 2, 3))
	}
	// Node 1 must be able to reach the new node 3 directly: a crash of
	// node 2 leaves them to agree between themselves.
	closeAll(gs[1])
	for _, x := range []*group.Group{gs[0], g} {
		waitView(t, x.Views(), fmt.Sprintf("node %v", x.ID()), members(1, 3))
	}
}

func TestMulticastSameDeliveries(t *testing.T) {
	gs := startGroup(t, 3, group.DetectorBRR, func(c *group.Config) { c.Multicast = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const per = 20
	for i := range per {
		for _, g := range gs {
			for {
				err := g.Multicast(ctx, []byte(fmt.Sprintf("%v:%d", g.ID(), i)))
				if errors.Is(err, group.ErrMulticastFull) {
					time.Sleep(time.Millisecond) // back-pressure: wait for stability
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	}
	want := len(gs) * per
	var first []string
	for _, g := range gs {
		got := map[group.NodeID][]string{}
		n := 0
		for n < want {
			select {
			case d := <-g.Deliveries():
				got[d.Sender] = append(got[d.Sender], string(d.Payload))
				n++
			case <-ctx.Done():
				t.Fatalf("node %v: %d of %d deliveries", g.ID(), n, want)
			}
		}
		var flat []string
		for _, s := range gs {
			for i, p := range got[s.ID()] {
				if w := fmt.Sprintf("%v:%d", s.ID(), i); p != w {
					t.Fatalf("node %v: from %v got %q at %d, want %q (per-sender order)", g.ID(), s.ID(), p, i, w)
				}
			}
			flat = append(flat, got[s.ID()]...)
		}
		if first == nil {
			first = flat
		} else if !slices.Equal(first, flat) {
			t.Errorf("node %v delivered other messages than node 1", g.ID())
		}
	}
}

func TestBadConfigAndSeeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, tweak := range map[string]func(*group.Config){
		"short secret":          func(c *group.Config) { c.Secret = []byte("short") },
		"unknown detector":      func(c *group.Config) { c.Detector = "gossip" },
		"negative idle timeout": func(c *group.Config) { c.IdleTimeout = -time.Second },
		"unspecified bind":      func(c *group.Config) { c.BindAddr = "0.0.0.0:0" },
		"long name":             func(c *group.Config) { c.Name = strings.Repeat("x", group.MaxNameLen+1) },
		"large metadata":        func(c *group.Config) { c.Meta = make([]byte, group.MaxMetaSize+1) },
		"negative buffer":       func(c *group.Config) { c.EventBuffer = -1 },
	} {
		c := testConfig(1, group.DetectorBRR)
		tweak(&c)
		if g, err := group.New(ctx, c); !errors.Is(err, group.ErrConfig) {
			closeAll(g)
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}

	first, err := group.New(ctx, testConfig(1, group.DetectorBRR))
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(first)
	// Another node under the same name: a duplicate, not an unreachable
	// seed.
	if g, err := join(ctx, testConfig(1, group.DetectorBRR), first.Addr()); !errors.Is(err, group.ErrDuplicate) {
		closeAll(g)
		t.Errorf("same name: got %v, want ErrDuplicate", err)
	}
	// A seed that knows another secret.
	c := testConfig(2, group.DetectorBRR)
	c.Secret = []byte("another secret, 16+ bytes")
	if g, err := join(ctx, c, first.Addr()); !errors.Is(err, group.ErrSecret) {
		closeAll(g)
		t.Errorf("another secret: got %v, want ErrSecret", err)
	}
	// A seed of another cluster.
	c = testConfig(2, group.DetectorBRR)
	c.Cluster = "another"
	if g, err := join(ctx, c, first.Addr()); !errors.Is(err, group.ErrCluster) {
		closeAll(g)
		t.Errorf("another cluster: got %v, want ErrCluster", err)
	}
	// A seed source that fails.
	c = testConfig(2, group.DetectorBRR)
	c.Seeds = failingSeeds{}
	if g, err := group.New(ctx, c); !errors.Is(err, group.ErrNoSeed) {
		closeAll(g)
		t.Errorf("failing seed source: got %v, want ErrNoSeed", err)
	}
	// Metadata too large at run time.
	if err := first.SetMeta(ctx, make([]byte, group.MaxMetaSize+1)); !errors.Is(err, group.ErrTooLarge) {
		t.Errorf("SetMeta too large: got %v, want ErrTooLarge", err)
	}
}

type failingSeeds struct{}

func (failingSeeds) Seeds(context.Context) ([]string, error) {
	return nil, errors.New("no such service")
}

// sameMember compares members with their metadata.
func sameMember(a, b group.Member) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Addr == b.Addr && string(a.Meta) == string(b.Meta)
}

// A group whose connections are all mutual TLS forms, and agrees after a
// crash, like a plain one.
func TestTLSGroup(t *testing.T) {
	tc := tcptest.SelfSignedTLS(t)
	gs := startGroup(t, 3, group.DetectorBRR, func(c *group.Config) { c.TLS = tc })
	closeAll(gs[2])
	for _, g := range gs[:2] {
		waitView(t, g.Views(), fmt.Sprintf("node %v", g.ID()), members(1, 2))
	}
}

// Eight nodes join a group of one at once, through the same seed. A
// member admitted in one view may be the parent, in the next, of a node
// that was still waiting: it must know that node's address (fails without
// the whole address book being sent to joiners: some joiners were never
// admitted, their parent's frames waiting for an address for ever).
func TestConcurrentJoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := group.New(ctx, testConfig(1, group.DetectorBRR))
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(first)
	var wg sync.WaitGroup
	gs := make([]*group.Group, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			gs[i], errs[i] = join(ctx, testConfig(i+2, group.DetectorBRR), first.Addr())
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i+2, err)
		} else {
			defer closeAll(gs[i])
		}
	}
	all := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	for i, g := range gs {
		if g != nil {
			waitView(t, g.Views(), fmt.Sprint("node ", i+2), members(all...))
		}
	}
}

// WrapTransport puts a wrapper under the node's protocols: a wrapper that
// drops everything one node sends makes the others exclude it (it is cut
// off), and a wrapper that returns nil is refused.
func TestWrapTransport(t *testing.T) {
	var mu sync.Mutex
	var mute bool
	var muted int
	gs := startGroup(t, 3, group.DetectorBRR, func(c *group.Config) {
		if c.Name != "n3" {
			return
		}
		c.WrapTransport = func(tr transport.Transport) transport.Transport {
			return dropping{Transport: tr, drop: func() bool {
				mu.Lock()
				defer mu.Unlock()
				if mute {
					muted++
				}
				return mute
			}}
		}
	})
	mu.Lock()
	mute = true
	mu.Unlock()
	waitView(t, gs[0].Views(), "node 3 excluded", members(1, 2))
	mu.Lock()
	if muted == 0 {
		t.Error("the wrapper saw none of node 3's frames")
	}
	mu.Unlock()

	c := testConfig(9, group.DetectorBRR)
	c.WrapTransport = func(transport.Transport) transport.Transport { return nil }
	if g, err := group.New(context.Background(), c); err == nil {
		closeAll(g)
		t.Fatal("a WrapTransport returning nil was accepted")
	} else if !errors.Is(err, group.ErrConfig) {
		t.Errorf("error %v, want one wrapping ErrConfig", err)
	}
}

// dropping drops every frame while drop says so.
type dropping struct {
	transport.Transport
	drop func() bool
}

func (d dropping) Send(ctx context.Context, to core.NodeID, f wire.Frame) error {
	if d.drop() {
		return nil
	}
	return d.Transport.Send(ctx, to, f)
}
