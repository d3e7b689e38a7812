package master

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

func newJob(t testing.TB, cfg Config) ([]chaos.Node[Msg], []*Node) {
	t.Helper()
	nodes := make([]chaos.Node[Msg], cfg.Ranks)
	raw := make([]*Node, cfg.Ranks)
	for r := range nodes {
		nd, err := New(cfg, r)
		if err != nil {
			t.Fatal(err)
		}
		raw[r] = nd
		nodes[r] = chaos.Adapt(nd, func(o Out) (int, Msg) { return o.To, o.Msg })
	}
	return nodes, raw
}

func seeds(t *testing.T, count int) []uint64 { return chaos.Seeds(t, *seedFlag, count) }

func TestNoFailuresExact(t *testing.T) {
	for _, seed := range seeds(t, 2) {
		for _, ranks := range []int{1, 2, 5} {
			for n := 6; n <= 10; n++ {
				cfg := Config{N: n, TaskDepth: 2, Ranks: ranks, CheckpointEvery: 3}
				rep, err := chaos.Run(chaos.Config{Seed: seed}, nodesOf(newJob(t, cfg)))
				if err != nil {
					t.Fatalf("seed %d %+v: %v", seed, cfg, err)
				}
				if rep.Count != queens.Known[n] {
					t.Fatalf("seed %d %+v: count %d, want %d", seed, cfg, rep.Count, queens.Known[n])
				}
			}
		}
	}
}

// Master–worker under crashes (Phoenix §5.2.1): up to a quarter of the ranks
// (or all but one), the master and its backup included, die at random
// steps; the count is always exact.
func TestChaosExact(t *testing.T) {
	count := 150
	if testing.Short() {
		count = 40
	}
	if *manyFlag > 0 {
		count = *manyFlag
	}
	kills, steps, masterKills := 0, 0, 0
	var sum Stats
	for _, seed := range seeds(t, count) {
		rng := rand.New(rand.NewPCG(seed, 1))
		ranks := 2 + rng.IntN(7)
		n := 8 + rng.IntN(4)
		cfg := Config{N: n, TaskDepth: 2 + rng.IntN(3), Ranks: ranks, CheckpointEvery: 1 + rng.IntN(8)}
		// A quarter of the ranks (the chaos runs), or in one run
		// of three every rank but one.
		maxKills := max(1, ranks/4)
		if rng.IntN(3) == 0 {
			maxKills = ranks - 1
		}
		sc := chaos.Config{Seed: seed, MaxKills: maxKills, KillChance: 0.01, Wire: wire}
		job, raw := newJob(t, cfg)
		rep, err := chaos.Run(sc, job)
		if err != nil {
			t.Fatalf("seed %d (%+v): %v after %d steps, killed %v", seed, cfg, err, rep.Steps, rep.Killed)
		}
		if rep.Count != queens.Known[n] {
			t.Fatalf("seed %d (%+v): count %d, want %d; killed %v at steps %v", seed, cfg, rep.Count, queens.Known[n], rep.Killed, rep.KillSteps)
		}
		kills += len(rep.Killed)
		steps += rep.Steps
		for i, k := range rep.Killed {
			if k == lowestAlive(rep.Killed[:i], ranks) {
				masterKills++
			}
		}
		for _, nd := range raw {
			st := nd.Stats()
			sum.Takeovers += st.Takeovers
			sum.Reassigned += st.Reassigned
			sum.Duplicates += st.Duplicates
			sum.FromBackup += st.FromBackup
		}
	}
	t.Logf("%d runs, %d steps, %d ranks killed (%d masters), %d takeovers starting from %d checkpointed results, %d tasks reassigned, %d duplicate results ignored; every count exact",
		count, steps, kills, masterKills, sum.Takeovers, sum.FromBackup, sum.Reassigned, sum.Duplicates)
	if *seedFlag == 0 && (masterKills == 0 || sum.Takeovers == 0 || sum.Reassigned == 0 || sum.FromBackup == 0) {
		t.Fatal("the runs did not exercise every recovery path (master deaths, takeovers from a checkpoint, reassignments)")
	}
}

func lowestAlive(killed []int, ranks int) int {
	for r := range ranks {
		dead := false
		for _, k := range killed {
			dead = dead || k == r
		}
		if !dead {
			return r
		}
	}
	return -1
}

func TestChaosDeterministic(t *testing.T) {
	cfg := Config{N: 9, TaskDepth: 3, Ranks: 6, CheckpointEvery: 2}
	sc := chaos.Config{Seed: 7, MaxKills: 2, KillChance: 0.01}
	a, errA := chaos.Run(sc, nodesOf(newJob(t, cfg)))
	b, errB := chaos.Run(sc, nodesOf(newJob(t, cfg)))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of one seed differ:\n%+v\n%+v", a, b)
	}
}

// The master dies after checkpointing some results: its backup takes over
// with them, the worker's unanswered request goes to the new master, and the
// count is exact.
func TestTakeoverFromCheckpoint(t *testing.T) {
	cfg := Config{N: 8, TaskDepth: 2, Ranks: 3, CheckpointEvery: 1}
	var nodes []*Node
	for r := range cfg.Ranks {
		nd, err := New(cfg, r)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	m, b, w := nodes[0], nodes[1], nodes[2]
	var deliver func(from int, outs []Out)
	deliver = func(from int, outs []Out) {
		for _, o := range outs {
			if nodes[o.To] == nil {
				continue // dead
			}
			deliver(o.To, nodes[o.To].Receive(from, o.Msg))
		}
	}
	start0 := m.Start()
	start1 := b.Start()
	start2 := w.Start()
	deliver(0, start0)
	deliver(1, start1)
	deliver(2, start2)
	// Worker 2 does three tasks with master 0; each result is checkpointed to 1.
	for range 3 {
		outs, busy := w.Work()
		if !busy {
			t.Fatal("worker has no task")
		}
		deliver(2, outs)
	}
	if got := len(b.store); got < 2 {
		t.Fatalf("backup holds %d results, want ≥ 2", got)
	}
	// Rank 1 held a task too and sends its result to 0 — lost with 0.
	if _, busy := b.Work(); !busy {
		t.Fatal("rank 1 has no task")
	}
	nodes[0] = nil
	deliver(1, b.Failed(0))
	deliver(2, w.Failed(0))
	if !b.IsMaster() || b.Stats().FromBackup == 0 {
		t.Fatalf("rank 1: master %v, started from %d results", b.IsMaster(), b.Stats().FromBackup)
	}
	for {
		outs, busy := w.Work()
		deliver(2, outs)
		if !busy {
			break
		}
	}
	got, done := b.Result()
	if !done || got != 92 {
		t.Fatalf("result %d (done %v), want 92", got, done)
	}
	if got, done := w.Result(); !done || got != 92 {
		t.Fatalf("worker got %d (done %v), want 92", got, done)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{N: 0, TaskDepth: 1, Ranks: 1, CheckpointEvery: 1}, {N: 8, TaskDepth: 0, Ranks: 1, CheckpointEvery: 1}, {N: 8, TaskDepth: 2, Ranks: 0, CheckpointEvery: 1}, {N: 8, TaskDepth: 2, Ranks: 1}} {
		if _, err := New(cfg, 0); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) error %v, want ErrConfig", cfg, err)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	msgs := []Msg{
		{Kind: KindRequest, Task: -1},
		{Kind: KindRequest, Task: -1, Entries: []Entry{{Task: 3, Count: 17}}},
		{Kind: KindTask, Task: 12},
		{Kind: KindCheckpoint, Task: -1, Entries: []Entry{{0, 1}, {5, 1 << 40}}},
		{Kind: KindDone, Task: -1, Count: 14772512},
	}
	for _, m := range msgs {
		got, err := DecodeMsg(m.AppendBinary(nil))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(m) {
			t.Errorf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {0}, {9, 0, 0, 0}, {1}, {1, 0, 0, 5, 1}, {1, 0, 0, 0, 0}} {
		if _, err := DecodeMsg(bad); !errors.Is(err, ErrDecode) {
			t.Errorf("DecodeMsg(%v) error %v, want ErrDecode", bad, err)
		}
	}
}

func FuzzDecodeMsg(f *testing.F) {
	f.Add(Msg{Kind: KindCheckpoint, Entries: []Entry{{1, 2}}}.AppendBinary(nil))
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
