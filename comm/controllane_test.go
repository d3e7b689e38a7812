package comm

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
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
// once rank 1 reads again the view {0, 1} installs at both.
func TestViewChangeWhileDataQueueFull(t *testing.T) {
	started := &lineWatch{want: []byte(`"node":0,"type":"member.StabilizationStarted"`), seen: make(chan struct{})}
	// Every rank writes its events to started; only the root (rank 0,
	// the lowest) starts a view change.
	opts := []Option{func(o *options) { o.queueLen = 8; o.sockBuf = 16 << 10 }, WithEvents(started)}
	ss := tcpJobWith(t, 3, opts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	ss[1].mu.Lock()
	locked := true
	defer func() {
		if locked {
			ss[1].mu.Unlock()
		}
	}()
	// A producer keeps rank 0's data queue toward rank 1 full: collective
	// steps nobody receives, within rank 1's limits, sent as fast as the
	// queue takes them (as comm's backlog does).
	const size = 64 << 10
	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	produced := make(chan int, 1)
	go func() {
		i := 0
		for ss[0].tr.Send(pctx, 1, rawFrame(kindData, worldID|subColl, i, size)) == nil {
			i++
		}
		produced <- i
	}()
	// Once the connection is full (rank 1 reads nothing), the queue stays
	// full: many tries in a row find no room.
	full := func() bool {
		for range 1000 {
			if err := ss[0].tr.Send(ss[0].try, 1, rawFrame(kindData, worldID|subColl, -1, 0)); !errors.Is(err, transport.ErrQueueFull) {
				return false
			}
		}
		return true
	}
	for tries := 0; !full(); tries++ {
		if tries == 10000 {
			t.Fatal("the data queue toward rank 1 never stayed full")
		}
		runtime.Gosched()
	}

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
	if !full() {
		t.Fatal("the data queue toward rank 1 is no longer full")
	}
	ss[1].mu.Unlock()
	locked = false
	stopProducer()
	<-produced
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
