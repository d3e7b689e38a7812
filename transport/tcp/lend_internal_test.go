package tcp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// The job and secret of the tests' transports that may share memory
// (shm_internal_test.go on Linux, the lending tests everywhere).
var (
	shmTestSecret = []byte("shm test secret, 32 bytes long!!")
	shmTestJob    = "job-shm"
)

// A reset or drop of the log while lent frames are being written leaves
// their releases for the end of the last write, not the first: the next
// lent frame's write begins under the peer's wmu before the previous
// one's written (after wmu), and its body must stay put until its own
// write ends. Every release then runs exactly once.
func TestSendLogWrittenOverlap(t *testing.T) {
	for _, drop := range []bool{false, true} {
		const stream = 7
		l := newSendLog(minResendBuffer)
		l.bind(stream)
		var released [2]int
		head := []byte{0}
		for i := range released {
			if ok, kept := l.addLent(stream, head, make([]byte, LendMin), func() { released[i]++ }); !ok || !kept {
				t.Fatalf("frame %d: addLent reported ok %v kept %v", i, ok, kept)
			}
		}
		l.written() // the first frame's write ends; the second's goes on
		if drop {
			l.drop()
		} else {
			l.reset(stream + 1)
		}
		if released != [2]int{} {
			t.Fatalf("drop %v: released %v while a lent frame was being written", drop, released)
		}
		l.written()
		if released != [2]int{1, 1} {
			t.Fatalf("drop %v: released %v after the writes ended, want [1 1]", drop, released)
		}
	}
}

// lendPair returns two transports of this process, a (node 1) and c
// (node 2), with handlers that count the seqKind frames c delivers, and
// a connection from a to c in use.
func lendPair(t *testing.T, ctx context.Context, kind core.Kind) (a, c *Transport, delivered chan struct{}) {
	t.Helper()
	var trs [2]*Transport
	for i := range trs {
		cfg := DefaultConfig()
		cfg.Node, cfg.JobID, cfg.Secret = core.NodeID(i+1), shmTestJob, shmTestSecret
		tr, err := Listen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs[i] = tr
	}
	a, c = trs[0], trs[1]
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())
	delivered = make(chan struct{}, 16)
	a.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) {}})
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind == kind {
			delivered <- struct{}{}
		}
	}})
	if err := a.Send(ctx, 2, wire.Frame{Kind: core.MakeKind(core.ProtoTest, 31), Payload: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return a, c, delivered
}

// A frame resent after its acknowledgement was lost (the receiver wrote
// it to a connection that broke, after the next connection's handshake
// had reported an older count) reaches the receiver as a duplicate. The
// receiver acknowledges it again, so the sender's log lets the frame go
// and gives its lent body back, with no new frame to carry a count.
func TestLentFrameReleasedAfterLostAck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kind := core.MakeKind(core.ProtoTest, 30)
	a, c, delivered := lendPair(t, ctx, kind)
	a.mu.Lock()
	pa := a.peers[2]
	a.mu.Unlock()
	c.mu.Lock()
	pc := c.peers[1]
	c.mu.Unlock()
	var released atomic.Int32
	// c's acknowledgement waits for its wmu: asked for, not written.
	pc.wmu.Lock()
	if !a.TryLendDirect(2, wire.Frame{Kind: kind}, make([]byte, LendMin), func() { released.Add(1) }) {
		pc.wmu.Unlock()
		t.Fatal("an idle connection declined a lent body")
	}
	select {
	case <-delivered:
	case <-ctx.Done():
		pc.wmu.Unlock()
		t.Fatal("the lent frame did not arrive")
	}
	r := pc.rs
	for !r.due.Load() {
		if ctx.Err() != nil {
			pc.wmu.Unlock()
			t.Fatal("c never asked to acknowledge the frame")
		}
		time.Sleep(time.Millisecond)
	}
	// As appendAck leaves it when the flush of its acknowledgement fails:
	// counted as written, and lost.
	r.due.Store(false)
	r.ackedN.Store(r.recvd.Load())
	r.ackedBytes.Store(r.bytes.Load())
	pc.wmu.Unlock()
	if k := released.Load(); k != 0 {
		t.Fatalf("released %d times with no acknowledgement", k)
	}
	// a resends what its log holds, as on a new connection.
	pa.wmu.Lock()
	a.mu.Lock()
	ca := pa.cur
	a.mu.Unlock()
	if ca == nil {
		pa.wmu.Unlock()
		t.Fatal("a has no connection to c")
	}
	err := a.resume(wire.NewFrameWriter(&vecConn{Conn: ca.nc}, a.cfg.WriteBufferSize), pa, ca)
	pa.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for released.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the lent body never came back (c: %d duplicates, %d frames delivered, %d acknowledged)",
				c.Stats().Duplicates, r.recvd.Load(), r.ackedN.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if d := c.Stats().Duplicates; d != 1 {
		t.Fatalf("c counted %d duplicates, want the 1 frame resent", d)
	}
	a.Close()
	if k := released.Load(); k != 1 {
		t.Fatalf("released %d times, want once", k)
	}
}

// An acknowledgement asked of the writer (due) whose wake-up the writer
// took on a connection that had stopped (writeLoop returns on it without
// writing) stays asked for with no one to write it: the writer's next
// connection waits for frames to send, and a receiver that only receives
// has none. Frames delivered meanwhile must still be acknowledged, within
// ackDelay, or the sender's Flush waits for ever and a lent body never
// comes back.
func TestAckDueWithoutWakeUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kind := core.MakeKind(core.ProtoTest, 30)
	a, c, delivered := lendPair(t, ctx, kind)
	c.mu.Lock() // the handshake that installed the stream wrote it under mu
	r := c.peers[1].rs
	c.mu.Unlock()
	r.due.Store(true) // as a writer leaves it that took its kick on a stopped connection
	var released atomic.Int32
	for !a.TryLendDirect(2, wire.Frame{Kind: kind}, make([]byte, LendMin), func() { released.Add(1) }) {
		if ctx.Err() != nil {
			t.Fatal("an idle connection declined every lent body")
		}
		time.Sleep(time.Millisecond)
	}
	<-delivered
	for released.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the lent body never came back (c: %d frames delivered, %d acknowledged, due %v)",
				r.recvd.Load(), r.ackedN.Load(), r.due.Load())
		}
		time.Sleep(time.Millisecond)
	}
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	if err := a.Flush(fctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}
