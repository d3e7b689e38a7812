package comm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// replicatedJob starts n logical ranks × r replicas in this process over
// TCP, as Init does in n·r processes with COHORT_REPLICAS=r; ss[p] is
// process p (replica p/n of rank p mod n).
func replicatedJob(t testing.TB, n, r int) []*Session {
	t.Helper()
	return tcpJobWith(t, n*r, []Option{detecting}, func(b *launch.Bootstrap) { b.Replicas = r })
}

// replicatedRun runs f at every process, each with its own deadline, and
// returns each process's error and result.
func replicatedRun(ss []*Session, f func(ctx context.Context, c *Comm) (string, error)) ([]string, []error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outs, errs := make([]string, len(ss)), make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = f(ctx, s.World())
		}()
	}
	wg.Wait()
	return outs, errs
}

// ringAndAllreduce is a deterministic program: iters rounds of a ring
// exchange (send to the right, receive from the left) and an Allreduce of
// the values received; it returns a digest of what it computed. kill, if
// not nil, is called at each round (to crash processes mid-run).
func ringAndAllreduce(iters int, kill func(round int)) func(ctx context.Context, c *Comm) (string, error) {
	return func(ctx context.Context, c *Comm) (string, error) {
		me, n := c.Rank(), c.Size()
		var acc int64
		for i := range iters {
			if kill != nil {
				kill(i)
			}
			right, left := (me+1)%n, (me+n-1)%n
			in := []int64{0}
			req := Irecv(c, in, left, i)
			if err := Send(ctx, c, []int64{int64(me*1000 + i)}, right, i); err != nil {
				return "", err
			}
			if _, err := req.Wait(ctx); err != nil {
				return "", err
			}
			if in[0] != int64(left*1000+i) {
				return "", fmt.Errorf("round %d: got %d from rank %d", i, in[0], left)
			}
			sum := []int64{0}
			if err := Allreduce(ctx, c, in, sum, Sum[int64]()); err != nil {
				return "", err
			}
			acc += sum[0]
		}
		return fmt.Sprintf("rank %d of %d: %d", me, n, acc), nil
	}
}

// Each of 3 ranks runs as 2 replicas: the program sees 3 ranks, every
// replica computes the same result, and killing one replica of each rank
// mid-run (the master of rank 0, a non-master of ranks 1 and 2) changes
// nothing and surfaces no error.
func TestReplicatedReplicaDeathsInvisible(t *testing.T) {
	const n, r, iters = 3, 2, 40
	ss := replicatedJob(t, n, r)
	want := func(rank int) string {
		var acc int64
		for i := range iters {
			for k := range n {
				acc += int64(k*1000 + i)
			}
		}
		return fmt.Sprintf("rank %d of %d: %d", rank, n, acc)
	}
	victims := map[int]int{0: 10, 4: 20, 5: 30} // process → round: rank 0's master (replica 0), replica 1 of ranks 1 and 2
	var once sync.Map
	outs, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		p := slices.IndexFunc(ss, func(s *Session) bool { return s.World() == c })
		kill := func(round int) {
			if at, ok := victims[p]; ok && round == at {
				if _, done := once.LoadOrStore(p, true); !done {
					ss[p].kill()
				}
			}
		}
		return ringAndAllreduce(iters, kill)(ctx, c)
	})
	for p := range ss {
		if _, dead := victims[p]; dead {
			continue
		}
		if errs[p] != nil {
			t.Errorf("process %d (rank %d): %v", p, p%n, errs[p])
		} else if outs[p] != want(p%n) {
			t.Errorf("process %d: %q, want %q", p, outs[p], want(p%n))
		}
	}
}

// When every replica of a rank dies, the others get the ordinary ULFM
// error naming that logical rank.
func TestReplicatedRankFailure(t *testing.T) {
	const n, r = 3, 2
	ss := replicatedJob(t, n, r)
	const victim = 2
	_, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		p := slices.IndexFunc(ss, func(s *Session) bool { return s.World() == c })
		if p%n == victim {
			ss[p].kill()
			return "", nil
		}
		for i := 0; ; i++ {
			if err := allPairsStep(ctx, c, i); err != nil {
				return "", err
			}
		}
	})
	for p, err := range errs {
		if p%n == victim {
			continue
		}
		var pf *ProcFailedError
		if !errors.As(err, &pf) || !slices.Equal(pf.Ranks, []int{victim}) {
			t.Errorf("process %d: %v, want a failure naming rank %d", p, err, victim)
		}
	}
}

// allPairsStep: every rank sends to and receives from every other rank
// (so every live rank meets a failed one).
func allPairsStep(ctx context.Context, c *Comm, i int) error {
	var reqs []*Request
	for r := range c.Size() {
		if r != c.Rank() {
			reqs = append(reqs, Irecv(c, make([]int64, 1), r, i), Isend(c, []int64{int64(i)}, r, i))
		}
	}
	return WaitAll(ctx, reqs...)
}

// A nonblocking wildcard receive on a replicated rank is refused (its
// match would be decided out of the program's order), with an error that
// says so.
func TestReplicatedWildcardIrecvRefused(t *testing.T) {
	ss := replicatedJob(t, 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := ss[0].World().Irecv(make([]byte, 1), AnySource, 0).Wait(ctx)
	if !errors.Is(err, ErrReplicatedWildcard) {
		t.Fatalf("AnySource Irecv: %v", err)
	}
}

// wildcardProgram: ranks 1…n−1 send iters messages each to rank 0, pausing
// at random; rank 0 takes them with every operation whose outcome depends
// on timing — Recv from AnySource, Iprobe polled until it finds one (the
// number of polls is logged), Test polled, WaitAny over two sources — and
// draws from a Session.Seed random source. It returns its log, which rank
// 0 also sends to everyone: with decisions, every replica of rank 0 writes
// the same log even though each runs at its own pace.
func wildcardProgram(ss []*Session, iters int, kill func(p, step int)) func(ctx context.Context, c *Comm) (string, error) {
	return func(ctx context.Context, c *Comm) (string, error) {
		p := slices.IndexFunc(ss, func(s *Session) bool { return s.World() == c })
		jitter := rand.New(rand.NewPCG(uint64(p), uint64(time.Now().UnixNano())))
		pause := func() { time.Sleep(time.Duration(jitter.IntN(300)) * time.Microsecond) }
		me, n := c.Rank(), c.Size()
		if me != 0 {
			for i := range iters {
				kill(p, i)
				pause()
				if err := Send(ctx, c, []int64{int64(me*1000 + i)}, 0, i%5); err != nil {
					return "", err
				}
			}
			buf := make([]byte, 1<<16)
			st, err := c.Recv(ctx, buf, 0, 99)
			return string(buf[:st.Count]), err
		}
		seed, err := ss[p].Seed(ctx)
		if err != nil {
			return "", err
		}
		draws := rand.New(rand.NewPCG(seed, 0))
		remaining := make([]int, n)
		for r := 1; r < n; r++ {
			remaining[r] = iters
		}
		var log strings.Builder
		got := func(st Status, v int64) {
			remaining[st.Source]--
			fmt.Fprintf(&log, "%d:%d ", st.Source, v)
		}
		left := func() int { return slices.Index(remaining[1:], slices.Max(remaining[1:])) + 1 }
		for step := 0; slices.Max(remaining) > 0; step++ {
			kill(p, step)
			pause()
			in := []int64{0}
			switch step % 4 {
			case 0:
				st, err := Recv(ctx, c, in, AnySource, AnyTag)
				if err != nil {
					return "", err
				}
				got(st, in[0])
			case 1:
				polls := 0
				for {
					st, ok, err := c.Iprobe(AnySource, AnyTag)
					if err != nil {
						return "", err
					}
					if ok {
						fmt.Fprintf(&log, "probe%d ", polls)
						st, err := Recv(ctx, c, in, st.Source, st.Tag)
						if err != nil {
							return "", err
						}
						got(st, in[0])
						break
					}
					polls++
					pause()
				}
			case 2:
				req := Irecv(c, in, left(), AnyTag)
				polls := 0
				for {
					st, done, err := req.Test()
					if err != nil {
						return "", err
					}
					if done {
						fmt.Fprintf(&log, "test%d ", polls)
						got(st, in[0])
						break
					}
					polls++
					pause()
				}
			case 3:
				var reqs []*Request
				var bufs [][]int64
				for r := 1; r < n; r++ {
					if remaining[r] > 0 {
						bufs = append(bufs, []int64{0})
						reqs = append(reqs, Irecv(c, bufs[len(bufs)-1], r, AnyTag))
					}
				}
				i, st, err := WaitAny(ctx, reqs...)
				if err != nil {
					return "", err
				}
				fmt.Fprintf(&log, "any%d ", i)
				got(st, bufs[i][0])
				for j, req := range reqs {
					if j != i {
						st, err := req.Wait(ctx)
						if err != nil {
							return "", err
						}
						got(st, bufs[j][0])
					}
				}
			}
			fmt.Fprintf(&log, "rand%d\n", draws.IntN(1000))
		}
		for r := 1; r < n; r++ {
			if err := c.Send(ctx, []byte(log.String()), r, 99); err != nil {
				return "", err
			}
		}
		return log.String(), nil
	}
}

// Every operation whose outcome depends on timing gives every replica of
// a rank the same outcome, even when replicas die (rank 0's master half
// way through, a replica of rank 1 early on).
func TestReplicatedDecisions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		victims map[int]int // process → step
	}{
		{"no deaths", nil},
		{"master of rank 0 and a replica of rank 1 die", map[int]int{0: 25, 4: 5}},
		{"the other replica of rank 0 dies", map[int]int{3: 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n, r, iters = 3, 2, 30
			ss := replicatedJob(t, n, r)
			var once sync.Map
			kill := func(p, step int) {
				if at, ok := tc.victims[p]; ok && step == at {
					if _, done := once.LoadOrStore(p, true); !done {
						ss[p].kill()
					}
				}
			}
			outs, errs := replicatedRun(ss, wildcardProgram(ss, iters, kill))
			var want string
			for p := range ss {
				if _, dead := tc.victims[p]; dead {
					continue
				}
				if errs[p] != nil {
					var states []string
					for q, s := range ss {
						if _, dead := tc.victims[q]; !dead {
							states = append(states, s.rep.describe())
						}
					}
					t.Fatalf("process %d (rank %d): %v\n%s", p, p%n, errs[p], strings.Join(states, "\n"))
				}
				if want == "" {
					want = outs[p]
				} else if outs[p] != want {
					t.Errorf("process %d (rank %d) has another log than its peers:\n%s\nwant\n%s", p, p%n, outs[p], want)
				}
			}
			if lines := strings.Count(want, "\n"); lines < iters/2 {
				t.Errorf("the log has %d steps: %q", lines, want)
			}
		})
	}
}

// A replicated rank that sends far ahead of what its destination has
// acknowledged holds at most the replication layer's backup bound of sends
// (replica.Config.MaxBackup, here 4): its later sends wait for the
// acknowledgements instead of piling up in the table, and every message
// still arrives, in order.
func TestReplicatedBackupBounded(t *testing.T) {
	const maxBackup, msgs = 4, 200
	ss := tcpJobWith(t, 2*2, []Option{func(o *options) { o.maxBackup = maxBackup }},
		func(b *launch.Bootstrap) { b.Replicas = 2 })
	_, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		if c.Rank() == 0 {
			reqs := make([]*Request, msgs)
			for i := range reqs {
				reqs[i] = c.Isend([]byte{byte(i)}, 1, 1)
			}
			return "", WaitAll(ctx, reqs...)
		}
		for i := range msgs {
			buf := make([]byte, 1)
			if _, err := c.Recv(ctx, buf, 0, 1); err != nil || buf[0] != byte(i) {
				return "", fmt.Errorf("message %d: got %d, %v", i, buf[0], err)
			}
		}
		return "", nil
	})
	for p, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", p, err)
		}
	}
	for p, s := range ss {
		st := s.rep.stats()
		if st.PeakBackup > maxBackup {
			t.Errorf("process %d: the backup table held %d sends, bound %d", p, st.PeakBackup, maxBackup)
		}
	}
}

// A program's replicated data leaves by the transport's direct write, as
// an unreplicated send does: in a ping-pong of 2 ranks × 2 replicas, each
// master writes data frames to the replicas of the peer rank itself, and
// every process gets every reply. How many of them go direct is timing: a
// write finds the connection busy, and is queued, while the connection is
// still being set up or while a reader's acknowledgement to the same peer
// is being written, and under load a master's sends can fall in step with
// those acknowledgements for a whole run; the test asks only that the
// path is taken. No process crashes, so the detectors stay quiet: a live
// process waiting for a CPU is not excluded.
func TestReplicatedDataDirect(t *testing.T) {
	const n, r, trips = 2, 2, 100
	ss := tcpJobWith(t, n*r, nil, func(b *launch.Bootstrap) { b.Replicas = r })
	outs, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		buf := make([]byte, 1024)
		peer := 1 - c.Rank()
		got := 0
		for i := range trips {
			if c.Rank() == 0 {
				buf[0] = byte(i)
				if err := Send(ctx, c, buf, peer, i); err != nil {
					return "", err
				}
			}
			if _, err := Recv(ctx, c, buf, peer, i); err != nil {
				return "", err
			}
			if buf[0] != byte(i) {
				return "", fmt.Errorf("trip %d: got byte %d", i, buf[0])
			}
			got++
			if c.Rank() == 1 {
				if err := Send(ctx, c, buf, peer, i); err != nil {
					return "", err
				}
			}
		}
		return fmt.Sprint(got), nil
	})
	for p := range ss {
		if errs[p] != nil || outs[p] != fmt.Sprint(trips) {
			t.Fatalf("process %d: %q, %v; want %d messages", p, outs[p], errs[p], trips)
		}
	}
	for _, master := range []int{0, 1} {
		if d := ss[master].tcpTr.Stats().Direct; d == 0 {
			t.Errorf("master of rank %d: no frame written directly of its %d data frames", master, r*trips)
		}
	}
}

// Large replicated messages whose receive is posted are read straight into
// the receive's buffer at every replica of the destination (replicapath.go,
// "Placing replicated data"): each trip, rank 1 posts its receive, then
// tells rank 0, which sends. Every message arrives whole; at least one is
// placed at each replica of rank 1 (one finds the layer busy dispatching
// now and then and goes the usual way), and the layer counts as placed
// exactly the messages the session placed.
func TestReplicatedDataPlaced(t *testing.T) {
	const n, r, trips, size = 2, 2, 20, 64 << 10
	ss := tcpJobWith(t, n*r, nil, func(b *launch.Bootstrap) { b.Replicas = r })
	outs, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		buf := make([]byte, size)
		ready := []byte{0}
		for i := range trips {
			if c.Rank() == 1 {
				req := Irecv(c, buf, 0, i)
				if err := Send(ctx, c, ready, 0, i); err != nil {
					return "", err
				}
				if _, err := req.Wait(ctx); err != nil {
					return "", err
				}
				for j, b := range buf {
					if b != byte(i+j) {
						return "", fmt.Errorf("trip %d: byte %d is %d, want %d", i, j, b, byte(i+j))
					}
				}
				continue
			}
			if _, err := Recv(ctx, c, ready, 1, i); err != nil {
				return "", err
			}
			for j := range buf {
				buf[j] = byte(i + j)
			}
			if err := Send(ctx, c, buf, 1, i); err != nil {
				return "", err
			}
		}
		return fmt.Sprint(trips), nil
	})
	for p, s := range ss {
		if errs[p] != nil || outs[p] != fmt.Sprint(trips) {
			t.Fatalf("process %d: %q, %v; want %d trips", p, outs[p], errs[p], trips)
		}
		if s.World().Rank() != 1 {
			continue
		}
		placed, held, layer := s.stats.placed.Load(), s.stats.placedHeld.Load(), s.rep.stats().Placed
		if placed == 0 || placed+held != layer {
			t.Errorf("process %d (rank 1): %d messages placed in their receive and %d held, the layer counts %d; want as many, at least 1 in its receive", p, placed, held, layer)
		}
	}
}

// Large replicated messages whose receive is not posted are read straight
// into the pooled buffer the matching engine keeps them in
// (replicapath.go, "Placing replicated data"): rank 0 sends trips large
// messages and then a small one on another tag, which rank 1 receives
// first, so that the large ones arrive unexpected at both of its
// replicas; rank 1 then receives them in order, each whole. At least one
// is placed held at each replica of rank 1, and the layer counts as
// placed exactly the messages the session placed.
func TestReplicatedDataPlacedUnexpected(t *testing.T) {
	const n, r, trips, size = 2, 2, 16, 32 << 10
	ss := tcpJobWith(t, n*r, nil, func(b *launch.Bootstrap) { b.Replicas = r })
	outs, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		buf := make([]byte, size)
		word := []byte{0}
		if c.Rank() == 0 {
			for i := range trips {
				for j := range buf {
					buf[j] = byte(i + j)
				}
				if err := Send(ctx, c, buf, 1, 1); err != nil {
					return "", err
				}
			}
			return fmt.Sprint(trips), Send(ctx, c, word, 1, 2)
		}
		if _, err := Recv(ctx, c, word, 0, 2); err != nil {
			return "", err
		}
		for i := range trips {
			st, err := Recv(ctx, c, buf, 0, 1)
			if err != nil {
				return "", err
			}
			if st.Count != size {
				return "", fmt.Errorf("message %d: %d bytes, want %d", i, st.Count, size)
			}
			for j, b := range buf {
				if b != byte(i+j) {
					return "", fmt.Errorf("message %d: byte %d is %d, want %d", i, j, b, byte(i+j))
				}
			}
		}
		return fmt.Sprint(trips), nil
	})
	for p, s := range ss {
		if errs[p] != nil || outs[p] != fmt.Sprint(trips) {
			t.Fatalf("process %d: %q, %v; want %d messages", p, outs[p], errs[p], trips)
		}
		if s.World().Rank() != 1 {
			continue
		}
		placed, held, layer := s.stats.placed.Load(), s.stats.placedHeld.Load(), s.rep.stats().Placed
		if held == 0 || placed+held != layer {
			t.Errorf("process %d (rank 1): %d messages placed in their receive and %d held, the layer counts %d; want as many, at least 1 held", p, placed, held, layer)
		}
	}
}

// A program's Data to a replica that is not its rank's master wait to go
// out lazyMax at a time (replicalazy.go): after a first message, which
// both replicas of rank 1 get, rank 0 sends rank 1 lazyMax − 1
// messages, which rank 1's master gets at once and its fellow not yet
// (the wait for the first is set far off here), but for what rank 0's
// master retransmits on its own timer; the lazyMax-th send takes them all
// out, and the fellow gets every one, in order.
func TestReplicatedDataToFellowsBatched(t *testing.T) {
	const master, fellow = 1, 3 // rank 1's replicas
	ss := tcpJobWith(t, 2*2, nil, func(b *launch.Bootstrap) { b.Replicas = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	send := func(i int) {
		for _, p := range []int{0, 2} { // rank 0's replicas
			if err := ss[p].World().Send(ctx, []byte{byte(i)}, 1, 1); err != nil {
				t.Fatalf("process %d: send %d: %v", p, i, err)
			}
		}
	}
	recv := func(p, i int) {
		buf := make([]byte, 1)
		if _, err := ss[p].World().Recv(ctx, buf, 0, 1); err != nil || buf[0] != byte(i) {
			t.Fatalf("process %d: message %d: got %d, %v", p, i, buf[0], err)
		}
	}
	// A first message, with the usual wait, once every layer has
	// started (a send made before goes out when it starts, at once).
	send(0)
	recv(master, 0)
	recv(fellow, 0)
	for _, s := range ss {
		s.rep.lmu.Lock()
		s.rep.lazy.wait = time.Hour
		s.rep.lmu.Unlock()
	}
	r := ss[0].rep
	base, rbase := ss[fellow].rep.stats().Delivered, r.stats().Retransmits
	for i := range lazyMax - 1 {
		send(i)
		recv(master, i)
	}
	r.lmu.Lock()
	held := len(r.lazy.held)
	r.lmu.Unlock()
	delivered, retransmits := ss[fellow].rep.stats().Delivered-base, r.stats().Retransmits-rbase
	if held+int(retransmits) < lazyMax-1 || delivered > retransmits {
		t.Errorf("after %d sends, rank 0's master holds %d for rank 1's fellow and retransmitted %d, and the fellow delivered %d; want %d held or retransmitted, and nothing delivered but those",
			lazyMax-1, held, retransmits, delivered, lazyMax-1)
	}
	send(lazyMax - 1)
	recv(master, lazyMax-1)
	for i := range lazyMax {
		recv(fellow, i)
	}
}

// TestPollingRanks checks the count of busy ranks that decides whether a
// host's readers poll: a replicated job counts the logical ranks with a
// process on the host, not the processes.
func TestPollingRanks(t *testing.T) {
	// Two logical ranks × two replicas, all on one host: processes 0 and
	// 2 run rank 0, 1 and 3 rank 1.
	oneHost := []string{"127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"}
	// Two ranks × three replicas on two hosts: host A holds processes 0,
	// 1, 2 (ranks 0, 1, 0), host B processes 3, 4, 5 (ranks 1, 0, 1).
	twoHosts := []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3", "10.0.0.2:1", "10.0.0.2:2", "10.0.0.2:3"}
	// Four ranks × two replicas on one host: more logical ranks than two
	// cores.
	four := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5", "127.0.0.1:6", "127.0.0.1:7", "127.0.0.1:8"}
	for _, c := range []struct {
		name           string
		addrs          []string
		self, replicas int
		want           int
	}{
		{"unreplicated", oneHost, 0, 1, 4},
		{"replicated pair", oneHost, 2, 2, 2},
		{"replicated pair, master", oneHost, 0, 2, 2},
		{"three replicas, host A", twoHosts, 1, 3, 2},
		{"three replicas, host B", twoHosts, 4, 3, 2},
		{"four ranks", four, 5, 2, 4},
		{"a process gone", []string{"127.0.0.1:1", "", "127.0.0.1:3", "127.0.0.1:4"}, 0, 2, 2},
		{"layout not matching", oneHost, 0, 3, 4},
		{"self out of range", oneHost, 9, 2, 1},
	} {
		if got := pollingRanks(c.addrs, c.self, c.replicas, true); got != c.want {
			t.Errorf("%s: pollingRanks(self %d, replicas %d) = %d, want %d", c.name, c.self, c.replicas, got, c.want)
		}
	}
	if got := pollingRanks(oneHost, 0, 2, false); got != 4 {
		t.Errorf("replicated pair over sockets: pollingRanks = %d, want 4 (its processes)", got)
	}
	// Two cores: the replicated pair polls on rings, the unreplicated
	// job of as many processes does not, nor the pair over sockets.
	if readerSpinFor(2, pollingRanks(oneHost, 0, 2, true)) == 0 {
		t.Error("a replicated pair on two cores does not poll")
	}
	if readerSpinFor(2, pollingRanks(oneHost, 0, 1, true)) != 0 {
		t.Error("four unreplicated ranks on two cores poll")
	}
	if readerSpinFor(2, pollingRanks(oneHost, 0, 2, false)) != 0 {
		t.Error("a replicated pair on two cores polls its sockets")
	}
}

// TestPollForSend checks that a replicated rank's readers stop polling
// while its program sends more than pollMaxSend bytes, and poll again
// once it sends less; a rank that does not poll is left alone.
func TestPollForSend(t *testing.T) {
	ss := replicatedJob(t, 2, 2)
	r := ss[0].rep
	poll := r.pollTime
	r.pollTime = 0
	r.pollForSend(1 << 20)
	if r.pollOff.Load() {
		t.Fatal("a rank that does not poll turned polling off")
	}
	r.pollTime = cmp.Or(poll, 50*time.Microsecond)
	defer func() { r.pollTime = poll }()
	for _, c := range []struct {
		size int
		off  bool
	}{{8, false}, {pollMaxSend, false}, {pollMaxSend + 1, true}, {64 << 10, true}, {4 << 10, false}} {
		r.pollForSend(c.size)
		if got := r.pollOff.Load(); got != c.off {
			t.Errorf("after a send of %d bytes: polling off %v, want %v", c.size, got, c.off)
		}
	}
}

// A replicated round trip allocates nothing, as an unreplicated one does
// not: the layer's Data, acknowledgements, commits and Delivered events
// are reused or passed by value, a placement reuses its sender's record,
// a send's backup copy reuses a committed one's buffer, small ones by
// size class (replicated.go, "Reuse of released payload buffers"), and
// the transport's acknowledgements and records are built in buffers it
// keeps. Over each path of the replicated data: Unix sockets (the
// default between the ranks of one process), shared-memory rings (as
// between processes of one host) and TCP with every frame in
// authenticated records (as between hosts).
//
// The count is the whole process's, four replicas and their transports,
// over 5000 round trips after 1000 of warm-up, and AllocsPerRun rounds
// it down: the bound 0 says fewer than one per round trip on average.
// What remains is not per message, and comes to a few hundredths of one
// per round trip: the failure detectors' heartbeats and the transport's
// link checks, a few hundred a second in all whatever the traffic; a
// connection dialed meanwhile (a few hundred for its handshake, which
// over 1000 round trips on a loaded machine once passed one per round
// trip, hence the 5000); and the pools' growth,
// a slab of buffers at a time (a backup buffer per send still
// unreleased, an unexpected-message buffer per message still unreceived,
// as many as the replicas' lag ever reached, and the unexpected ones
// again after the collector empties their pools). A round trip at
// r = 2 made about 15 when the layer allocated its messages and events,
// and 2 or 3 at times before the slabs (a replica that fell a few
// hundred messages behind). Every payload is checked, so a buffer
// reused while still in use shows as a wrong byte.
func TestReplicatedNoAllocations(t *testing.T) {
	for _, path := range []string{"unix", "shm", "records"} {
		t.Run(path, func(t *testing.T) {
			var opts []Option
			switch path {
			case "shm":
				t.Setenv(shmEnv, "on")
				t.Setenv(unixEnv, "on")
				opts = append(opts, func(o *options) { o.shmInProcess = true })
			case "records":
				t.Setenv(unixEnv, "off")
				t.Setenv(integrityEnv, "on")
			}
			replicatedNoAllocations(t, tcpJobWith(t, 4, append([]Option{detecting}, opts...), func(b *launch.Bootstrap) { b.Replicas = 2 }))
		})
	}
}

func replicatedNoAllocations(t *testing.T, ss []*Session) {
	// The warm-up fills the pools: a backup buffer comes back only with a
	// commit, after the layer's acknowledgement of 32 deliveries.
	warm, rounds := 1000, 5000
	if raceEnabled {
		// Not counted (the race detector allocates), only checked: a
		// round trip takes milliseconds on a loaded machine.
		warm, rounds = 100, 100
	}
	fill := func(b []byte, round int) {
		for i := range b {
			b[i] = byte(round + i)
		}
	}
	check := func(b []byte, round int) error {
		for i := range b {
			if b[i] != byte(round+i) {
				return fmt.Errorf("round %d: byte %d is %d, want %d", round, i, b[i], byte(round+i))
			}
		}
		return nil
	}
	// 8 B and 1000 B take the small classes, 3000 B the last one (served
	// from the large buffers). Larger messages reuse large buffers the
	// same way, but the transport's direct write of one with an aligning
	// pad (from 4 KiB) allocates now and then by itself, as unreplicated.
	for _, size := range []int{8, 1000, 3000} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			// Each replica of rank 0 sends round r and checks the echo;
			// each replica of rank 1 checks and echoes it.
			trip := func(w *Comm, buf []byte, round int) error {
				if w.Rank() == 0 {
					fill(buf, round)
					if err := w.Send(ctx, buf, 1, 1); err != nil {
						return err
					}
					if _, err := w.Recv(ctx, buf, 1, 1); err != nil {
						return err
					}
					return check(buf, round)
				}
				if _, err := w.Recv(ctx, buf, 0, 1); err != nil {
					return err
				}
				if err := check(buf, round); err != nil {
					return err
				}
				return w.Send(ctx, buf, 0, 1)
			}
			errs := make(chan error, len(ss)-1)
			for _, s := range ss[1:] {
				go func() {
					w, buf := s.World(), make([]byte, size)
					for round := range warm + rounds + 1 { // AllocsPerRun runs once more than rounds
						if err := trip(w, buf, round); err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			w, buf := ss[0].World(), make([]byte, size)
			round := 0
			f := func() {
				if err := trip(w, buf, round); err != nil {
					t.Fatal(err)
				}
				round++
			}
			for range warm {
				f()
			}
			// The exact count, for the log (AllocsPerRun rounds down).
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			a := testing.AllocsPerRun(rounds, f)
			runtime.ReadMemStats(&m1)
			for range ss[1:] {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if a > 0 && !raceEnabled {
				t.Errorf("%.2f allocations per replicated round trip of %d bytes, want 0", a, size)
			}
			t.Logf("%.3f allocations per round trip", float64(m1.Mallocs-m0.Mallocs)/float64(rounds+1))
		})
	}
}

// Every small send falls in the smallest class that holds it, and a
// released buffer goes back to the largest class whose every send it
// holds (replicated.go, "Reuse of released payload buffers").
func TestReplicatedSmallClass(t *testing.T) {
	for n := 1; n < reuseMin; n++ {
		c := smallClass(n)
		if n > smallMin<<c || c > 0 && n <= smallMin<<(c-1) {
			t.Fatalf("smallClass(%d) = %d, holding %d bytes", n, c, smallMin<<c)
		}
	}
	for _, size := range []int{64, 100, 127, 128, 2048, 4095} {
		r := &replicated{}
		r.keep([][]byte{make([]byte, 0, size)})
		if r.smallBytes != size {
			t.Errorf("a released buffer of %d bytes: %d bytes kept", size, r.smallBytes)
		}
		for k, free := range r.small {
			if len(free) == 0 {
				continue
			}
			if smallMin<<k > size || k+1 < smallClasses && smallMin<<(k+1) <= size {
				t.Errorf("a released buffer of %d bytes went to class %d (sends of at most %d bytes)", size, k, smallMin<<k)
			}
		}
	}
}

// The large payloads a master writes to the replicas of a destination are
// lent to the transport's resend logs, not copied there (replicated.go,
// "Lending the backup table's buffers"), over sockets and over shared
// memory, while the master breaks its connections to the destination's
// replicas now and then, so that frames are resent from lent buffers:
// every message arrives intact, every buffer overwritten by the program
// once its send returns. (A buffer reused too early would rarely show:
// the transport resends only what the peer has not delivered, which the
// layer has not committed, so a reused buffer's resend is a duplicate
// the layer drops.)
func TestReplicatedLentBackup(t *testing.T) {
	for _, shm := range []bool{false, true} {
		t.Run(fmt.Sprintf("shm=%v", shm), func(t *testing.T) {
			const n, r, trips, size = 2, 2, 120, 20000
			var opts []Option
			if shm {
				t.Setenv(shmEnv, "on")
				t.Setenv(unixEnv, "on")
				opts = append(opts, func(o *options) { o.shmInProcess = true })
			} else {
				t.Setenv(unixEnv, "off")
			}
			ss := tcpJobWith(t, n*r, opts, func(b *launch.Bootstrap) { b.Replicas = r })
			fill := func(b []byte, i int) {
				for k := range b {
					b[k] = byte(i*31 + k*7)
				}
			}
			outs, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
				buf, want := make([]byte, size), make([]byte, size)
				peer := 1 - c.Rank()
				for i := range trips {
					if c.Rank() == 0 {
						if c.s.rep.phys == 0 && i%17 == 5 {
							for _, q := range c.s.processesOf(1) {
								c.s.tcpTr.BreakConns(q)
							}
						}
						fill(buf, i)
						if err := Send(ctx, c, buf, peer, i); err != nil {
							return "", err
						}
						clear(buf)
					}
					if _, err := Recv(ctx, c, buf, peer, i); err != nil {
						return "", err
					}
					fill(want, i)
					if !bytes.Equal(buf, want) {
						return "", fmt.Errorf("trip %d: the message arrived altered", i)
					}
					if c.Rank() == 1 {
						if err := Send(ctx, c, buf, peer, i); err != nil {
							return "", err
						}
					}
				}
				return "ok", nil
			})
			for p := range ss {
				if errs[p] != nil || outs[p] != "ok" {
					t.Fatalf("process %d: %q, %v", p, outs[p], errs[p])
				}
			}
			if ss[0].tcpTr.Stats().Lent == 0 {
				t.Error("the master of rank 0 lent no payload to its transport")
			}
		})
	}
}

// A non-master holds the transport's prompt acknowledgements
// (replicalazy.go) and lets them go when it becomes its rank's master:
// the data it receives from then on are a master's, whose sender waits
// for them.
func TestReplicatedFellowHoldsAcks(t *testing.T) {
	const master, fellow = 1, 3 // rank 1's replicas
	ss := tcpJobWith(t, 2*2, []Option{detecting}, func(b *launch.Bootstrap) { b.Replicas = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	payload := make([]byte, 64<<10)
	exchange := func(i int, to []int) {
		for _, p := range []int{0, 2} { // rank 0's replicas
			payload[0] = byte(i)
			if err := ss[p].World().Send(ctx, payload, 1, 1); err != nil {
				t.Fatalf("process %d: send %d: %v", p, i, err)
			}
		}
		buf := make([]byte, len(payload))
		for _, p := range to {
			if _, err := ss[p].World().Recv(ctx, buf, 0, 1); err != nil || buf[0] != byte(i) {
				t.Fatalf("process %d: message %d: got %d, %v", p, i, buf[0], err)
			}
		}
	}
	for i := range 8 {
		exchange(i, []int{master, fellow})
	}
	for p, s := range ss {
		if held, want := s.rep.ackHeld.Load(), p >= 2; held != want {
			t.Errorf("process %d (replica %d): acknowledgements held %v, want %v", p, p/2, held, want)
		}
	}
	ss[master].kill()
	for i := 8; i < 16; i++ {
		exchange(i, []int{fellow})
	}
	waitFor(t, ctx, "rank 1's new master to let its acknowledgements go", func() bool { return !ss[fellow].rep.ackHeld.Load() })
}
