package comm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm/internal/coll"
)

// withCollShm makes a Local job's ranks run their collectives on shared
// memory, as the ranks of one host of a real job do.
func withCollShm(o *options) { o.collShm = true }

// withHosts makes a Local job's ranks run their collectives as if rank r
// ran on host hosts[r].
func withHosts(hosts []int) Option {
	return func(o *options) { o.collShm, o.collHosts = true, hosts }
}

// oneHostOrTwo are the layouts of a 4-rank job the failure tests run on:
// one host, and two (each host's collectives on its segment, the hosts'
// leaders over the transport).
var oneHostOrTwo = [][]int{{0, 0, 0, 0}, {0, 0, 1, 1}}

// segOf returns c's mapped segment, or nil.
func segOf(c *Comm) *collSeg {
	st := &c.st.seg
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.seg
}

// usesShared reports whether c's collectives run on shared memory: on its
// segment, or on its host's when its ranks span hosts (one rank alone on
// its host has none).
func usesShared(c *Comm) bool {
	st := &c.st.seg
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.hier != nil {
		return st.seg != nil || st.hier.local.Size() == 1
	}
	return st.seg != nil
}

func skipWithoutSegments(t *testing.T) {
	t.Helper()
	if !segSupported {
		t.Skip("no shared-memory segments on this system")
	}
}

// sharedCase is one Allreduce of the exactness test: its reference is the
// naive rank-order reduction; integer ones are also run over the
// transport, whose result must be the same.
type sharedCase struct {
	name string
	run  func(ctx context.Context, c *Comm, seed uint64, step, n int) error
}

func sharedCaseOf[T Elem](name string, op func() Op[T], fn func(inout, in []T), gen func(*rand.Rand) T, exactOverTransport bool) sharedCase {
	return sharedCase{name: name, run: func(ctx context.Context, c *Comm, seed uint64, step, n int) error {
		p, r := c.Size(), c.Rank()
		send := collData(seed, step, r, n, gen)
		keep := slices.Clone(send)
		got := make([]T, n)
		if err := Allreduce(ctx, c, send, got, op()); err != nil {
			return err
		}
		if !slices.Equal(send, keep) {
			return fmt.Errorf("%s n=%d: send modified", name, n)
		}
		if !usesShared(c) {
			return fmt.Errorf("%s n=%d: no shared segment", name, n)
		}
		if err := collSame(fmt.Sprintf("%s n=%d", name, n), got, collRef(fn, seed, step, p, n, gen)); err != nil {
			return err
		}
		inPlace := slices.Clone(send)
		if err := Allreduce(ctx, c, inPlace, inPlace, op()); err != nil {
			return err
		}
		if err := collSame(fmt.Sprintf("%s n=%d in place", name, n), inPlace, got); err != nil {
			return err
		}
		if !exactOverTransport {
			return nil
		}
		over := make([]T, n)
		if err := coll.Allreduce(ctx, c.collTransport(), send, over, op()); err != nil {
			return err
		}
		return collSame(fmt.Sprintf("%s n=%d over the transport", name, n), got, over)
	}}
}

func fullFloat(rng *rand.Rand) float64 { return rng.NormFloat64() * 1e6 }
func anyInt32(rng *rand.Rand) int32    { return int32(rng.Uint32()) }
func anyUint8(rng *rand.Rand) uint8    { return uint8(rng.Uint32()) }

// The shared-memory Allreduce gives every rank the naive rank-order
// reduction bit for bit (floats of any magnitude included), for vectors
// below and above the split and over several rounds, on sizes that divide
// evenly and not; integer results equal the transport's. Across hosts
// (each host through its segment, then its leader over the transport) the
// same holds but for floats of any magnitude, which every rank still gets
// alike.
func TestAllreduceSharedExact(t *testing.T) {
	skipWithoutSegments(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	maxF := func(inout, in []float64) {
		for i := range inout {
			inout[i] = max(inout[i], in[i])
		}
	}
	cases := []sharedCase{
		sharedCaseOf("float64 sum", Sum[float64], collSum, fullFloat, false),
		sharedCaseOf("float64 sum of integers", Sum[float64], collSum, collSmallFloat, true),
		sharedCaseOf("float64 max", Max[float64], maxF, fullFloat, true),
		sharedCaseOf("int32 sum", Sum[int32], func(a, b []int32) {
			for i := range a {
				a[i] += b[i]
			}
		}, anyInt32, true),
		sharedCaseOf("uint8 prod", Prod[uint8], func(a, b []uint8) {
			for i := range a {
				a[i] *= b[i]
			}
		}, anyUint8, true),
		sharedCaseOf("int64 matmul", func() Op[int64] { return NewOp("matmul16", collMatmul, false) }, collMatmul, collAnyInt64, true),
	}
	// Elements: none, one, short, around the split (8 KiB of float64),
	// and beyond a slot (256 KiB), to three rounds.
	sizes := []int{0, 1, 7, 1000, 1024, 1025, 40000, 70001}
	layouts := [][]int{{0, 0}, {0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0, 0},
		{0, 0, 1, 1, 1, 2}, // across hosts, each host's ranks contiguous
		{0, 1, 0, 1, 2, 2}, // not: a non-commutative operator takes the transport
	}
	for _, hosts := range layouts {
		p := len(hosts)
		oneHost := !slices.ContainsFunc(hosts, func(h int) bool { return h != 0 })
		t.Run(fmt.Sprintf("hosts=%v", hosts), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
			defer cancel()
			sums := make([][]float64, p) // of floats of any magnitude, by rank
			errs := collRunOn(ctx, t, job(t, p, withHosts(hosts)), func(ctx context.Context, s *Session, c *Comm) error {
				step := 0
				for _, n := range sizes {
					for i, k := range cases {
						step++
						if i == 0 && !oneHost {
							continue // reduced host by host: not the naive order's rounding
						}
						if err := k.run(ctx, c, seed, step, n); err != nil {
							return err
						}
					}
				}
				sums[c.Rank()] = make([]float64, 5000)
				return Allreduce(ctx, c, collData(seed, step+1, c.Rank(), 5000, fullFloat), sums[c.Rank()], Sum[float64]())
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			for r := 1; r < p; r++ {
				if !slices.Equal(sums[r], sums[0]) {
					t.Errorf("ranks 0 and %d reduced floats to different results", r)
				}
			}
		})
	}
}

// A rank killed while the others wait inside a shared-memory Allreduce:
// each survivor gets an error naming it, never a hang, and the shrunk
// communicator reduces on a segment of its own. Vectors below the split,
// above it and over several rounds.
func TestAllreduceSharedRankDies(t *testing.T) {
	skipWithoutSegments(t)
	for _, tr := range []string{"mem", "mem-2hosts", "tcp"} {
		for _, elems := range []int{1, 5000, 70000} {
			t.Run(fmt.Sprintf("%s/elems=%d", tr, elems), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
				defer cancel()
				var ss []*Session
				switch tr {
				case "mem":
					ss = job(t, 4, withCollShm, detecting)
				case "mem-2hosts":
					ss = job(t, 4, withHosts(oneHostOrTwo[1]), detecting)
				default:
					ss = tcpJobWith(t, 4, []Option{detecting})
				}
				until := allreduceUntilDeath(4, elems)
				errs := collRunOn(ctx, t, ss, func(ctx context.Context, s *Session, c *Comm) error {
					err := until(ctx, s, c)
					if err == nil && c.Rank() != 2 && segOf(c) != nil {
						return errors.New("the world's segment is still mapped after its member failed")
					}
					return err
				})
				for r, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}

// A rank killed inside the Allreduce, after publishing its input, while
// the others wait there for rank 3, which enters only once it knows of
// the death: every survivor's Allreduce fails naming the dead rank. Also
// with the ranks sleeping as a process's only rank does, unknown to the Go
// runtime (futexWait's quiet).
func TestAllreduceSharedKilledInside(t *testing.T) {
	skipWithoutSegments(t)
	const victim, late = 2, 3
	for _, hosts := range oneHostOrTwo {
		for _, quiet := range []bool{false, true} {
			t.Run(fmt.Sprintf("hosts=%v/quiet=%v", hosts, quiet), func(t *testing.T) {
				allreduceKilledInside(t, hosts, quiet, victim, late)
			})
		}
	}
}

// allreduceKilledInside runs TestAllreduceSharedKilledInside's case on
// hosts, its ranks' waits sleeping quiet if quiet.
func allreduceKilledInside(t *testing.T, hosts []int, quiet bool, victim, late int) {
	ss := job(t, 4, withHosts(hosts), detecting)
	for _, s := range ss {
		s.wholeProcess = quiet
	}
	ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
	defer cancel()
	var inside sync.WaitGroup
	inside.Add(3)
	errs := collRunOn(ctx, t, ss, func(ctx context.Context, s *Session, c *Comm) error {
		one := []int64{1}
		if err := Allreduce(ctx, c, one, one, Sum[int64]()); err != nil || one[0] != 4 {
			return fmt.Errorf("first allreduce: %v %v", one, err)
		}
		switch c.Rank() {
		case victim:
			go func() {
				inside.Wait()
				time.Sleep(10 * time.Millisecond) // let the victim publish; no outcome depends on it
				s.kill()
			}()
			inside.Done()
			Allreduce(ctx, c, one, one, Sum[int64]())
			return nil
		case late:
			for f := range s.Failures() {
				if f.Rank == victim {
					break
				}
			}
		default:
			inside.Done()
		}
		err := Allreduce(ctx, c, one, one, Sum[int64]())
		if !slices.Contains(failedRanks(err), victim) {
			return fmt.Errorf("allreduce with rank %d killed inside: %v, want a ProcFailedError naming it", victim, err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// Revoke interrupts ranks waiting inside a shared-memory Allreduce for a
// rank that never comes, and frees their segment.
func TestAllreduceSharedRevoke(t *testing.T) {
	skipWithoutSegments(t)
	const revoker = 3
	for _, hosts := range oneHostOrTwo {
		t.Run(fmt.Sprintf("hosts=%v", hosts), func(t *testing.T) {
			ss := job(t, 4, withHosts(hosts))
			ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
			defer cancel()
			errs := collRunOn(ctx, t, ss, func(ctx context.Context, s *Session, c *Comm) error {
				one := []int64{1}
				if err := Allreduce(ctx, c, one, one, Sum[int64]()); err != nil || one[0] != 4 {
					return fmt.Errorf("first allreduce: %v %v", one, err)
				}
				if c.Rank() == revoker {
					if err := Barrier(ctx, mustDup(c)); err != nil { // the others are about to wait
						return err
					}
					time.Sleep(5 * time.Millisecond) // let them reach the wait; no outcome depends on it
					c.Revoke()
					return nil
				}
				d := mustDup(c)
				errc := make(chan error, 1)
				go func() { errc <- Allreduce(ctx, c, one, one, Sum[int64]()) }()
				if err := Barrier(ctx, d); err != nil {
					return err
				}
				if err := <-errc; !errors.Is(err, ErrRevoked) {
					return fmt.Errorf("allreduce interrupted by Revoke: %v, want ErrRevoked", err)
				}
				if segOf(c) != nil {
					return errors.New("the revoked communicator's segment is still mapped")
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// mustDup is Dup for a communicator known healthy.
func mustDup(c *Comm) *Comm {
	d, err := c.Dup()
	if err != nil {
		panic(err)
	}
	return d
}

// A rank whose context ends inside a shared-memory Allreduce abandons it:
// the ranks waiting there, and every later Allreduce on the communicator,
// fail with ErrAbandoned naming it; a communicator duplicated before
// still works.
func TestAllreduceSharedAbandoned(t *testing.T) {
	skipWithoutSegments(t)
	const quitter, absent = 1, 3
	ss := job(t, 4, withCollShm)
	ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
	defer cancel()
	errs := collRunOn(ctx, t, ss, func(ctx context.Context, s *Session, c *Comm) error {
		d := mustDup(c)
		one := []int64{1}
		if err := Allreduce(ctx, c, one, one, Sum[int64]()); err != nil || one[0] != 4 {
			return fmt.Errorf("first allreduce: %v %v", one, err)
		}
		switch c.Rank() {
		case quitter:
			short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
			err := Allreduce(short, c, one, one, Sum[int64]())
			stop()
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("allreduce past its deadline: %v", err)
			}
		case absent:
			if err := Barrier(ctx, d); err != nil { // once the others are done
				return err
			}
		default:
			err := Allreduce(ctx, c, one, one, Sum[int64]())
			if !errors.Is(err, ErrAbandoned) {
				return fmt.Errorf("allreduce abandoned by rank %d: %v, want ErrAbandoned", quitter, err)
			}
		}
		if c.Rank() != absent {
			if err := Barrier(ctx, d); err != nil {
				return err
			}
		}
		err := Allreduce(ctx, c, one, one, Sum[int64]())
		if !errors.Is(err, ErrAbandoned) || err.Error() != fmt.Sprintf("%v: rank %d", ErrAbandoned, quitter) {
			return fmt.Errorf("allreduce after rank %d abandoned: %v", quitter, err)
		}
		one[0] = 1
		if err := Allreduce(ctx, d, one, one, Sum[int64]()); err != nil || one[0] != 4 {
			return fmt.Errorf("allreduce on a duplicate: %v %v", one, err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// Communicators made by Dup, Create and Shrink get segments of their own,
// sized for their ranks; Finalize unmaps every one.
func TestAllreduceSharedOwnSegments(t *testing.T) {
	skipWithoutSegments(t)
	const n = 4
	ss := job(t, n, withCollShm)
	ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
	defer cancel()
	segs := make([][]*collSeg, n)
	comms := make([][]*Comm, n)
	errs := collRunOn(ctx, t, ss, func(ctx context.Context, s *Session, c *Comm) error {
		d := mustDup(c)
		sub, err := c.Create([]int{3, 0, 2})
		if err != nil {
			return err
		}
		sh, err := c.Shrink(ctx)
		if err != nil {
			return err
		}
		for _, x := range []*Comm{c, d, sub, sh} {
			if x == nil {
				continue // rank 1 is not in sub
			}
			v := []int64{int64(x.Rank() + 1)}
			if err := Allreduce(ctx, x, v, v, Sum[int64]()); err != nil {
				return err
			}
			if p := int64(x.Size()); v[0] != p*(p+1)/2 {
				return fmt.Errorf("allreduce on %d ranks: %d", p, v[0])
			}
			g := segOf(x)
			if g == nil || g.p != x.Size() {
				return fmt.Errorf("communicator of %d ranks: segment %v", x.Size(), g)
			}
			segs[c.Rank()] = append(segs[c.Rank()], g)
			comms[c.Rank()] = append(comms[c.Rank()], x)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range n {
		for i, g := range segs[r] {
			for _, h := range segs[r][:i] {
				if &g.mem[0] == &h.mem[0] {
					t.Errorf("rank %d: two communicators share a mapping", r)
				}
			}
		}
		ss[r].Finalize(context.Background())
		for _, x := range comms[r] {
			if segOf(x) != nil {
				t.Errorf("rank %d: a segment is still mapped after Finalize", r)
			}
		}
	}
}

// Bcast and Barrier on a communicator of one host go through its
// segment: every root, vectors of one round and of several.
func TestBcastShared(t *testing.T) {
	skipWithoutSegments(t)
	const p = 3
	ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
	defer cancel()
	errs := collRunOn(ctx, t, job(t, p, withCollShm), func(ctx context.Context, s *Session, c *Comm) error {
		for _, n := range []int{0, 1, 40000} {
			for root := range p {
				buf := make([]int32, n)
				if c.Rank() == root {
					for i := range buf {
						buf[i] = int32(i ^ root)
					}
				}
				if err := Bcast(ctx, c, buf, root); err != nil {
					return err
				}
				for i, x := range buf {
					if x != int32(i^root) {
						return fmt.Errorf("n=%d root=%d: element %d = %d", n, root, i, x)
					}
				}
				if segOf(c) == nil {
					return errors.New("no shared segment")
				}
				if err := Barrier(ctx, c); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A rank that may not use shared memory (COHORT_SHM=off) makes its
// communicators' ranks agree to do without: the others do not wait on a
// segment it never maps.
func TestAllreduceSharedOneRankOff(t *testing.T) {
	skipWithoutSegments(t)
	for _, hosts := range oneHostOrTwo {
		t.Run(fmt.Sprintf("hosts=%v", hosts), func(t *testing.T) {
			ss := job(t, 4, withHosts(hosts))
			ss[1].collNoShm = true // before any collective
			ctx, cancel := context.WithTimeout(context.Background(), collTimeout)
			defer cancel()
			errs := collRunOn(ctx, t, ss, func(ctx context.Context, s *Session, c *Comm) error {
				for range 3 {
					v := []int64{int64(c.Rank())}
					if err := Allreduce(ctx, c, v, v, Sum[int64]()); err != nil || v[0] != 6 {
						return fmt.Errorf("allreduce: %v %v", v, err)
					}
				}
				if g := segOf(c); g != nil && (len(hosts) == 0 || hosts[c.Rank()] == hosts[1]) {
					return errors.New("a segment is mapped though rank 1 may not map it")
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestSegOthersElsewhere checks when a wait on the segment polls on rather
// than yield: only while every rank it still waits for last waited on a
// known CPU other than this rank's, no two of them on the same one.
func TestSegOthersElsewhere(t *testing.T) {
	const v = 5
	cases := []struct {
		name     string
		mine     uint64   // 1 + this rank's CPU, 0 unknown
		progress []uint64 // by rank
		cpus     []uint64 // by rank
		want     bool
	}{
		{"waits for one rank on another CPU", 1, []uint64{v, v, v, 3}, []uint64{1, 1, 2, 2}, true},
		{"waits for one rank on each other CPU", 1, []uint64{v, 3, v, 3}, []uint64{1, 2, 1, 3}, true},
		{"this rank's CPU unknown", 0, []uint64{v, v, v, 3}, []uint64{0, 1, 2, 2}, false},
		{"the rank waited for has no CPU yet", 1, []uint64{v, v, v, 3}, []uint64{1, 1, 2, 0}, false},
		{"the rank waited for shares this CPU", 1, []uint64{v, 3, v, v}, []uint64{1, 1, 2, 2}, false},
		{"two ranks waited for share a CPU", 1, []uint64{v, v, 3, 3}, []uint64{1, 1, 2, 2}, false},
		{"ranks that reached v do not count", 1, []uint64{v, v + 1, v, 3}, []uint64{1, 1, 2, 2}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &collSeg{p: len(tc.progress)}
			for r := range g.p {
				p, c := new(atomic.Uint64), new(atomic.Uint64)
				p.Store(tc.progress[r])
				c.Store(tc.cpus[r])
				g.progress, g.cpus = append(g.progress, p), append(g.cpus, c)
			}
			if got := g.othersElsewhere(tc.mine, 0, v); got != tc.want {
				t.Errorf("othersElsewhere = %v, want %v", got, tc.want)
			}
		})
	}
}
