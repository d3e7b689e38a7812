package group_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// countingMetrics records the counters a node reports.
type countingMetrics struct {
	mu     sync.Mutex
	counts map[string]int64
	gauges map[string]float64
}

func (m *countingMetrics) Count(name string, d int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts[name] += d
}

func (m *countingMetrics) Gauge(name string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gauges[name] = v
}

func (m *countingMetrics) Duration(string, time.Duration) {}

// TestSwarm drives a group through a seeded random sequence of joins,
// crashes and graceful leaves, through the public API only, and after each
// step requires every live node to install one view (same epoch, same
// members) holding exactly the live nodes. Replay a failure with the
// printed COHORT_SEED.
func TestSwarm(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("COHORT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (replay: COHORT_SEED=%d go test ./group -run TestSwarm)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	live := map[int]*group.Group{}
	metrics := map[int]*countingMetrics{}
	defer func() {
		for _, g := range live {
			closeAll(g)
		}
	}()
	next := 1
	add := func() {
		id := next
		next++
		cfg := testConfig(id, group.DetectorBRR)
		m := &countingMetrics{counts: map[string]int64{}, gauges: map[string]float64{}}
		cfg.Metrics = m
		var seeds []string
		for _, x := range live {
			seeds = append(seeds, x.Addr())
		}
		slices.Sort(seeds)
		rng.Shuffle(len(seeds), func(i, j int) { seeds[i], seeds[j] = seeds[j], seeds[i] })
		g, err := join(ctx, cfg, seeds...)
		if err != nil {
			t.Fatalf("seed %d: node %v: %v", seed, id, err)
		}
		live[id], metrics[id] = g, m
	}
	ids := func() []int {
		var out []int
		for id := range live {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	settle := func(step string) {
		want := ids()
		var first group.View
		for _, id := range want {
			v := waitView(t, live[id].Views(), fmt.Sprintf("seed %d: %s: node %v", seed, step, id), members(want...))
			if first.Epoch == 0 {
				first = v
			} else if v.Epoch != first.Epoch {
				t.Fatalf("seed %d: %s: node %v installs %v, node %v %v", seed, step, id, v, want[0], first)
			}
		}
	}
	for range 3 {
		add()
	}
	settle("start")
	for step := range 8 {
		all := ids()
		switch op := rng.IntN(3); {
		case op == 0 || len(all) <= 2:
			add()
			settle(fmt.Sprintf("step %d: join of %v", step, next-1))
		case op == 1:
			id := all[rng.IntN(len(all))]
			closeAll(live[id])
			delete(live, id)
			settle(fmt.Sprintf("step %d: crash of %v", step, id))
		default:
			id := all[rng.IntN(len(all))]
			if err := live[id].Leave(ctx); err != nil {
				t.Fatalf("seed %d: step %d: leave of %v: %v", seed, step, id, err)
			}
			closeAll(live[id])
			delete(live, id)
			settle(fmt.Sprintf("step %d: leave of %v", step, id))
		}
	}
	for id, m := range metrics {
		if _, ok := live[id]; !ok {
			continue
		}
		m.mu.Lock()
		if m.counts["views_installed"] < 1 || int(m.gauges["members"]) != len(live) {
			t.Errorf("node %v: metrics %v %v, want views and members = %d", id, m.counts, m.gauges, len(live))
		}
		m.mu.Unlock()
	}
}
