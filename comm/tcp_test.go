package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/transport/tcp"
)

// tcpJob starts n ranks in this process as Init does in n processes: a
// launcher's rendezvous, then each rank listens on 127.0.0.1 with
// transport/tcp, registers and runs its node.
func tcpJob(tb testing.TB, n int, edit ...func(*launch.Bootstrap)) []*Session {
	tb.Helper()
	return tcpJobWith(tb, n, nil, edit...)
}

// transports are the two ways tests run a job: in process (mem) and over
// the TCP transport.
var transports = []string{"mem", "tcp"}

// jobOver starts a job of n ranks over transport tr ("mem" or "tcp"), with
// opts for every rank.
func jobOver(t *testing.T, tr string, n int, opts ...Option) []*Session {
	t.Helper()
	if tr == "tcp" {
		return tcpJobWith(t, n, opts)
	}
	return job(t, n, opts...)
}

// tcpJobWith is tcpJob with options for every rank (after quiet).
func tcpJobWith(tb testing.TB, n int, opts []Option, edit ...func(*launch.Bootstrap)) []*Session {
	tb.Helper()
	secret := bytes.Repeat([]byte{7}, 32)
	rv, err := launch.NewRendezvous(launch.RendezvousConfig{JobID: "commtest", Secret: secret, Size: n})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ss := make([]*Session, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			boot := launch.Bootstrap{JobID: "commtest", Rank: r, Size: n, Rendezvous: rv.Addr(), Secret: secret}
			for _, e := range edit {
				e(&boot)
			}
			ss[r], errs[r] = initBootstrap(ctx, boot, append([]Option{quiet}, opts...)...)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			tb.Fatalf("rank %d: %v", r, err)
		}
	}
	tb.Cleanup(func() {
		// Together: Finalize waits for every process on replicated ranks.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, s := range ss {
			wg.Go(func() { s.Finalize(ctx) })
		}
		wg.Wait()
	})
	return ss
}

// The same semantics over real TCP connections (transport/tcp, the launch
// rendezvous): ordering under wildcards, large messages (4 MiB, frames
// near the transport's limit are refused cleanly), and a message sent
// right before Finalize still arrives.
func TestOverTCP(t *testing.T) { overTCP(t, tcpJob(t, 3)) }

// The same over connections encrypted with the job's certificate.
func TestEncryptedOverTCP(t *testing.T) {
	cert, key, err := launch.NewJobTLS("commtest")
	if err != nil {
		t.Fatal(err)
	}
	overTCP(t, tcpJob(t, 3, func(b *launch.Bootstrap) { b.TLSCert, b.TLSKey = cert, key }))
}

func overTCP(t *testing.T, ss []*Session) {
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	each(t, ss, func(ctx context.Context, c *Comm) error {
		switch c.Rank() {
		case 0:
			for i := range 100 {
				if err := c.Send(ctx, []byte(fmt.Sprint(i)), 1, i%4); err != nil {
					return err
				}
			}
			return c.Send(ctx, big, 2, 1)
		case 1:
			buf := make([]byte, 8)
			for i := range 100 {
				st, err := c.Recv(ctx, buf, AnySource, AnyTag)
				if err != nil {
					return err
				}
				if got := string(buf[:st.Count]); got != fmt.Sprint(i) || st.Tag != i%4 {
					return fmt.Errorf("message %d: %q tag %d", i, got, st.Tag)
				}
			}
		case 2:
			buf := make([]byte, len(big))
			st, err := c.Recv(ctx, buf, 0, 1)
			if err != nil {
				return err
			}
			if st.Count != len(big) || !bytes.Equal(buf, big) {
				return fmt.Errorf("4 MiB message: %d bytes, equal %v", st.Count, bytes.Equal(buf, big))
			}
		}
		return nil
	})
}

// A rank that failed is forgotten by the survivors' transports but for
// its address: its connection is closed and nothing is queued for it, so
// that nothing but the membership's exclusion notices (at most one a
// ProbeInterval, from the root) is sent its way. Fails without the
// RemovePeer in Session.fail.
func TestFailedRankKeepsOnlyItsAddress(t *testing.T) {
	ss := tcpJobWith(t, 3, []Option{detecting})
	ss[2].kill()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, s := range ss[:2] {
		select {
		case f := <-s.Failures():
			if f.Rank != 2 {
				t.Fatalf("failure of rank %d, want 2", f.Rank)
			}
		case <-ctx.Done():
			t.Fatal("rank 2's failure was not reported")
		}
		tr := s.tr.(*tcp.Transport)
		if tr.Connected(2) {
			t.Errorf("rank %v's transport still holds a connection to the failed rank 2", s.self)
		}
		if !slices.Contains(tr.Peers(), core.NodeID(2)) {
			t.Errorf("rank %v's transport forgot the failed rank 2's address: %v", s.self, tr.Peers())
		}
	}
}

// A rank cut off from every other while alive takes them for failed, and
// they it: each side installs a view of its own (the paper's partition
// policy). Once the cut heals, the side whose view is older must learn
// that its view is over, from the other's exclusion notices, and end
// (ErrEvicted) rather than run on alone. With the failed ranks' addresses
// forgotten on both sides, no notice could cross and rank 2 ran on for
// ever.
func TestCutOffRankLearnsItsExclusion(t *testing.T) {
	ss := tcpJobWith(t, 3, []Option{detecting})
	block := func(on bool) {
		for i := range 2 {
			ss[i].tr.(*tcp.Transport).BlockPeer(2, on)
			ss[2].tr.(*tcp.Transport).BlockPeer(core.NodeID(i), on)
		}
	}
	block(true)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, w := range []struct{ s, failed int }{{0, 2}, {2, 0}} {
		for {
			select {
			case f := <-ss[w.s].Failures():
				if f.Rank != w.failed {
					continue
				}
			case <-ctx.Done():
				t.Fatalf("rank %d never took rank %d for failed", w.s, w.failed)
			}
			break
		}
	}
	block(false)
	evicted := func(s *Session) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return errors.Is(s.state, ErrEvicted)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !evicted(ss[2]) && !(evicted(ss[0]) && evicted(ss[1])) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("neither side learned that its view is over: rank 0 %v, rank 1 %v, rank 2 %v", evicted(ss[0]), evicted(ss[1]), evicted(ss[2]))
		}
	}
}
