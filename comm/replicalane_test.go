package comm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// dataQueueHold keeps the transport's data queue from process from to
// process to full: to's reader waits for to's engine (its lock, held
// here) on data frames that a producer sends from `from` as fast as the
// queue takes them (collective steps of rank from's, which nobody
// receives).
type dataQueueHold struct {
	t        *testing.T
	ss       []*Session
	from, to int
	stop     context.CancelFunc
	produced chan struct{}
	once     sync.Once
}

func holdDataQueue(t *testing.T, ctx context.Context, ss []*Session, from, to int) *dataQueueHold {
	t.Helper()
	// The queue must fill because to reads nothing, not because a
	// connection is still being set up (it would then drain once up).
	connectAll(t, ctx, ss)
	h := &dataQueueHold{t: t, ss: ss, from: from, to: to, produced: make(chan struct{})}
	ss[to].mu.Lock()
	pctx, stop := context.WithCancel(ctx)
	h.stop = stop
	t.Cleanup(h.release)
	go func() {
		defer close(h.produced)
		for i := 0; ss[from].tr.Send(pctx, core.NodeID(to), rawFrame(kindData, worldID|subColl, i, 4<<10)) == nil; i++ {
		}
	}()
	for tries := 0; !h.stuck(); tries++ {
		if tries == 1000 {
			t.Fatalf("the data queue from process %d to process %d never stayed full", from, to)
		}
		runtime.Gosched()
	}
	return h
}

// notFull fails the test: the queue had room (a diagnosis follows).
func (h *dataQueueHold) notFull() {
	h.t.Helper()
	h.release()
	h.t.Fatalf("the data queue from process %d to process %d is no longer full; failed ranks %v at %d, %v at %d; transport at %d: %+v",
		h.from, h.to, h.ss[h.from].World().Failed(), h.from, h.ss[h.to].World().Failed(), h.to, h.from, h.ss[h.from].tcpTr.Stats())
}

// connectAll has every process keep a connection to every other and waits
// until each pair has one in use at both ends.
func connectAll(t *testing.T, ctx context.Context, ss []*Session) {
	t.Helper()
	ids := make([]core.NodeID, len(ss))
	for p := range ss {
		ids[p] = core.NodeID(p)
	}
	for p, s := range ss {
		s.tcpTr.Keep(slices.Delete(slices.Clone(ids), p, p+1))
	}
	waitFor(t, ctx, "the processes are not all connected", func() bool {
		for p, s := range ss {
			for q := range ss {
				if q != p && !s.tcpTr.Connected(core.NodeID(q)) {
					return false
				}
			}
		}
		return true
	})
}

// full reports whether many sends in a row find the data queue full.
func (h *dataQueueHold) full() bool {
	s := h.ss[h.from]
	for range 1000 {
		if err := s.tr.Send(s.try, core.NodeID(h.to), rawFrame(kindData, worldID|subColl, -1, 0)); !errors.Is(err, transport.ErrQueueFull) {
			return false
		}
	}
	return true
}

// stuck reports whether the data queue is full because the connection is:
// full before and after a pause, across which the process wrote no frame
// (on a loaded machine, a queue is also full for a moment while its
// writer waits for a core).
func (h *dataQueueHold) stuck() bool {
	out := h.ss[h.from].tcpTr.Stats().FramesOut
	if !h.full() {
		return false
	}
	<-time.After(5 * time.Millisecond)
	return h.full() && h.ss[h.from].tcpTr.Stats().FramesOut == out
}

// release lets the reader go on and stops the producer (once).
func (h *dataQueueHold) release() {
	h.once.Do(func() {
		h.ss[h.to].mu.Unlock()
		h.stop()
		<-h.produced
	})
}

// waitFor waits until cond holds, polling, or fails the test at ctx's end.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// The replication protocol's own frames (commits, decisions and their
// acknowledgements and commits, the end of the job) get through while the
// data queue from a rank's master to its fellow replica is full, none
// dropped. Two ranks run as two replicas each: process 0 is rank 0's
// master, process 2 its fellow. Process 2 stops reading process 0's
// connection while process 0 fills its data queue toward it, then:
//
//   - rank 0 sends a message to rank 1, whose replicas acknowledge it to
//     the master, which commits it and tells process 2;
//   - rank 0 makes a decision, which the master proposes to process 2;
//   - later, under a second hold, the master's program finishes and it
//     tells every process.
//
// Every one of these frames travels in the transport's control lane, so
// the master's replication layer drops none, and none waits behind the
// data (in comm's own lane for them, which holds only what the control
// lane has no room for); once process 2 reads again,
// the decision completes at both replicas with the master's value,
// process 2's backup table is empty (the master's commit reached it), and
// Finalize completes everywhere.
func TestReplicaProtocolWhileDataQueueFull(t *testing.T) {
	const master, fellow = 0, 2
	ss := tcpJobWith(t, 2*2, []Option{func(o *options) { o.queueLen = 8; o.sockBuf = 16 << 10 }},
		func(b *launch.Bootstrap) { b.Replicas = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Each process's program: rank 0 sends to rank 1 and decides; rank 1
	// receives.
	decided := make([][]byte, len(ss))
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	program := func(p int) {
		defer wg.Done()
		c := ss[p].World()
		if c.Rank() == 1 {
			buf := make([]byte, 8)
			_, errs[p] = c.Recv(ctx, buf, 0, 5)
			return
		}
		if errs[p] = c.Send(ctx, []byte("message"), 1, 5); errs[p] != nil {
			return
		}
		decided[p], errs[p] = ss[p].Decide(ctx, []byte{byte(p)})
	}

	h := holdDataQueue(t, ctx, ss, master, fellow)
	for p := range ss {
		wg.Add(1)
		go program(p)
	}
	waitFor(t, ctx, "the master neither committed its send nor proposed its decision", func() bool {
		st := ss[master].rep.stats()
		return st.Commits >= 1 && st.Decisions >= 1
	})
	// The master proposed under the layer's lock, which stats took after.
	if !h.full() {
		h.notFull()
	}
	dropped, laned := ss[master].rep.dropped.Load(), ss[master].rep.laned.Load()
	h.release()
	if dropped != 0 || laned != 0 {
		t.Errorf("the master's replication layer dropped %d messages, and %d waited behind data, while the data queue toward its fellow was full", dropped, laned)
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", p, err)
		}
	}
	for _, p := range []int{master, fellow} {
		if string(decided[p]) != string([]byte{master}) {
			t.Errorf("process %d decided %v, want the master's proposal %v", p, decided[p], []byte{master})
		}
	}
	// The fellow's program reached the send before or after the commit
	// came (its lock released them at once): it kept the send and dropped
	// it on the commit, or skipped it.
	if st := ss[fellow].rep.stats(); st.Backup != 0 || st.Backed+st.Skipped != 1 {
		t.Errorf("the fellow replica's backup table holds %d sends (%d kept, %d skipped), want 0 (1 kept or skipped): it missed the master's commit", st.Backup, st.Backed, st.Skipped)
	}

	// The end of the job: the master's program finishes while its data
	// queue toward the fellow is full again.
	h = holdDataQueue(t, ctx, ss, master, fellow)
	if err := ss[master].host.Handle(ctx, replica.Finish{}); err != nil {
		t.Fatal(err)
	}
	if err := ss[master].host.Do(ctx, func(core.Machine, core.Env) {}); err != nil {
		t.Fatal(err)
	}
	if !h.full() {
		h.notFull()
	}
	dropped, laned = ss[master].rep.dropped.Load(), ss[master].rep.laned.Load()
	h.release()
	if dropped != 0 || laned != 0 {
		t.Errorf("the master's replication layer dropped %d messages, and %d waited behind data, at the end of its program while the data queue toward its fellow was full", dropped, laned)
	}
	ferrs := make([]error, len(ss))
	for p, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ferrs[p] = s.Finalize(ctx)
		}()
	}
	wg.Wait()
	for p, err := range ferrs {
		if err != nil {
			t.Errorf("process %d: Finalize: %v", p, err)
		}
	}
}

// gatedTransport refuses every send that may not wait (a full queue) and
// holds every other until open is closed, recording what it sent.
type gatedTransport struct {
	transport.Transport // only Send is called
	open                chan struct{}
	mu                  sync.Mutex
	sent                []wire.Frame
}

func (g *gatedTransport) Send(ctx context.Context, to core.NodeID, f wire.Frame) error {
	if ctx.Err() != nil {
		return transport.ErrQueueFull
	}
	select {
	case <-g.open:
	case <-ctx.Done():
		return transport.ErrQueueFull
	}
	g.mu.Lock()
	g.sent = append(g.sent, f)
	g.mu.Unlock()
	return nil
}

// A process that reads nothing costs its peers' control lanes no more than
// a message per cumulative channel level and the decisions' messages: of
// a thousand acknowledgements and a thousand commits of one channel each,
// sent while the transport's control lane toward it is full, the lane
// keeps the latest of each (the one in the hands of the transport aside),
// and every decision message, in order; once the transport takes frames
// again, the process gets the latest levels.
func TestReplicaLaneBounded(t *testing.T) {
	g := &gatedTransport{open: make(chan struct{})}
	s := newSessionAs(g, 0, 2, options{})
	defer s.stop()
	codec := wire.NewCodec()
	if err := replica.RegisterCodecs(codec); err != nil {
		t.Fatal(err)
	}
	r := newReplicated(replica.Layout{Ranks: 2, Replicas: 2}, 0, nil)
	r.bind(s, codec)
	const n, to = 1000, 1
	r.lmu.Lock()
	r.sendControl(to, &replica.Decision{Ballot: 0, K: 1, Value: []byte{1}})
	for i := range uint64(n) {
		r.sendControl(to, &replica.Ack{Comm: 1, Src: 1, Dst: 0, Upto: i + 1})
		r.sendControl(to, &replica.Commit{Comm: 1, Src: 0, Dst: 1, Upto: i + 1})
	}
	r.sendControl(to, &replica.Decision{Ballot: 0, K: 2, Value: []byte{2}})
	l := r.lanes[to]
	r.lmu.Unlock()
	l.mu.Lock()
	waiting := len(l.backlog)
	l.mu.Unlock()
	// The drain holds the first decision, or has yet to take it.
	if waiting > 4 {
		t.Errorf("the lane holds %d messages, want at most 4 (a decision, the latest acknowledgement and commit, a decision)", waiting)
	}
	close(g.open)
	if err := l.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range g.sent {
		m, err := codec.Unmarshal(f.Kind, f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(m))
	}
	want := []string{
		`decision{b0 k1 "\x01"}`,
		fmt.Sprintf("ack{c1 1→0 ≤%d}", n),
		fmt.Sprintf("commit{c1 0→1 ≤%d}", n),
		`decision{b0 k2 "\x02"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the transport got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := r.dropped.Load(); d != 0 {
		t.Errorf("%d messages dropped, want none", d)
	}
}

// A revocation on a replicated job gets through while the data queue
// from the revoking rank's master to a replica of the other rank is full:
// comm's revocations are a control channel of the replication layer,
// whose data travels in the transport's control lane, so the master
// neither drops it nor queues it behind the data, and once process 1
// (rank 1's master) reads again, both replicas of rank 1 find the
// communicator revoked.
func TestReplicatedRevokeWhileDataQueueFull(t *testing.T) {
	const master, peer = 0, 1 // rank 0's master; rank 1's master
	ss := tcpJobWith(t, 2*2, []Option{func(o *options) { o.queueLen = 8; o.sockBuf = 16 << 10 }},
		func(b *launch.Bootstrap) { b.Replicas = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := make([]*Comm, len(ss))
	for p, s := range ss {
		c, err := s.World().Dup()
		if err != nil {
			t.Fatal(err)
		}
		cs[p] = c
	}

	h := holdDataQueue(t, ctx, ss, master, peer)
	for _, p := range []int{master, 2} { // both replicas of rank 0
		cs[p].Revoke()
	}
	if !h.full() {
		h.notFull()
	}
	dropped, laned := ss[master].rep.dropped.Load(), ss[master].rep.laned.Load()
	h.release()
	if dropped != 0 || laned != 0 {
		t.Errorf("rank 0's master dropped %d messages, and %d waited behind data, while its data queue toward rank 1's master was full", dropped, laned)
	}
	for _, p := range []int{1, 3} { // both replicas of rank 1
		if _, err := cs[p].Recv(ctx, nil, 0, 1); !errors.Is(err, ErrRevoked) {
			t.Errorf("process %d: a receive on the revoked communicator: %v, want ErrRevoked", p, err)
		}
	}
}

// A replica that reads nothing costs the sending rank no more than the
// backup table's bound: process 1 (rank 1's master) stops reading while
// rank 0 sends it message after message; no commit can come (process 1
// acknowledges nothing), so rank 0's replicas keep at most MaxBackup sends
// each and their programs wait in Send, one send held each, instead of
// piling the rest up. Once process 1 reads again (the master sends again
// what it dropped), every message arrives at both replicas of rank 1, in
// order.
func TestReplicatedBackupBoundedWhileReceiverStalls(t *testing.T) {
	const maxBackup, msgs = 4, 40
	ss := tcpJobWith(t, 2*2, []Option{func(o *options) { o.queueLen = 8; o.sockBuf = 16 << 10; o.maxBackup = maxBackup }},
		func(b *launch.Bootstrap) { b.Replicas = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	h := holdDataQueue(t, ctx, ss, 0, 1)
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for p, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := s.World()
			buf := make([]byte, 1024)
			for i := range msgs {
				if c.Rank() == 0 {
					buf[0] = byte(i)
					errs[p] = c.Send(ctx, buf, 1, 1)
				} else if _, errs[p] = c.Recv(ctx, buf, 0, 1); errs[p] == nil && buf[0] != byte(i) {
					errs[p] = fmt.Errorf("message %d: got %d", i, buf[0])
				}
				if errs[p] != nil {
					return
				}
			}
		}()
	}
	held := func(p int) int {
		r := ss[p].rep
		r.lmu.Lock()
		defer r.lmu.Unlock()
		return len(r.held)
	}
	waitFor(t, ctx, "rank 0's replicas never filled their backup tables", func() bool {
		return ss[0].rep.stats().Backup == maxBackup && ss[2].rep.stats().Backup == maxBackup && held(0) == 1 && held(2) == 1
	})
	if !h.full() {
		h.notFull()
	}
	h.release()
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", p, err)
		}
	}
	for _, p := range []int{0, 2} {
		if st := ss[p].rep.stats(); st.PeakBackup > maxBackup {
			t.Errorf("process %d: the backup table held %d sends, bound %d", p, st.PeakBackup, maxBackup)
		}
	}
}

// A replicated job's view change, the master change it brings and an
// agreement complete while the data queue from the membership's root to
// the new master is full. Two ranks run as two replicas each: process 0
// is rank 0's master, process 2 its fellow, process 1 rank 1's master
// and, once process 0 is gone, the membership's root. Process 2 stops
// reading process 1's connection while process 1 fills its data queue
// toward it; process 0 then crashes, and process 1 starts the view change
// that excludes it, whose proposal to process 2 finds the data queue
// full. Meanwhile rank 1 starts an agreement on a communicator, whose step
// toward rank 0 (a control channel of the replication layer) process 1
// sends to process 2 too. Every one of these frames travels in the
// transport's control lane: process 1's host and replication layer drop
// none, and none waits behind the data. Once process 2 reads again, the
// view without process 0 installs, process 2 takes over as rank 0's
// master (rank 0 lives on: no rank failed), the agreement completes at
// every replica with the value agreed, and a message rank 0's new master
// sends reaches both replicas of rank 1. The test tells process 1 of the
// crash, and the detectors are quiet (as in every test job): process 2
// hears nothing from process 1 while it does not read.
func TestReplicatedMasterChangeAndAgreeWhileDataQueueFull(t *testing.T) {
	const dead, root, heir, fellow = 0, 1, 2, 3 // rank 0's master, rank 1's master, rank 0's fellow, rank 1's fellow
	started := &lineWatch{want: []byte(`"node":1,"type":"member.StabilizationStarted"`), seen: make(chan struct{})}
	ss := tcpJobWith(t, 2*2, []Option{func(o *options) { o.queueLen = 8; o.sockBuf = 16 << 10 }, WithEvents(started)},
		func(b *launch.Bootstrap) { b.Replicas = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := make([]*Comm, len(ss))
	for p, s := range ss {
		c, err := s.World().Dup()
		if err != nil {
			t.Fatal(err)
		}
		cs[p] = c
	}

	h := holdDataQueue(t, ctx, ss, root, heir)
	ss[dead].kill()
	if err := ss[root].host.Handle(ctx, core.Failed{Node: dead}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started.seen:
	case <-ctx.Done():
		t.Fatal("process 1 did not start the view change")
	}
	// The loop turn that started it has sent its proposals.
	if err := ss[root].host.Do(ctx, func(core.Machine, core.Env) {}); err != nil {
		t.Fatal(err)
	}
	// Both replicas of rank 1 join the agreement: the master's step goes
	// to every replica of rank 0 before startAgree returns (control
	// channels are handed to the layer at once).
	var ins []*agreeInst
	for _, p := range []int{root, fellow} {
		in, err := cs[p].startAgree(1)
		if err != nil {
			t.Fatalf("process %d: %v", p, err)
		}
		ins = append(ins, in)
	}
	if !h.full() {
		h.notFull()
	}
	hostDropped := ss[root].host.Stats().SendDropped
	dropped, laned := ss[root].rep.dropped.Load(), ss[root].rep.laned.Load()
	h.release()
	if hostDropped != 0 {
		t.Errorf("process 1's host dropped %d frames while the data queue toward process 2 was full", hostDropped)
	}
	if dropped != 0 || laned != 0 {
		t.Errorf("process 1's replication layer dropped %d messages, and %d waited behind data, while the data queue toward process 2 was full", dropped, laned)
	}

	if v, err := cs[heir].Agree(ctx, 1); err != nil || v != 1 {
		t.Errorf("process 2's agreement: %d, %v; want 1, nil", v, err)
	}
	for i, in := range ins {
		select {
		case <-in.done:
		case <-ctx.Done():
			t.Fatalf("process %d's agreement did not complete", []int{root, fellow}[i])
		}
		if in.err != nil || in.dec.Flag != 1 {
			t.Errorf("process %d's agreement: %d, %v; want 1, nil", []int{root, fellow}[i], in.dec.Flag, in.err)
		}
	}
	waitFor(t, ctx, "process 2 never took over as rank 0's master", func() bool {
		return ss[heir].rep.stats().Takeovers == 1
	})
	var wg sync.WaitGroup
	errs := make([]error, len(ss))
	got := make([][]byte, len(ss))
	for _, p := range []int{root, fellow} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[p] = make([]byte, 8)
			var st Status
			st, errs[p] = ss[p].World().Recv(ctx, got[p], 0, 9)
			got[p] = got[p][:st.Count]
		}()
	}
	if err := ss[heir].World().Send(ctx, []byte("after"), 1, 9); err != nil {
		t.Fatalf("process 2's send as rank 0's master: %v", err)
	}
	wg.Wait()
	for _, p := range []int{root, fellow} {
		if errs[p] != nil || string(got[p]) != "after" {
			t.Errorf("process %d: received %q, %v; want \"after\" from rank 0's new master", p, got[p], errs[p])
		}
	}
	for _, p := range []int{root, heir, fellow} {
		if failed := ss[p].World().Failed(); len(failed) != 0 {
			t.Errorf("process %d: failed ranks %v, want none (rank 0 lives on in process 2)", p, failed)
		}
	}
}
