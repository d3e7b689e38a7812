package resil

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

const testTimeout = 60 * time.Second

// outcome is what one process's Run did.
type outcome struct {
	err    error
	rank   int
	result uint64
	stats  Stats
}

// runRing runs, on a Local job of n ranks and spares spares, a function
// of iters iterations that mixes every rank's value through an Allreduce
// and checkpoints every 4 iterations. crash(p, it) says whether process
// p, in its first attempt, crashes (its session ends) before iteration
// it.
func runRing(t *testing.T, n, spares, k, iters int, crash func(p, it int) bool) []outcome {
	t.Helper()
	return runRingHook(t, n, spares, k, iters, crash, nil)
}

// runRingHook is runRing with duringRecovery(p, s) called at process p in
// every recovery round, between the plan and the transfers.
func runRingHook(t *testing.T, n, spares, k, iters int, crash func(p, it int) bool, duringRecovery func(p int, s *comm.Session)) []outcome {
	t.Helper()
	return runRingConfig(t, n, spares, Config{Buddies: k}, iters, -1, crash, duringRecovery)
}

// errStop is what every rank's function returns at iteration stopAt of
// runRingConfig: the whole job ends there.
var errStop = errors.New("stopped")

// runRingConfig is runRingHook with a Config, and every rank's function
// returning errStop before iteration stopAt (-1: never).
func runRingConfig(t *testing.T, n, spares int, cfg Config, iters, stopAt int, crash func(p, it int) bool, duringRecovery func(p int, s *comm.Session)) []outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ss, err := comm.LocalSpares(ctx, n, spares)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]outcome, n+spares)
	var wg sync.WaitGroup
	for p, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Finalize(context.Background())
			j, err := New(s, cfg)
			if err != nil {
				out[p].err = err
				return
			}
			if duringRecovery != nil {
				j.duringRecovery = func() { duringRecovery(p, s) }
			}
			var result uint64
			out[p].err = j.Run(ctx, ringFunc(j, s, iters, stopAt, func(it int) bool {
				return j.Stats().Restarts == 0 && crash(p, it)
			}, &result))
			out[p].rank, out[p].result, out[p].stats = j.Rank(), result, j.Stats()
		}()
	}
	wg.Wait()
	for p, o := range out {
		t.Logf("process %d: rank %d, result %#x, err %v, stats %+v", p, o.rank, o.result, o.err, o.stats)
	}
	return out
}

// ringFunc is runRingConfig's function at the process of s: iters
// iterations mixing every rank's value through an Allreduce, a checkpoint
// every 4, errStop before iteration stopAt, a crash (s finalized) before
// iteration it when crash(it) says so, and the XOR of every rank's value
// crashSession stops s as a crash does: a Finalize whose context is done
// announces no leave, and the others find the process failed (a Finalize
// that can flush tells them it left the job, which is no failure).
func crashSession(s *comm.Session) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Finalize(ctx)
}

// in *result at the end.
func ringFunc(j *Job, s *comm.Session, iters, stopAt int, crash func(it int) bool, result *uint64) Func {
	return func(ctx context.Context, c *comm.Comm, state []byte, epoch int) error {
		it, v := 0, uint64(c.Rank()+1)
		if state != nil {
			it, v = int(binary.LittleEndian.Uint64(state)), binary.LittleEndian.Uint64(state[8:])
		}
		for ; it < iters; it++ {
			if it%4 == 0 && it > 0 {
				if err := j.Checkpoint(ctx, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(it)), v)); err != nil {
					return err
				}
			}
			if it == stopAt {
				return errStop
			}
			if crash(it) {
				crashSession(s)
				return errors.New("crashed")
			}
			sum := []uint64{v}
			if err := comm.Allreduce(ctx, c, sum, sum, comm.Sum[uint64]()); err != nil {
				return err
			}
			v = v*6364136223846793005 + sum[0] + uint64(c.Rank())
		}
		all := []uint64{v}
		if err := comm.Allreduce(ctx, c, all, all, comm.BXor[uint64]()); err != nil {
			return err
		}
		*result = all[0]
		return nil
	}
}

// The result with a crash and a spare taking the rank is the result
// without: the spare takes rank 2, every rank goes back to the last
// checkpoint, and no message of the aborted attempt is matched in the
// new one.
func TestSpareTakesRankSameResult(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a failure detection")
	}
	const n, spares, iters = 4, 1, 30
	clean := runRing(t, n, spares, 1, iters, func(int, int) bool { return false })
	crashed := runRing(t, n, spares, 1, iters, func(p, it int) bool { return p == 2 && it == 13 })
	want := clean[0].result
	for p := range n {
		if clean[p].err != nil || clean[p].result != want {
			t.Fatalf("clean run: process %d: %v, result %#x, want %#x", p, clean[p].err, clean[p].result, want)
		}
	}
	if clean[n].err != nil || clean[n].rank != -1 {
		t.Fatalf("clean run: the spare: %v, rank %d", clean[n].err, clean[n].rank)
	}
	for _, p := range []int{0, 1, 3, 4} {
		o := crashed[p]
		if o.err != nil || o.result != want || o.stats.Restarts != 1 {
			t.Errorf("process %d: err %v, result %#x (want %#x), restarts %d (want 1)", p, o.err, o.result, want, o.stats.Restarts)
		}
	}
	if crashed[4].rank != 2 || !crashed[4].stats.TookOver {
		t.Errorf("the spare holds rank %d (took over %v), want 2", crashed[4].rank, crashed[4].stats.TookOver)
	}
	if crashed[2].err == nil {
		t.Errorf("the crashed process's Run returned nil")
	}
}

// A process dies in the middle of a recovery (the spare that was to take
// rank 1, before it receives the state): whether the survivors' round
// fails or completes without it (then the next attempt ends at once, its
// rank 1 being dead), the second spare takes rank 1 and the result is
// still the failure-free one.
func TestCrashDuringRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for two failure detections")
	}
	const n, spares, iters = 3, 2, 30
	clean := runRing(t, n, 0, 1, iters, func(int, int) bool { return false })
	var once sync.Once
	out := runRingHook(t, n, spares, 1, iters, func(p, it int) bool { return p == 1 && it == 10 }, func(p int, s *comm.Session) {
		if p == 3 {
			once.Do(func() { crashSession(s) })
		}
	})
	for _, p := range []int{0, 2, 4} {
		if o := out[p]; o.err != nil || o.result != clean[0].result {
			t.Errorf("process %d: err %v, result %#x, want %#x", p, o.err, o.result, clean[0].result)
		}
	}
	if out[4].rank != 1 {
		t.Errorf("process 4 holds rank %d, want 1", out[4].rank)
	}
}

// A rank and its only buddy lost at once: every survivor fails with the
// error naming the rank's lost state, never a result.
func TestStateLostWithEveryBuddy(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a failure detection")
	}
	const n, spares = 3, 2
	out := runRing(t, n, spares, 1, 30, func(p, it int) bool { return (p == 1 || p == 2) && it == 9 })
	for _, p := range []int{0, 3, 4} {
		var lost *StateLostError
		if !errors.As(out[p].err, &lost) || lost.Rank != 1 || lost.Epoch != 2 || out[p].result != 0 {
			t.Errorf("process %d: got %v (result %#x), want the state of rank 1 at epoch 2 lost", p, out[p].err, out[p].result)
		}
	}
}

// No spare left: every survivor fails saying so.
func TestNoSpareLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a failure detection")
	}
	out := runRing(t, 3, 0, 1, 30, func(p, it int) bool { return p == 1 && it == 6 })
	for _, p := range []int{0, 2} {
		var ns *NoSpareError
		if !errors.As(out[p].err, &ns) || fmt.Sprint(ns.Ranks) != "[1]" {
			t.Errorf("process %d: got %v, want no spare for rank 1", p, out[p].err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss, err := comm.LocalSpares(ctx, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{0, 3, -1} {
		if _, err := New(ss[0], Config{Buddies: k}); !errors.Is(err, ErrConfig) {
			t.Errorf("Buddies %d: got %v, want ErrConfig", k, err)
		}
	}
	j, err := New(ss[0], DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint(ctx, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Checkpoint outside Run: got %v, want ErrConfig", err)
	}
}

// Messages of an aborted attempt never reach the next: in the first
// attempt rank 0 sends "stale" to ranks 1 and 2 (tag 9), which do not
// receive it, and process 2 crashes; in the second, every rank receives
// exactly one message on tag 9 from its left neighbour, the fresh one.
func TestNoMessageLeaksIntoTheNextAttempt(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a failure detection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ss, err := comm.LocalSpares(ctx, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(ss))
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
			errs[p] = j.Run(ctx, func(ctx context.Context, c *comm.Comm, _ []byte, _ int) error {
				r, n := c.Rank(), c.Size()
				if j.Stats().Restarts == 0 {
					if r == 0 {
						for _, to := range []int{1, 2} {
							if err := c.Send(ctx, []byte("stale"), to, 9); err != nil {
								return err
							}
						}
					}
					if p == 2 {
						crashSession(s)
						return errors.New("crashed")
					}
					_, err := c.Recv(ctx, make([]byte, 8), 2, 1) // never sent: ends with the failure
					return err
				}
				if err := c.Send(ctx, []byte("fresh"), (r+1)%n, 9); err != nil {
					return err
				}
				buf := make([]byte, 8)
				st, err := c.Recv(ctx, buf, (r+n-1)%n, 9)
				if err != nil {
					return err
				}
				if got := string(buf[:st.Count]); got != "fresh" {
					return fmt.Errorf("rank %d received %q", r, got)
				}
				if err := comm.Barrier(ctx, c); err != nil {
					return err
				}
				if _, more, err := c.Iprobe(comm.AnySource, 9); err != nil || more {
					return fmt.Errorf("rank %d: another message on tag 9 (%v, %v)", r, more, err)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for _, p := range []int{0, 1, 3} {
		if errs[p] != nil {
			t.Errorf("process %d: %v", p, errs[p])
		}
	}
}

// A whole job lost (every rank's function ends at iteration 17) and
// started again with the same Dir resumes from the newest checkpoint on
// disk (epoch 4, iteration 16) and gives the failure-free result; its
// copies at the buddies are back, so a spare can still take a rank.
func TestWholeJobRestartFromDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a failure detection")
	}
	const n, iters = 3, 30
	clean := runRing(t, n, 0, 1, iters, func(int, int) bool { return false })
	cfg := Config{Buddies: 1, Dir: t.TempDir()}
	never := func(int, int) bool { return false }
	first := runRingConfig(t, n, 1, cfg, iters, 17, never, nil)
	for p := range n {
		// The first rank to stop revokes the attempt: a slower one may
		// see that before its own stop.
		if !errors.Is(first[p].err, errStop) && !errors.Is(first[p].err, ErrAborted) {
			t.Fatalf("first job, process %d: %v, want the stop", p, first[p].err)
		}
	}
	again := runRingConfig(t, n, 1, cfg, iters, -1, func(p, it int) bool { return p == 1 && it == 18 }, nil)
	for _, p := range []int{0, 2, 3} {
		if o := again[p]; o.err != nil || o.result != clean[0].result {
			t.Errorf("second job, process %d: %v, result %#x, want %#x", p, o.err, o.result, clean[0].result)
		}
	}
	if again[0].stats.Resumed != 4 || again[3].rank != 1 {
		t.Errorf("resumed from epoch %d (want 4); the spare holds rank %d (want 1)", again[0].stats.Resumed, again[3].rank)
	}
}

// A function that fails without any failure (a bug, a bad input) at one
// rank, while the others wait for it in an Allreduce: every Run returns
// at once, that rank with its error, the others with ErrAborted.
func TestFunctionErrorEndsTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ss, err := comm.LocalSpares(ctx, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	bad := errors.New("bad input")
	errs := make([]error, len(ss))
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
			errs[p] = j.Run(ctx, func(ctx context.Context, c *comm.Comm, _ []byte, _ int) error {
				for it := 0; it < 100; it++ {
					if c.Rank() == 1 && it == 5 {
						return bad
					}
					x := []int{1}
					if err := comm.Allreduce(ctx, c, x, x, comm.Sum[int]()); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	if !errors.Is(errs[1], bad) {
		t.Errorf("rank 1: %v, want its own error", errs[1])
	}
	for _, p := range []int{0, 2, 3} {
		if !errors.Is(errs[p], ErrAborted) {
			t.Errorf("process %d: %v, want ErrAborted", p, errs[p])
		}
	}
}

// runUnits runs, on a Local job of n ranks and no spare with
// Config.Shrink, a function whose work is n units (one per rank at the
// start), each a value mixed at every iteration with the sum of all
// units' values; a rank checkpoints the units it holds every 4
// iterations, and after a shrink takes the units of every state that falls
// to it (Job.Restored). crash(p, attempt, it) says whether process p
// crashes before iteration it of its attempt-th attempt. It returns each
// process's outcome and the communicator's size at the end.
func runUnits(t *testing.T, n, iters int, crash func(p, attempt, it int) bool) ([]outcome, []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ss, err := comm.LocalSpares(ctx, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]outcome, n)
	sizes := make([]int, n)
	var wg sync.WaitGroup
	for p, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Finalize(context.Background())
			j, err := New(s, Config{Buddies: 1, Shrink: true})
			if err != nil {
				out[p].err = err
				return
			}
			var result uint64
			out[p].err = j.Run(ctx, func(ctx context.Context, c *comm.Comm, state []byte, epoch int) error {
				it, units := 0, map[uint64]uint64{uint64(c.Rank()): uint64(c.Rank() + 1)}
				if rs := j.Restored(); rs.Epoch > 0 {
					if rs.Ranks != c.Size() && len(rs.States) == 0 {
						return fmt.Errorf("rank %d restores nothing of epoch %d", c.Rank(), rs.Epoch)
					}
					units = map[uint64]uint64{}
					for _, b := range rs.States {
						it = int(binary.LittleEndian.Uint64(b))
						for i := 8; i < len(b); i += 16 {
							units[binary.LittleEndian.Uint64(b[i:])] = binary.LittleEndian.Uint64(b[i+8:])
						}
					}
				}
				sizes[p] = c.Size()
				for ; it < iters; it++ {
					if crash(p, j.Stats().Restarts, it) {
						crashSession(s)
						return errors.New("crashed")
					}
					if it%4 == 0 && it > 0 {
						b := binary.LittleEndian.AppendUint64(nil, uint64(it))
						for u, v := range units {
							b = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(b, u), v)
						}
						if err := j.Checkpoint(ctx, b); err != nil {
							return err
						}
					}
					var local uint64
					for _, v := range units {
						local += v
					}
					sum := []uint64{local}
					if err := comm.Allreduce(ctx, c, sum, sum, comm.Sum[uint64]()); err != nil {
						return err
					}
					for u, v := range units {
						units[u] = v*6364136223846793005 + sum[0] + u
					}
				}
				var x uint64
				for _, v := range units {
					x ^= v
				}
				all := []uint64{x}
				if err := comm.Allreduce(ctx, c, all, all, comm.BXor[uint64]()); err != nil {
					return err
				}
				result = all[0]
				return nil
			})
			out[p].rank, out[p].result, out[p].stats = j.Rank(), result, j.Stats()
		}()
	}
	wg.Wait()
	for p, o := range out {
		t.Logf("process %d: rank %d of %d, result %#x, err %v, stats %+v", p, o.rank, sizes[p], o.result, o.err, o.stats)
	}
	return out, sizes
}

// No spare left and a program that asks to continue on fewer ranks: the
// survivors go on from the last checkpoint, the dropped ranks' states
// come from their buddies, and the result is the failure-free one. The
// second case loses another process before the shrunk run checkpoints,
// so the epoch taken by 4 ranks is restored on 2.
func TestShrinkWhenNoSpare(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detections")
	}
	const n, iters = 4, 30
	clean, _ := runUnits(t, n, iters, func(int, int, int) bool { return false })
	want := clean[0].result
	for p := range n {
		if clean[p].err != nil || clean[p].result != want || clean[p].stats.Shrunk {
			t.Fatalf("clean run: process %d: %v, result %#x, want %#x", p, clean[p].err, clean[p].result, want)
		}
	}
	for _, tc := range []struct {
		name      string
		crash     func(p, attempt, it int) bool
		survivors []int
	}{
		{"one lost", func(p, a, it int) bool { return p == 1 && a == 0 && it == 13 }, []int{0, 2, 3}},
		{"a second lost before the next checkpoint", func(p, a, it int) bool {
			return (p == 1 && a == 0 && it == 13) || (p == 2 && a == 1 && it == 12)
		}, []int{0, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, sizes := runUnits(t, n, iters, tc.crash)
			for i, p := range tc.survivors {
				o := out[p]
				if o.err != nil || o.result != want || !o.stats.Shrunk || o.rank != i || sizes[p] != len(tc.survivors) {
					t.Errorf("process %d: err %v, result %#x (want %#x), shrunk %v, rank %d of %d (want %d of %d)",
						p, o.err, o.result, want, o.stats.Shrunk, o.rank, sizes[p], i, len(tc.survivors))
				}
			}
		})
	}
}
