package resil

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// takeoverTimes is one takeover's time line across the survivors, from
// the victim's crash: to the last survivor's report of the failure
// (detection and view change), to the last agreement that the attempt
// ended, to the last survivor's restart (the recovery: Shrink, the new
// map, the inventories' Allgather and the state transfers).
type takeoverTimes struct {
	heard, ended, restarted time.Duration
}

// takeover runs a Local job of n ranks and one spare whose ranks
// Allreduce and checkpoint stateBytes each every 10 iterations (paced
// 2 ms), crashes rank n/2's process at iteration 25 and returns the
// takeover's time line. ok is false for a run the load spoiled: a live
// process excluded (its detectors starved) as well as the victim, which
// leaves the job a spare short.
func takeover(tb testing.TB, n, stateBytes int) (t takeoverTimes, ok bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ss, err := comm.LocalSpares(ctx, n, 1)
	if err != nil {
		tb.Fatal(err)
	}
	victim := n / 2
	var crashed time.Time
	stats := make([]Stats, len(ss))
	errs := make([]error, len(ss))
	ranks := make([]int, len(ss))
	var wg sync.WaitGroup
	for p, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Finalize(context.Background())
			j, err := New(s, DefaultConfig())
			if err != nil {
				errs[p] = err
				return
			}
			errs[p] = j.Run(ctx, func(ctx context.Context, c *comm.Comm, state []byte, _ int) error {
				it := 0
				if state != nil {
					it = int(binary.LittleEndian.Uint64(state))
				}
				buf := make([]byte, max(stateBytes, 8))
				for ; it < 40; it++ {
					if it%10 == 0 && it > 0 {
						binary.LittleEndian.PutUint64(buf, uint64(it))
						if err := j.Checkpoint(ctx, buf); err != nil {
							return err
						}
					}
					if p == victim && it == 25 && j.Stats().Restarts == 0 {
						crashed = time.Now()
						crashSession(s)
						return errors.New("crashed")
					}
					x := []int64{1}
					if err := comm.Allreduce(ctx, c, x, x, comm.Sum[int64]()); err != nil {
						return err
					}
					time.Sleep(2 * time.Millisecond)
				}
				return nil
			})
			stats[p], ranks[p] = j.Stats(), j.Rank()
		}()
	}
	wg.Wait()
	var heard, ended, restarted time.Time
	for p := range ss {
		if errors.Is(errs[p], comm.ErrEvicted) || errors.Is(errs[p], ErrNoSpare) {
			tb.Logf("spoiled: process %d: %v", p, errs[p])
			return t, false
		}
	}
	for p := range ss {
		if p == victim {
			continue
		}
		if errs[p] != nil || stats[p].Restarts != 1 {
			tb.Fatalf("process %d: %v, %d restarts (want 1)", p, errs[p], stats[p].Restarts)
		}
		to := stats[p].Takeovers[0]
		if to.Heard.After(heard) {
			heard = to.Heard
		}
		if to.Ended.After(ended) {
			ended = to.Ended
		}
		if to.Restarted.After(restarted) {
			restarted = to.Restarted
		}
	}
	if ranks[n] != victim || heard.IsZero() {
		tb.Fatalf("the spare holds rank %d (want %d); failure heard at %v", ranks[n], victim, heard)
	}
	return takeoverTimes{heard: heard.Sub(crashed), ended: ended.Sub(crashed), restarted: restarted.Sub(crashed)}, true
}

// BenchmarkTakeover measures a spare's takeover in a Local job (each
// process a full node: failure detector, membership and matching, over an
// in-memory network, with loopback timings), 16 KiB of state per rank.
// Metrics, from the crash, each the latest over the survivors and the
// median over the runs: heard-ms (detection and view change), ended-ms
// (the agreement that the attempt ended), restarted-ms (the recovery
// done: the takeover), and recovery-ms, restarted − ended; max-restarted-ms
// is the slowest run's. A run in which the load made the detectors
// exclude a live process is logged, counted in spoiled and run again (at
// most b.N times).
//
//	go test -run '^$' -bench Takeover -benchtime 9x ./resil
func BenchmarkTakeover(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var heard, ended, restarted, recovery []time.Duration
			spoiled := 0
			for i := 0; i < b.N; i++ {
				t, ok := takeover(b, n, 16<<10)
				if !ok {
					if spoiled++; spoiled > b.N {
						b.Fatalf("%d of %d runs spoiled by a live process excluded", spoiled, i+spoiled)
					}
					i--
					continue
				}
				b.Logf("n=%d: heard %v, ended %v, restarted %v", n, t.heard, t.ended, t.restarted)
				heard, ended = append(heard, t.heard), append(ended, t.ended)
				restarted, recovery = append(restarted, t.restarted), append(recovery, t.restarted-t.ended)
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			median := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return ms(ds[len(ds)/2])
			}
			b.ReportMetric(median(heard), "heard-ms")
			b.ReportMetric(median(ended), "ended-ms")
			b.ReportMetric(median(restarted), "restarted-ms")
			b.ReportMetric(median(recovery), "recovery-ms")
			b.ReportMetric(ms(slices.Max(restarted)), "max-restarted-ms")
			b.ReportMetric(float64(spoiled), "spoiled")
			b.ReportMetric(0, "ns/op")
		})
	}
}
