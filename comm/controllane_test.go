package comm

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// lineWatch is an event stream (WithEvents) that closes seen once a line
// holding want is written.
type lineWatch struct {
	want []byte
	once sync.Once
	seen chan struct{}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// A membership view change completes while the data queue from the
// membership's root to a member is full. Rank 1 stops reading rank 0's
// connection (its reader waits for rank 1's engine, held by the test)
// while rank 0 fills its data queue toward rank 1; rank 2 then crashes,
// and rank 0, the root, starts the view change that excludes it, whose
// proposal to rank 1 finds the data queue full. The proposal travels in
// the transport's control lane, so no frame of the host is dropped, and
// once rank 1 reads again the view {0, 1} installs at both. The test tells
// rank 0 of the crash, and the detectors are quiet (as in every test job):
// rank 1 hears nothing from rank 0 while it does not read, which a
// detector would take, on a loaded machine, for rank 0's crash.
func TestViewChangeWhileDataQueueFull(t *testing.T) {
	started := &lineWatch{want: []byte(`"node":0,"type":"member.StabilizationStarted"`), seen: make(chan struct{})}
	// Every rank writes its events to started; only the root (rank 0,
	// the lowest) starts a view change.
	opts := []Option{func(o *options) { o.queueLen = 8; o.sockBuf = 16 << 10 }, WithEvents(started)}
	ss := tcpJobWith(t, 3, opts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// A producer keeps rank 0's data queue toward rank 1 full while rank
	// 1 reads nothing (dataQueueHold): collective steps nobody receives,
	// within rank 1's limits, sent as fast as the queue takes them (as
	// comm's backlog does).
	h := holdDataQueue(t, ctx, ss, 0, 1)

	// Rank 2 crashes, and rank 0's detector says so (at once, rather than
	// after its timeout, during which rank 1 would hear nothing from rank
	// 0 either).
	ss[2].kill()
	if err := ss[0].host.Handle(ctx, core.Failed{Node: 2}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started.seen:
	case <-ctx.Done():
		t.Fatal("rank 0 did not start the view change")
	}
	// The loop turn that started it has sent its proposals.
	if err := ss[0].host.Do(ctx, func(core.Machine, core.Env) {}); err != nil {
		t.Fatal(err)
	}
	dropped := ss[0].host.Stats().SendDropped
	if !h.full() {
		h.notFull()
	}
	h.release()
	if dropped != 0 {
		t.Errorf("rank 0's host dropped %d frames while the data queue toward rank 1 was full", dropped)
	}
	for _, r := range []int{0, 1} {
		select {
		case f := <-ss[r].Failures():
			if f.Rank != 2 {
				t.Fatalf("rank %d: rank %d failed, want rank 2", r, f.Rank)
			}
		case <-ctx.Done():
			t.Fatalf("rank %d: no view without rank 2", r)
		}
		if failed := ss[r].World().Failed(); len(failed) != 1 {
			t.Errorf("rank %d: failed ranks %v, want [2]", r, failed)
		}
	}
}

// A revocation and an agreement complete while the data queue between
// their two ranks is full, and neither waits behind that data. Rank 0
// stops reading rank 1's connection (its reader waits for rank 0's engine,
// held by the test) while rank 1 sends it data on communicator c until the
// transport's data queue is full and comm's backlog holds more. Rank 1
// then revokes c and joins an agreement on it: comm's backlog takes
// neither frame (the transport's control lane does). Once rank 0 reads
// again, the revocation reaches it ahead of every data frame that was
// still in rank 1's backlog, which rank 0 then drops as data of a revoked
// communicator (counted: behind the data, it would drop none), and the
// agreement completes at both. The detectors are quiet (as in every test
// job): rank 0 hears nothing from rank 1 while it does not read.
func TestRevokeAndAgreeWhileDataQueueFull(t *testing.T) {
	ss := tcpJobWith(t, 2, []Option{func(o *options) { o.queueLen = 8; o.sockBuf = 16 << 10 }})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// The backlog must fill because rank 0 reads nothing, not because the
	// connection is still being set up: it would then drain once up.
	connectAll(t, ctx, ss)
	var cs [2]*Comm
	for r, s := range ss {
		c, err := s.World().Dup()
		if err != nil {
			t.Fatal(err)
		}
		cs[r] = c
	}
	id := cs[1].st.id

	ss[0].mu.Lock()
	locked := true
	defer func() {
		if locked {
			ss[0].mu.Unlock()
		}
	}()
	// Collective steps on c that rank 0 never receives, sent as comm
	// sends its frames (through rank 1's backlog toward rank 0), until the
	// backlog holds 16 of them: the transport's queue is full and stays
	// so, since rank 0 reads nothing.
	q := ss[1].outq(0)
	backlog := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.backlog)
	}
	for i := 0; backlog() < 16; i++ {
		if i == 100000 {
			t.Fatal("rank 1's backlog toward rank 0 never filled")
		}
		if err := ss[1].sendFrame(0, rawFrame(kindData, id|subColl, i, 4<<10), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	backlogged := ss[1].stats.backlogged.Load()

	cs[1].Revoke()
	// What is still in the backlog now reaches the transport after the
	// revocation did, but for its head, which the backlog's goroutine may
	// have handed over already (it leaves the backlog once taken).
	queued := backlog() - 1
	if queued < 1 {
		t.Fatal("rank 1's backlog toward rank 0 emptied while rank 0 read nothing")
	}
	in, err := cs[1].startAgree(1) // sends its contribution to rank 0, the coordinator
	if err != nil {
		t.Fatal(err)
	}
	if got := ss[1].stats.backlogged.Load(); got != backlogged {
		t.Fatalf("the revocation and the agreement's step waited in a backlog (%d frames backlogged, %d before them)", got, backlogged)
	}

	ss[0].mu.Unlock()
	locked = false
	if v, err := cs[0].Agree(ctx, 1); err != nil || v != 1 {
		t.Fatalf("rank 0's agreement: %d, %v; want 1, nil", v, err)
	}
	select {
	case <-in.done:
	case <-ctx.Done():
		t.Fatal("rank 1's agreement did not complete")
	}
	if in.err != nil {
		t.Fatalf("rank 1's agreement: %v", in.err)
	}
	if got := ss[1].stats.backlogged.Load(); got != backlogged {
		t.Errorf("control frames waited in a backlog: %d frames backlogged, %d before the revocation", got, backlogged)
	}
	// A message on the world communicator, sent after the data, comes
	// behind it: once rank 0 has it, it has had every data frame, and
	// dropped each that came after the revocation.
	go ss[1].World().Send(ctx, []byte("after"), 0, 7)
	if _, err := ss[0].World().Recv(ctx, make([]byte, 8), 1, 7); err != nil {
		t.Fatal(err)
	}
	if got := ss[0].stats.dropped.Load(); got < uint64(queued) {
		t.Errorf("rank 0 dropped %d data frames of the revoked communicator, want at least the %d that were in rank 1's backlog at the revocation: it came behind data", got, queued)
	}
	for r, c := range cs {
		if _, err := c.Recv(ctx, nil, AnySource, AnyTag); !errors.Is(err, ErrRevoked) {
			t.Errorf("rank %d: a receive on the revoked communicator: %v, want ErrRevoked", r, err)
		}
	}
}
