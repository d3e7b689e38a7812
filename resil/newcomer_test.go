package resil

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// newcomerRun runs ringFunc on a Local job of n ranks and spares spares;
// crash(p, restarts, it) says whether process p crashes before iteration
// it of the attempt after restarts recoveries, and recovering(p), if not
// nil, is called at process p in every recovery round. join(ss, start) is
// called on the test's goroutine; start() starts a newcomer (JoinLocal)
// that runs the same function, and returns its session. The outcomes are
// by process, newcomers last.
func newcomerRun(t *testing.T, n, spares, iters int, crash func(p, restarts, it int) bool, recovering func(p int), join func(ss []*comm.Session, start func() *comm.Session)) []outcome {
	t.Helper()
	return newcomerRunWith(t, n, spares, iters, crash, func(p int, j *Job) {
		if recovering != nil {
			j.duringRecovery = func() { recovering(p) }
		}
	}, join)
}

// newcomerRunWith is newcomerRun with setup(p, j) called on process p's
// job before it runs, to set its test hooks.
func newcomerRunWith(t *testing.T, n, spares, iters int, crash func(p, restarts, it int) bool, setup func(p int, j *Job), join func(ss []*comm.Session, start func() *comm.Session)) []outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ss, err := comm.LocalSpares(ctx, n, spares)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		out = make([]outcome, len(ss))
		wg  sync.WaitGroup
	)
	run := func(p int, s *comm.Session) {
		defer wg.Done()
		defer s.Finalize(context.Background())
		var o outcome
		defer func() {
			mu.Lock()
			out[p] = o
			mu.Unlock()
		}()
		j, err := New(s, DefaultConfig())
		if err != nil {
			o.err = err
			return
		}
		setup(p, j)
		o.err = j.Run(ctx, ringFunc(j, s, iters, -1, func(it int) bool {
			return crash(p, j.Stats().Restarts, it)
		}, &o.result))
		o.rank, o.stats = j.Rank(), j.Stats()
	}
	for p, s := range ss {
		wg.Add(1)
		go run(p, s)
	}
	join(ss, func() *comm.Session {
		nc, err := comm.JoinLocal(ss[0])
		if err != nil {
			t.Error(err)
			return nil
		}
		mu.Lock()
		p := len(out)
		out = append(out, outcome{})
		mu.Unlock()
		wg.Add(1)
		go run(p, nc)
		return nc
	})
	wg.Wait()
	for p, o := range out {
		t.Logf("process %d: rank %d, result %#x, err %v, stats %+v", p, o.rank, o.result, o.err, o.stats)
	}
	return out
}

// admitted waits until every session of ss lists p among its newcomers.
func admitted(t *testing.T, ss []*comm.Session, p int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		all := true
		for _, s := range ss {
			all = all && slices.Contains(s.Newcomers(), p)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("newcomer %d not admitted everywhere", p)
		}
	}
}

// A job of 3 ranks and 1 spare: process 1 crashes and the spare takes
// rank 1; a newcomer joins (process 4) and, once every survivor's view
// holds it, process 2 crashes: the newcomer takes rank 2, with the state
// of the last checkpoint from rank 2's buddy, and the result is the
// failure-free one.
func TestNewcomerTakesARank(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detections")
	}
	const n, spares, iters = 3, 1, 40
	clean := runRing(t, n, spares, 1, iters, func(int, int) bool { return false })
	want := clean[0].result
	ready, recovered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	out := newcomerRun(t, n, spares, iters, func(p, restarts, it int) bool {
		switch {
		case p == 1 && restarts == 0 && it == 9:
			return true
		case restarts == 1 && it == 16:
			// Hold every rank here until the newcomer is admitted, then
			// lose process 2.
			once.Do(func() { close(recovered) })
			<-ready
			return p == 2
		}
		return false
	}, nil, func(ss []*comm.Session, start func() *comm.Session) {
		// The newcomer joins after the first recovery: admitted before
		// it, it would also take part in that one (as a spare) and count
		// two restarts.
		<-recovered
		if nc := start(); nc != nil {
			admitted(t, []*comm.Session{ss[0], ss[2], ss[3]}, 4)
		}
		close(ready)
	})
	for _, p := range []int{0, 3, 4} {
		o := out[p]
		if o.err != nil || o.result != want {
			t.Errorf("process %d: err %v, result %#x (want %#x)", p, o.err, o.result, want)
		}
	}
	if out[3].rank != 1 || out[4].rank != 2 || !out[4].stats.TookOver || out[4].stats.Restarts != 1 {
		t.Errorf("the spare holds rank %d (want 1), the newcomer rank %d (want 2, took over %v, restarts %d)", out[3].rank, out[4].rank, out[4].stats.TookOver, out[4].stats.Restarts)
	}
}

// A newcomer that joins while a rank crashes, without waiting for either:
// whether the survivors add it at the attempt's end (the spare, lower
// numbered, still takes the rank) or at the run's end, it holds no rank,
// and the result is the failure-free one. Its Run returns nil, or, if
// the run ended before every survivor's view held it,
// comm.ErrNoWelcome once the others have left.
func TestNewcomerRacesAFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detections")
	}
	const n, spares, iters = 3, 1, 40
	clean := runRing(t, n, spares, 1, iters, func(int, int) bool { return false })
	want := clean[0].result
	started := make(chan struct{})
	out := newcomerRun(t, n, spares, iters, func(p, restarts, it int) bool {
		if restarts == 0 && it == 9 {
			<-started
			return p == 1
		}
		return false
	}, nil, func(ss []*comm.Session, start func() *comm.Session) {
		start()
		close(started)
	})
	for _, p := range []int{0, 2, 3} {
		if o := out[p]; o.err != nil || o.result != want {
			t.Errorf("process %d: err %v, result %#x (want %#x)", p, o.err, o.result, want)
		}
	}
	if nc := out[4]; nc.rank != -1 || out[3].rank != 1 || (nc.err != nil && !errors.Is(nc.err, comm.ErrNoWelcome)) {
		t.Errorf("the newcomer: rank %d (want none), err %v; the spare holds rank %d (want 1)", nc.rank, nc.err, out[3].rank)
	}
}

// A newcomer that every process has seen admitted when the run ends
// without failure is told so by the last agreement: its Run returns nil.
func TestNewcomerAtTheRunsEnd(t *testing.T) {
	const n, spares, iters = 2, 0, 12
	clean := runRing(t, n, spares, 1, iters, func(int, int) bool { return false })
	want := clean[0].result
	ready := make(chan struct{})
	out := newcomerRun(t, n, spares, iters, func(p, restarts, it int) bool {
		if it == 10 {
			<-ready
		}
		return false
	}, nil, func(ss []*comm.Session, start func() *comm.Session) {
		if start() != nil {
			admitted(t, ss, 2)
		}
		close(ready)
	})
	for p, o := range out[:n] {
		if o.err != nil || o.result != want {
			t.Errorf("process %d: err %v, result %#x (want %#x)", p, o.err, o.result, want)
		}
	}
	if nc := out[n]; nc.err != nil || nc.rank != -1 {
		t.Errorf("the newcomer: err %v, rank %d (want nil, none)", nc.err, nc.rank)
	}
}

// A newcomer that joins while the survivors recover from the loss of
// process 1 (started from inside the recovery round) is not added by that
// recovery, which adds no one: the spare takes rank 1. Once every view
// holds it, process 2 crashes, and the newcomer takes rank 2 at the end
// of that attempt, with the failure-free result.
func TestNewcomerJoinsDuringARecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detections")
	}
	const n, spares, iters = 3, 1, 40
	clean := runRing(t, n, spares, 1, iters, func(int, int) bool { return false })
	want := clean[0].result
	recovering, ready := make(chan struct{}), make(chan struct{})
	var once sync.Once
	out := newcomerRun(t, n, spares, iters, func(p, restarts, it int) bool {
		switch {
		case p == 1 && restarts == 0 && it == 9:
			return true
		case restarts == 1 && it == 16:
			<-ready
			return p == 2
		}
		return false
	}, func(p int) {
		if p == 0 {
			once.Do(func() { close(recovering) })
		}
	}, func(ss []*comm.Session, start func() *comm.Session) {
		<-recovering
		if nc := start(); nc != nil {
			admitted(t, []*comm.Session{ss[0], ss[2], ss[3]}, 4)
		}
		close(ready)
	})
	for _, p := range []int{0, 3, 4} {
		if o := out[p]; o.err != nil || o.result != want {
			t.Errorf("process %d: err %v, result %#x (want %#x)", p, o.err, o.result, want)
		}
	}
	if out[3].rank != 1 || out[4].rank != 2 || !out[4].stats.TookOver {
		t.Errorf("the spare holds rank %d (want 1), the newcomer rank %d (want 2, took over %v)", out[3].rank, out[4].rank, out[4].stats.TookOver)
	}
}

// A newcomer admitted after the survivors took part in the agreement
// that ends an attempt, and before a failure that strikes before the
// recovery is planned: process 1 crashes before the first checkpoint,
// and process 2, once that agreement decided (without the newcomer),
// waits until a newcomer (process 4) is in every survivor's view, then
// crashes. The recovery finds rank 2 without a process while every
// survivor sees the newcomer: it adds it, and the spare takes rank 1 and
// the newcomer rank 2, with the failure-free result, instead of the job
// failing for want of a spare.
func TestNewcomerTakesARankLostBeforeTheRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detections")
	}
	const n, spares, iters = 3, 1, 40
	clean := runRing(t, n, spares, 1, iters, func(int, int) bool { return false })
	want := clean[0].result
	agreed, ready := make(chan struct{}), make(chan struct{})
	var crashing *comm.Session // process 2's, set before ready closes
	out := newcomerRunWith(t, n, spares, iters, func(p, restarts, it int) bool {
		return p == 1 && restarts == 0 && it == 2
	}, func(p int, j *Job) {
		if p == 2 {
			j.attemptAgreed = func() {
				close(agreed)
				<-ready
				crashSession(crashing)
			}
		}
	}, func(ss []*comm.Session, start func() *comm.Session) {
		<-agreed
		crashing = ss[2]
		if nc := start(); nc != nil {
			admitted(t, []*comm.Session{ss[0], ss[2], ss[3]}, 4)
		}
		close(ready)
	})
	for _, p := range []int{0, 3, 4} {
		if o := out[p]; o.err != nil || o.result != want {
			t.Errorf("process %d: err %v, result %#x (want %#x)", p, o.err, o.result, want)
		}
	}
	if out[3].rank != 1 || out[4].rank != 2 || !out[4].stats.TookOver {
		t.Errorf("the spare holds rank %d (want 1), the newcomer rank %d (want 2, took over %v)", out[3].rank, out[4].rank, out[4].stats.TookOver)
	}
}

// A welcome's payload decodes or is refused with errWelcome, never a
// panic, and what decodes encodes back the same way.
func FuzzWelcomePayload(f *testing.F) {
	f.Add(welcome{outcome: outcomeRecover, n0: 3, mapping: []int{0, 3, 2}, space: identitySpace(3)}.marshal())
	f.Add(welcome{outcome: outcomeDone, n0: 4, mapping: []int{0, 2}, space: space{holder: []int{0, 0, 1, 1}, own: []int{0, 2}}}.marshal())
	f.Add([]byte{3, 1})
	f.Fuzz(func(t *testing.T, p []byte) {
		w, err := unmarshalWelcome(p)
		if err != nil {
			if !errors.Is(err, errWelcome) {
				t.Fatalf("error %v is not errWelcome", err)
			}
			return
		}
		back, err := unmarshalWelcome(w.marshal())
		if err != nil || back.outcome != w.outcome || back.n0 != w.n0 || !slices.Equal(back.mapping, w.mapping) || !slices.Equal(back.space.holder, w.space.holder) || !slices.Equal(back.space.own, w.space.own) {
			t.Fatalf("%+v encodes to %+v (%v)", w, back, err)
		}
	})
}
