package steal

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cohort-mp/cohort/examples/nqueens/internal/chaos"
	"github.com/cohort-mp/cohort/examples/nqueens/internal/queens"
)

var (
	seedFlag = flag.Uint64("seed", 0, "replay one chaos seed (0: random seeds)")
	manyFlag = flag.Int("runs", 0, "number of chaos runs (0: 150, 40 with -short)")
)

func wire(v any) (any, error) { return DecodeMsg(v.(Msg).AppendBinary(nil)) }

func newJob(t testing.TB, cfg Config, seed uint64) ([]chaos.Node[Msg], []*Node) {
	t.Helper()
	nodes := make([]chaos.Node[Msg], cfg.Ranks)
	raw := make([]*Node, cfg.Ranks)
	for r := range nodes {
		nd, err := New(cfg, r, rand.New(rand.NewPCG(seed, uint64(r))))
		if err != nil {
			t.Fatal(err)
		}
		raw[r] = nd
		nodes[r] = chaos.Adapt(nd, func(o Out) (int, Msg) { return o.To, o.Msg })
	}
	return nodes, raw
}

func seeds(t *testing.T, count int) []uint64 { return chaos.Seeds(t, *seedFlag, count) }

// Without failures every split of the tree adds up (Phoenix §5.2.2, §6).
func TestNoFailuresExact(t *testing.T) {
	for _, seed := range seeds(t, 3) {
		for _, ranks := range []int{1, 2, 3, 8} {
			for n := 6; n <= 10; n++ {
				cfg := Config{N: n, LeafDepth: 3, Ranks: ranks}
				rep, err := chaos.Run(chaos.Config{Seed: seed}, nodesOf(newJob(t, cfg, seed)))
				if err != nil {
					t.Fatalf("seed %d ranks %d n %d: %v", seed, ranks, n, err)
				}
				if rep.Count != queens.Known[n] {
					t.Fatalf("seed %d ranks %d n %d: count %d, want %d", seed, ranks, n, rep.Count, queens.Known[n])
				}
			}
		}
	}
}

// Random stealing under crashes (Phoenix §5.2.2): up to a quarter of the
// ranks (or all but one), the root holder included, are killed at random
// steps while messages are delivered in random order; the count is always
// exact.
func TestChaosExact(t *testing.T) {
	count := 150
	if testing.Short() {
		count = 40
	}
	if *manyFlag > 0 {
		count = *manyFlag
	}
	kills, steps := 0, 0
	var sum Stats
	for _, seed := range seeds(t, count) {
		rng := rand.New(rand.NewPCG(seed, 1))
		ranks := 2 + rng.IntN(7) // 2 … 8
		n := 8 + rng.IntN(4)     // 8 … 11
		cfg := Config{N: n, LeafDepth: 3 + rng.IntN(3), Ranks: ranks}
		cfg.CheckpointEvery = rng.IntN(10) // 0: a new root holder starts over
		// A quarter of the ranks (the chaos runs), or in one run
		// of three every rank but one.
		maxKills := max(1, ranks/4)
		if rng.IntN(3) == 0 {
			maxKills = ranks - 1
		}
		sc := chaos.Config{Seed: seed, MaxKills: maxKills, KillChance: 0.003, Wire: wire}
		job, raw := newJob(t, cfg, seed)
		rep, err := chaos.Run(sc, job)
		for _, nd := range raw {
			st := nd.Stats()
			sum.Requeued += st.Requeued
			sum.Abandoned += st.Abandoned
			sum.Given += st.Given
			sum.StaleDrops += st.StaleDrops
			sum.Takeovers += st.Takeovers
			sum.FromCkpt += st.FromCkpt
		}
		steps += rep.Steps
		if err != nil {
			t.Fatalf("seed %d (%+v): %v after %d steps, killed %v", seed, cfg, err, rep.Steps, rep.Killed)
		}
		if rep.Count != queens.Known[n] {
			t.Fatalf("seed %d (%+v): count %d, want %d; killed %v at steps %v", seed, cfg, rep.Count, queens.Known[n], rep.Killed, rep.KillSteps)
		}
		kills += len(rep.Killed)
	}
	t.Logf("%d runs, %d steps, %d ranks killed, %d units stolen, %d taken back from dead thieves, %d grants of dead givers dropped, %d stale messages ignored, %d root takeovers (restarting from %d checkpointed units); every count exact",
		count, steps, kills, sum.Given, sum.Requeued, sum.Abandoned, sum.StaleDrops, sum.Takeovers, sum.FromCkpt)
	if *seedFlag == 0 && (kills == 0 || sum.Requeued == 0 || sum.Abandoned == 0 || sum.StaleDrops == 0 || sum.Takeovers == 0 || sum.FromCkpt == 0) {
		t.Fatal("the runs did not exercise every recovery path (kills, requeues, abandons, stale messages)")
	}
}

// The same seed gives the same run.
func TestChaosDeterministic(t *testing.T) {
	seed := uint64(42)
	cfg := Config{N: 9, LeafDepth: 3, Ranks: 6}
	sc := chaos.Config{Seed: seed, MaxKills: 2, KillChance: 0.005, Protected: []int{0}}
	a, errA := chaos.Run(sc, nodesOf(newJob(t, cfg, seed)))
	b, errB := chaos.Run(sc, nodesOf(newJob(t, cfg, seed)))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed %d differ:\n%+v\n%+v", seed, a, b)
	}
}

// script helps the scripted tests: it steps a small job by hand.
type script struct {
	t     *testing.T
	nodes []*Node
}

func newScript(t *testing.T, cfg Config) *script {
	s := &script{t: t}
	for r := range cfg.Ranks {
		nd, err := New(cfg, r, rand.New(rand.NewPCG(1, uint64(r))))
		if err != nil {
			t.Fatal(err)
		}
		s.nodes = append(s.nodes, nd)
	}
	return s
}

func only(t *testing.T, outs []Out, kind Kind) Out {
	t.Helper()
	for _, o := range outs {
		if o.Msg.Kind == kind {
			return o
		}
	}
	t.Fatalf("no %v among %+v", kind, outs)
	return Out{}
}

// A thief dies holding a gift: the victim takes the unit back and the total
// stays exact; a late Result from the dead thief is ignored.
func TestThiefDiesUnitRedone(t *testing.T) {
	s := newScript(t, Config{N: 8, LeafDepth: 2, Ranks: 2})
	root, thief := s.nodes[0], s.nodes[1]
	root.Start()
	st := only(t, thief.Start(), KindSteal)
	if st.To != 0 {
		t.Fatalf("steal to %d", st.To)
	}
	grant := only(t, root.Receive(1, st.Msg), KindGrant)
	// The thief finishes its unit and reports, but dies before the
	// result arrives; the root learns of the death first.
	thief.Receive(0, grant.Msg)
	var result Out
	for result.Msg.Kind != KindResult {
		outs, _ := thief.Work()
		for _, o := range outs {
			if o.Msg.Kind == KindResult {
				result = o
			}
		}
	}
	root.Failed(1)
	if root.Stats().Requeued != 1 {
		t.Fatalf("requeued %d units, want 1", root.Stats().Requeued)
	}
	root.Receive(1, result.Msg) // late: from a dead rank
	for {
		if _, busy := root.Work(); !busy {
			break
		}
	}
	got, done := root.Result()
	if !done || got != 92 {
		t.Fatalf("result %d (done %v), want 92", got, done)
	}
}

// A Result for a gift already taken back is not added twice.
func TestStaleResultIgnored(t *testing.T) {
	s := newScript(t, Config{N: 8, LeafDepth: 2, Ranks: 3})
	root := s.nodes[0]
	root.Start()
	grant := only(t, root.Receive(1, Msg{Kind: KindSteal}), KindGrant)
	want, _ := queens.CountPrefix(8, grant.Msg.Prefix)
	root.Failed(1)
	// Same gift id, sent by the dead thief before it died.
	root.Receive(1, Msg{Kind: KindResult, Gift: grant.Msg.Gift, Count: want})
	// And by a live rank that never held it.
	root.Receive(2, Msg{Kind: KindResult, Gift: grant.Msg.Gift, Count: want})
	if got := root.Stats().StaleDrops; got != 2 {
		t.Fatalf("stale drops %d, want 2", got)
	}
	for {
		if _, busy := root.Work(); !busy {
			break
		}
	}
	if got, done := root.Result(); !done || got != 92 {
		t.Fatalf("result %d (done %v), want 92", got, done)
	}
}

// A victim dies after giving a unit away: the thief drops the grant and
// cancels what it gave from it further down.
func TestGiverDiesGrantAbandoned(t *testing.T) {
	s := newScript(t, Config{N: 10, LeafDepth: 4, Ranks: 4})
	a, b, c := s.nodes[1], s.nodes[2], s.nodes[3]
	// Rank 1 got a unit from rank 0 (scripted), rank 2 steals from 1, rank 3 from 2.
	a.Receive(0, Msg{Kind: KindGrant, Gift: 7, Prefix: queens.Prefix{0}})
	g1 := only(t, a.Receive(2, Msg{Kind: KindSteal}), KindGrant)
	b.Receive(1, g1.Msg)
	g2 := only(t, b.Receive(3, Msg{Kind: KindSteal}), KindGrant)
	c.Receive(2, g2.Msg)
	// Rank 1 dies: rank 2 abandons its grant and cancels the gift to 3.
	outs := b.Failed(1)
	cancel := only(t, outs, KindCancel)
	if cancel.To != 3 || cancel.Msg.Gift != g2.Msg.Gift {
		t.Fatalf("cancel %+v, want gift %d to rank 3", cancel, g2.Msg.Gift)
	}
	if gr, gf := b.Outstanding(); gr != 0 || gf != 0 || !b.Idle() {
		t.Fatalf("rank 2 still holds %d grants, %d gifts, idle %v", gr, gf, b.Idle())
	}
	c.Receive(2, cancel.Msg)
	if gr, _ := c.Outstanding(); gr != 0 || !c.Idle() {
		t.Fatalf("rank 3 still holds %d grants after cancel", gr)
	}
}

// The root holder dies (protecting the root, see the package doc): the
// next rank takes over from the newest snapshot, or from scratch without
// one, and the count is exact.
func TestRootTakeover(t *testing.T) {
	for _, every := range []int{0, 1, 5} {
		s := newScript(t, Config{N: 8, LeafDepth: 2, Ranks: 3, CheckpointEvery: every})
		root, heir := s.nodes[0], s.nodes[1]
		for _, o := range root.Start() {
			s.nodes[o.To].Receive(0, o.Msg)
		}
		// Rank 2 steals a unit; rank 0 works a while, checkpointing.
		g := only(t, root.Receive(2, Msg{Kind: KindSteal}), KindGrant)
		s.nodes[2].Receive(0, g.Msg)
		for range 12 {
			outs, _ := root.Work()
			for _, o := range outs {
				s.nodes[o.To].Receive(0, o.Msg)
			}
		}
		// Rank 0 dies. Rank 2 drops the grant it got from it; rank 1
		// becomes the holder.
		s.nodes[2].Failed(0)
		if gr, _ := s.nodes[2].Outstanding(); gr != 0 {
			t.Fatalf("every=%d: rank 2 kept %d grants of the dead root", every, gr)
		}
		heir.Failed(0)
		if !heir.IsRoot() || heir.Stats().Takeovers != 1 {
			t.Fatalf("every=%d: rank 1 did not take over: %+v", every, heir.Stats())
		}
		if every > 0 && heir.Stats().FromCkpt == 0 {
			t.Fatalf("every=%d: rank 1 started from scratch despite snapshots", every)
		}
		for {
			if _, busy := heir.Work(); !busy {
				break
			}
		}
		if got, done := heir.Result(); !done || got != 92 {
			t.Fatalf("every=%d: result %d (done %v), want 92", every, got, done)
		}
		// A done node answers a late steal with Done.
		if o := only(t, heir.Receive(2, Msg{Kind: KindSteal}), KindDone); o.Msg.Count != 92 {
			t.Fatalf("late steal answered with %+v", o)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{N: 0, LeafDepth: 1, Ranks: 1}, {N: 8, LeafDepth: 0, Ranks: 1}, {N: 8, LeafDepth: 9, Ranks: 1}, {N: 8, LeafDepth: 2, Ranks: 0}} {
		if _, err := New(cfg, 0, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) error %v, want ErrConfig", cfg, err)
		}
	}
	if _, err := New(Config{N: 8, LeafDepth: 2, Ranks: 2}, 2, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrConfig) {
		t.Errorf("rank out of range: error %v", err)
	}
}

func TestWireRoundTrip(t *testing.T) {
	msgs := []Msg{
		{Kind: KindSteal},
		{Kind: KindGrant, Gift: 300, Prefix: queens.Prefix{1, 3, 5}},
		{Kind: KindNoWork},
		{Kind: KindResult, Gift: 1 << 40, Count: 14772512},
		{Kind: KindCancel, Gift: 9},
		{Kind: KindDone, Count: 92},
		{Kind: KindCheckpoint, Gift: 4, Count: 10, Units: []queens.Prefix{nil, {1, 3}, {0}}},
	}
	for _, m := range msgs {
		got, err := DecodeMsg(m.AppendBinary(nil))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(m) {
			t.Errorf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {0}, {99, 0, 0, 0, 0}, {1}, {1, 0}, {1, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0, 0, 7}, {7, 0, 0, 0, 2, 0}} {
		if _, err := DecodeMsg(bad); !errors.Is(err, ErrDecode) {
			t.Errorf("DecodeMsg(%v) error %v, want ErrDecode", bad, err)
		}
	}
}

func FuzzDecodeMsg(f *testing.F) {
	f.Add(Msg{Kind: KindGrant, Gift: 3, Prefix: queens.Prefix{0, 2}}.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMsg(b)
		if err != nil {
			return
		}
		again, err := DecodeMsg(m.AppendBinary(nil))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(m) {
			t.Fatalf("re-encoding %+v gave %+v, %v", m, again, err)
		}
	})
}

func nodesOf(nodes []chaos.Node[Msg], _ []*Node) []chaos.Node[Msg] { return nodes }
