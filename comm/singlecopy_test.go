package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/transport/tcp"
)

// shmJob starts n ranks in this process whose connections run over shared
// memory, as those of one host's processes do, and connects them (a send
// offers its address only over a connection in use), with more options.
func shmJob(t *testing.T, n int, opts ...Option) []*Session {
	t.Helper()
	t.Setenv(shmEnv, "on")
	t.Setenv(unixEnv, "on")
	ss := tcpJobWith(t, n, append([]Option{func(o *options) { o.shmInProcess = true }}, opts...))
	each(t, ss, func(ctx context.Context, c *Comm) error { return Barrier(ctx, c) })
	return ss
}

// copierFunc is a singleCopier whose Pull is pull, in front of a real one.
type copierFunc struct {
	singleCopier
	pull func(peer core.NodeID, dst []byte, addr uint64) error
}

func (c copierFunc) Pull(peer core.NodeID, dst []byte, addr uint64) error {
	return c.pull(peer, dst, addr)
}

// Over shared memory, large messages move in one copy, read from the
// sender's memory: the rendezvous's cases (sends ahead of their receives,
// probes, any tag order, a receive too small) and a blocking ping-pong of
// 1 MiB each deliver every byte, and every message that fits its receive
// was read by the receiver, none asked for.
func TestSingleCopy(t *testing.T) {
	ss := shmJob(t, 2)
	rendezvous(t, ss)
	if !ss[1].single.SingleCopy(0) {
		t.Fatal("no single copy offered over shared memory")
	}
	const rounds = 20
	each(t, ss, func(ctx context.Context, c *Comm) error {
		buf := make([]byte, 1<<20)
		for i := range rounds {
			if c.Rank() == 0 {
				if err := c.Send(ctx, rdvPayload(i, len(buf)), 1, i); err != nil {
					return err
				}
				if st, err := c.Recv(ctx, buf, 1, i); err != nil || st.Count != len(buf) || !bytes.Equal(buf, rdvPayload(i+1, len(buf))) {
					return fmt.Errorf("round %d: %+v %v, intact %v", i, st, err, bytes.Equal(buf, rdvPayload(i+1, len(buf))))
				}
				continue
			}
			if st, err := c.Recv(ctx, buf, 0, i); err != nil || st.Count != len(buf) || !bytes.Equal(buf, rdvPayload(i, len(buf))) {
				return fmt.Errorf("round %d: %+v %v, intact %v", i, st, err, bytes.Equal(buf, rdvPayload(i, len(buf))))
			}
			if err := c.Send(ctx, rdvPayload(i+1, len(buf)), 0, i); err != nil {
				return err
			}
		}
		return nil
	})
	// rendezvous: 12 messages to rank 1 fit their receives (the 13th does
	// not); the ping-pong: rounds each way.
	if got, want := ss[1].stats.pulled.Load(), uint64(12+rounds); got != want {
		t.Errorf("rank 1 read %d messages from its sender's memory, want %d", got, want)
	}
	if got := ss[0].stats.pulled.Load(); got != rounds {
		t.Errorf("rank 0 read %d messages from its sender's memory, want %d", got, rounds)
	}
	for r, s := range ss {
		if n := s.stats.pullFallbacks.Load(); n != 0 {
			t.Errorf("rank %d asked for %d messages after a failed read", r, n)
		}
	}
}

// Where the kernel refuses to read the sender's memory, the receiver asks
// for the data, which comes through the ring: every message intact, one
// fallback per message offered.
func TestSingleCopyRefused(t *testing.T) {
	ss := shmJob(t, 2)
	var refused atomic.Int64
	ss[1].single = copierFunc{ss[1].single, func(core.NodeID, []byte, uint64) error {
		refused.Add(1)
		return fmt.Errorf("%w: operation not permitted (test)", tcp.ErrSingleCopyRefused)
	}}
	rendezvous(t, ss)
	if got := ss[1].stats.pullFallbacks.Load(); got != 12 || refused.Load() != 12 {
		t.Errorf("%d fallbacks after %d refusals, want 12 of each", got, refused.Load())
	}
	if got := ss[1].stats.pulled.Load(); got != 0 {
		t.Errorf("%d messages read despite the refusal", got)
	}
}

// A blocking Send that gives up waiting takes back the address it offered:
// while its receiver is reading from it, Send returns only once the read
// is done (the caller may then change its buffer); before any receive took
// it, at once, and the receive posted later gets the message as it was
// sent (the sender's copy, through the ring).
func TestSingleCopyWithdraw(t *testing.T) {
	ss := shmJob(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0, w1 := ss[0].World(), ss[1].World()

	entered, release := make(chan struct{}), make(chan struct{})
	var readDone atomic.Bool
	real := ss[1].single
	ss[1].single = copierFunc{real, func(peer core.NodeID, dst []byte, addr uint64) error {
		close(entered)
		<-release
		err := real.Pull(peer, dst, addr)
		readDone.Store(true)
		return err
	}}
	want := rdvPayload(1, 2*EagerMax)
	buf := bytes.Clone(want)
	recvd := make(chan error, 1)
	go func() {
		got := make([]byte, len(want))
		st, err := w1.Recv(ctx, got, 0, 1)
		if err == nil && (st.Count != len(want) || !bytes.Equal(got, want)) {
			err = fmt.Errorf("%+v, intact %v", st, bytes.Equal(got, want))
		}
		recvd <- err
	}()
	short, stop := context.WithCancel(ctx)
	sent := make(chan error, 1)
	go func() { sent <- w0.Send(short, buf, 1, 1) }()
	<-entered
	stop()
	// The sender withdraws its offer and waits while the receiver reads
	// (whose progress takes the withdrawal only after the read); only
	// then is the read let go.
	for ss[0].stats.withdrawals.Load() == 0 && ctx.Err() == nil {
		runtime.Gosched()
	}
	close(release)
	if err := <-sent; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Send: %v", err)
	}
	if !readDone.Load() {
		t.Fatal("Send returned while its receiver was reading the caller's buffer")
	}
	clear(buf)
	if err := <-recvd; err != nil {
		t.Fatalf("the message read while its Send gave up: %v", err)
	}

	// Withdrawn before a receive takes it.
	ss[1].single = real
	buf = bytes.Clone(want)
	short, stop = context.WithCancel(ctx)
	stop()
	if err := w0.Send(short, buf, 1, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send with a done context: %v", err)
	}
	clear(buf)
	got := make([]byte, len(want))
	if st, err := w1.Recv(ctx, got, 0, 2); err != nil || st.Count != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("the message of a Send that gave up: %+v, %v, intact %v", st, err, bytes.Equal(got, want))
	}
	if n := ss[1].stats.pulled.Load(); n != 1 {
		t.Errorf("%d messages read from the sender's memory, want 1 (the first)", n)
	}
}

// The rendezvous's failures over shared memory, where the sends offer
// their address (TestRendezvousFailures): a send to a rank that fails,
// the receive of a failed rank's ready-to-send, a send on a revoked
// communicator.
func TestSingleCopyFailures(t *testing.T) {
	rendezvousFailures(t, shmJob(t, 4, detecting))
}

// singleCopyChildEnv names the variable that makes TestSingleCopyChild the
// rank of another process (TestSingleCopyPeerKilled): its value is the
// rendezvous's address.
const singleCopyChildEnv = "COHORT_TEST_SINGLE_COPY_CHILD"

// A rank in another process killed in the middle of a single-copy
// transfer: its receiver, reading the message from the dying process's
// memory, gets an error naming the rank, not a hang. The first messages
// are read across the two processes, intact; the receiver kills the
// sender as it starts reading the third.
func TestSingleCopyPeerKilled(t *testing.T) {
	if !shmSupportedHere() {
		t.Skip("no shared memory here")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(shmEnv, "on")
	t.Setenv(unixEnv, "on")
	secret := bytes.Repeat([]byte{7}, 32)
	rv, err := launch.NewRendezvous(launch.RendezvousConfig{JobID: "singlecopy", Secret: secret, Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	child := exec.Command(exe, "-test.run=^TestSingleCopyChild$", "-test.count=1")
	child.Env = append(os.Environ(), singleCopyChildEnv+"="+rv.Addr())
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var reap sync.Once
	wait := func() { reap.Do(func() { child.Wait() }) }
	defer func() { child.Process.Kill(); wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := initBootstrap(ctx, launch.Bootstrap{JobID: "singlecopy", Rank: 0, Size: 2, Rendezvous: rv.Addr(), Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Finalize(context.Background())
	real := s.single
	if real == nil {
		t.Fatal("no single-copy reader over transport/tcp")
	}
	var pulls atomic.Int32
	s.single = copierFunc{real, func(peer core.NodeID, dst []byte, addr uint64) error {
		if pulls.Add(1) == 3 {
			child.Process.Kill()
			wait()
		}
		return real.Pull(peer, dst, addr)
	}}
	w := s.World()
	if err := Barrier(ctx, w); err != nil { // connected: the sends offer their address
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range 2 {
		if st, err := w.Recv(ctx, buf, 1, i); err != nil || !bytes.Equal(buf, rdvPayload(i, len(buf))) {
			t.Fatalf("message %d from the other process: %+v %v", i, st, err)
		}
	}
	if n := s.stats.pulled.Load(); n != 2 {
		t.Fatalf("%d messages read from the other process's memory, want 2", n)
	}
	_, err = w.Recv(ctx, buf, 1, 2)
	var pf *ProcFailedError
	if !errors.As(err, &pf) || len(pf.Ranks) != 1 || pf.Ranks[0] != 1 {
		t.Fatalf("the receive whose sender was killed as it was read: %v, want rank 1's failure", err)
	}
	if n := s.stats.pullFallbacks.Load(); n != 1 {
		t.Errorf("%d reads failed, want 1", n)
	}
}

// TestSingleCopyChild is rank 1 of TestSingleCopyPeerKilled, in a process
// of its own: it sends 1 MiB messages to rank 0 until it is killed.
func TestSingleCopyChild(t *testing.T) {
	addr := os.Getenv(singleCopyChildEnv)
	if addr == "" {
		t.Skip("the other process of TestSingleCopyPeerKilled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := initBootstrap(ctx, launch.Bootstrap{JobID: "singlecopy", Rank: 1, Size: 2, Rendezvous: addr, Secret: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if err := Barrier(ctx, s.World()); err != nil {
		t.Fatal(err)
	}
	for i := 0; ctx.Err() == nil; i++ {
		if err := s.World().Send(ctx, rdvPayload(i, 1<<20), 0, i); err != nil {
			t.Fatal(err)
		}
	}
}

// shmSupportedHere reports whether this system has the shared-memory path
// (and with it single copy).
func shmSupportedHere() bool { return runtime.GOOS == "linux" }

// noCopier offers no single copy: messages go through the rings.
type noCopier struct{ singleCopier }

func (noCopier) SingleCopy(core.NodeID) bool { return false }

// BenchmarkSameHostLarge is a ping-pong of large messages between two
// ranks of this process over shared memory, read from the sender's memory
// (single) or through the rings (ring). An operation is one message.
func BenchmarkSameHostLarge(b *testing.B) {
	for _, size := range []int{256 << 10, 1 << 20} {
		for _, path := range []string{"single", "ring"} {
			b.Run(fmt.Sprintf("size=%d/copy=%s", size, path), func(b *testing.B) {
				b.Setenv(shmEnv, "on")
				b.Setenv(unixEnv, "on")
				ss := tcpJobWith(b, 2, []Option{func(o *options) { o.shmInProcess = true }})
				if path == "ring" {
					for _, s := range ss {
						s.single = noCopier{s.single}
					}
				}
				ctx := context.Background()
				w0, w1 := ss[0].World(), ss[1].World()
				if err := w0.Send(ctx, nil, 1, 0); err != nil { // connect
					b.Fatal(err)
				}
				if _, err := w1.Recv(ctx, nil, 0, 0); err != nil {
					b.Fatal(err)
				}
				echo := make(chan error, 1)
				stop := make(chan struct{})
				go func() {
					buf := make([]byte, size)
					for {
						if _, err := w1.Recv(ctx, buf, 0, 1); err != nil {
							echo <- err
							return
						}
						select {
						case <-stop:
							echo <- nil
							return
						default:
						}
						if err := w1.Send(ctx, buf, 0, 1); err != nil {
							echo <- err
							return
						}
					}
				}()
				buf := make([]byte, size)
				b.SetBytes(int64(2 * size))
				b.ReportAllocs()
				for b.Loop() {
					if err := w0.Send(ctx, buf, 1, 1); err != nil {
						b.Fatal(err)
					}
					if _, err := w0.Recv(ctx, buf, 1, 1); err != nil {
						b.Fatal(err)
					}
				}
				close(stop)
				w0.Send(ctx, buf, 1, 1)
				if err := <-echo; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
