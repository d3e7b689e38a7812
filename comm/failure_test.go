package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// failedRanks returns the ranks of a *ProcFailedError, or nil.
func failedRanks(err error) []int {
	var pf *ProcFailedError
	if errors.As(err, &pf) {
		return pf.Ranks
	}
	return nil
}

// ULFM (MPI 4 fault-tolerance chapter): an operation that involves a failed
// process returns an error naming it and never hangs — a receive from a rank
// that dies in the middle of a ping-pong, a pending AnySource receive (until
// the failure is acknowledged), a pending collective step from a live rank
// of a communicator with a failed member, and a send to the dead rank.
func TestRankDiesDuringPointToPoint(t *testing.T) {
	ss := job(t, 4, detecting)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0, w3 := ss[0].World(), ss[3].World()

	// A ping-pong between 0 and 3; 3 dies after 50 rounds, while 0 waits
	// for the next pong.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 8)
		for i := 0; ; i++ {
			if _, err := w3.Recv(ctx, buf, 0, 1); err != nil {
				return // killed
			}
			if i == 50 {
				ss[3].kill()
				return
			}
			if err := w3.Send(ctx, buf, 0, 2); err != nil {
				return
			}
		}
	}()
	anyReq := w0.Irecv(make([]byte, 8), AnySource, 9)
	collReq := ss[0].irecv(w0.st, subColl, nil, true, 1, 77, 0, true)
	buf := make([]byte, 8)
	var err error
	for i := 0; err == nil; i++ {
		if err = w0.Send(ctx, buf, 3, 1); err == nil {
			_, err = w0.Recv(ctx, buf, 3, 2)
		}
		if i > 51 && err == nil {
			t.Fatalf("round %d succeeded with rank 3 dead", i)
		}
	}
	wg.Wait()
	if r := failedRanks(err); !slices.Equal(r, []int{3}) || !errors.Is(err, ErrProcFailed) {
		t.Fatalf("ping-pong with a dead rank: %v, want a ProcFailedError naming 3", err)
	}
	if _, err := anyReq.Wait(ctx); !slices.Equal(failedRanks(err), []int{3}) {
		t.Errorf("pending AnySource receive: %v, want rank 3 failed", err)
	}
	if _, err := collReq.Wait(ctx); !slices.Equal(failedRanks(err), []int{3}) {
		t.Errorf("pending collective step from live rank 1: %v, want rank 3 failed", err)
	}
	if err := w0.Send(ctx, buf, 3, 1); !slices.Equal(failedRanks(err), []int{3}) {
		t.Errorf("send to the dead rank: %v", err)
	}
	if _, err := w0.collTransport().Recv(ctx, 2, 78); !slices.Equal(failedRanks(err), []int{3}) {
		t.Errorf("later collective step: %v", err)
	}
	if got := w0.Failed(); !slices.Equal(got, []int{3}) {
		t.Errorf("Failed() = %v, want [3]", got)
	}
	select {
	case f := <-ss[0].Failures():
		if f.Rank != 3 {
			t.Errorf("Failures() gave rank %d, want 3", f.Rank)
		}
	case <-ctx.Done():
		t.Errorf("Failures() is empty after rank 3 failed")
	}

	// After AckFailed, AnySource receives work again.
	if _, err := w0.Recv(ctx, buf, AnySource, AnyTag); !slices.Equal(failedRanks(err), []int{3}) {
		t.Errorf("AnySource receive before AckFailed: %v", err)
	}
	w0.AckFailed()
	errc := make(chan error, 1)
	go func() { errc <- ss[1].World().Send(ctx, []byte("hi"), 0, 5) }()
	st, err := w0.Recv(ctx, buf, AnySource, AnyTag)
	if err != nil || st.Source != 1 || string(buf[:st.Count]) != "hi" {
		t.Errorf("AnySource receive after AckFailed: %+v %v", st, err)
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
}

// ULFM: once a member of a communicator is known failed, a collective
// started on it fails at every rank, also at a rank whose part is only
// sends: a Bcast root whose subtree is alive. (Before, the root's eager
// sends went through, Bcast after Bcast, while the other survivors failed
// theirs and waited for it in Agree: examples/ulfm's bcast case.)
func TestCollectiveSendAfterKnownFailure(t *testing.T) {
	ss := job(t, 4, detecting)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0 := ss[0].World()
	buf := []int64{7}
	if err := Bcast(ctx, w0, buf, 0); err != nil {
		t.Fatalf("Bcast before the failure: %v", err)
	}
	for r := 1; r < 4; r++ {
		if err := Bcast(ctx, ss[r].World(), []int64{0}, 0); err != nil {
			t.Fatalf("rank %d: Bcast before the failure: %v", r, err)
		}
	}
	ss[3].kill()
	select {
	case f := <-ss[0].Failures():
		if f.Rank != 3 {
			t.Fatalf("Failures() gave rank %d, want 3", f.Rank)
		}
	case <-ctx.Done():
		t.Fatal("rank 3's failure never reached rank 0")
	}
	// In a binomial broadcast over 4 ranks, root 0 sends to 1 and 2 only.
	if err := Bcast(ctx, w0, buf, 0); !slices.Equal(failedRanks(err), []int{3}) {
		t.Errorf("Bcast at the root after rank 3 failed: %v, want an error naming 3", err)
	}
	if err := w0.collTransport().Send(ctx, 1, 99, []byte{1}); !slices.Equal(failedRanks(err), []int{3}) {
		t.Errorf("collective send to live rank 1: %v, want an error naming 3", err)
	}
	if err := w0.Send(ctx, []byte{1}, 1, 5); err != nil {
		t.Errorf("point-to-point send to live rank 1: %v (only collectives fail)", err)
	}
}

// ULFM's repair sequence: after a failure, one survivor revokes the world
// (every survivor's pending operation fails with ErrRevoked or names the
// dead rank), all shrink it to the survivors (ranks renumbered), agree on a
// value, and communicate on the new communicator.
func TestRevokeShrinkAgree(t *testing.T) {
	const n, victim = 5, 2
	ss := job(t, n, detecting)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ss[victim].kill()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r, s := range ss {
		if r == victim {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				w := s.World()
				buf := make([]byte, 8)
				if r == 0 {
					// Rank 0 notices the failure and revokes.
					_, err := w.Recv(ctx, buf, victim, 0)
					if !slices.Equal(failedRanks(err), []int{victim}) {
						return fmt.Errorf("Recv from the victim: %v", err)
					}
					w.Revoke()
				} else {
					// The others wait for a message that never comes
					// (rank 4 from 3, others from 4).
					src := 4
					if r == 4 {
						src = 3
					}
					_, err := w.Recv(ctx, buf, src, 0)
					if !errors.Is(err, ErrRevoked) {
						return fmt.Errorf("Recv on the revoked world: %v", err)
					}
				}
				if err := w.Send(ctx, buf, 1, 0); !errors.Is(err, ErrRevoked) {
					return fmt.Errorf("Send on the revoked world: %v", err)
				}
				nw, err := w.Shrink(ctx)
				if err != nil {
					return fmt.Errorf("Shrink: %v", err)
				}
				wantRank := r
				if r > victim {
					wantRank--
				}
				if nw.Size() != n-1 || nw.Rank() != wantRank {
					return fmt.Errorf("shrunk to rank %d of %d, want %d of %d", nw.Rank(), nw.Size(), wantRank, n-1)
				}
				flag := ^0 &^ (1 << nw.Rank())
				got, err := nw.Agree(ctx, flag)
				if err != nil {
					return fmt.Errorf("Agree: %v", err)
				}
				if want := ^0 &^ 0b1111; got != want {
					return fmt.Errorf("Agree = %b, want %b", got, want)
				}
				// A ring on the new communicator.
				next, prev := (nw.Rank()+1)%nw.Size(), (nw.Rank()+nw.Size()-1)%nw.Size()
				if err := Send(ctx, nw, []int64{int64(nw.Rank())}, next, 3); err != nil {
					return err
				}
				v := make([]int64, 1)
				if _, err := Recv(ctx, nw, v, prev, 3); err != nil || v[0] != int64(prev) {
					return fmt.Errorf("ring: %v %v", err, v)
				}
				if f := nw.Failed(); len(f) != 0 {
					return fmt.Errorf("the shrunk communicator has failed ranks %v", f)
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// The coordinator of an agreement (the lowest live rank) dies after the
// others joined it: they finish with the next coordinator and agree on the
// failed set too.
func TestAgreeCoordinatorDies(t *testing.T) {
	const n = 4
	ss := job(t, n, detecting)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ins := make([]*agreeInst, n)
	for r := 1; r < n; r++ {
		in, err := ss[r].World().startAgree(int64(0xff &^ (1 << r)))
		if err != nil {
			t.Fatal(err)
		}
		ins[r] = in
	}
	ss[0].kill()
	var wg sync.WaitGroup
	for r := 1; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ins[r].done:
			case <-ctx.Done():
				t.Errorf("rank %d: no decision", r)
				return
			}
			ss[r].mu.Lock()
			v, err := ins[r].dec, ins[r].err
			ss[r].mu.Unlock()
			if err != nil || v.Flag != 0xff&^0b1110 || !slices.Equal(v.Failed, []int{0}) {
				t.Errorf("rank %d decided %+v, %v; want flag %b failed [0]", r, v, err, 0xff&^0b1110)
			}
		}()
	}
	wg.Wait()
}

// Bad input on the failure API: Shrink and Agree on a finalized session.
func TestFinalizedSession(t *testing.T) {
	ss := job(t, 2)
	if err := ss[1].Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ss[1].Finalize(context.Background()); err != nil {
		t.Errorf("second Finalize: %v", err)
	}
	w := ss[1].World()
	ctx := context.Background()
	if err := w.Send(ctx, nil, 0, 0); !errors.Is(err, ErrFinalized) {
		t.Errorf("Send after Finalize: %v", err)
	}
	if _, err := w.Recv(ctx, nil, 0, 0); !errors.Is(err, ErrFinalized) {
		t.Errorf("Recv after Finalize: %v", err)
	}
	if _, err := w.Agree(ctx, 1); !errors.Is(err, ErrFinalized) {
		t.Errorf("Agree after Finalize: %v", err)
	}
	if _, err := w.Shrink(ctx); !errors.Is(err, ErrFinalized) {
		t.Errorf("Shrink after Finalize: %v", err)
	}
}

// WaitAll does not hang on a request of a live rank that will never be
// matched once another of its requests failed with the death of a rank:
// rank 0 waits for a message from rank 1 (alive, but it will never send:
// it left its loop a step earlier, as in examples/ulfm's all-pairs
// exchange) and one from rank 2, which dies. Before, WaitAll waited for the
// requests in order and hung on rank 1's until its deadline.
func TestWaitAllReturnsOnFailure(t *testing.T) {
	ss := job(t, 3, detecting)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0 := ss[0].World()
	r1 := Irecv(w0, make([]byte, 8), 1, 3) // never sent
	r2 := Irecv(w0, make([]byte, 8), 2, 3)
	done := make(chan error, 1)
	go func() { done <- WaitAll(ctx, r1, r2) }()
	ss[2].kill()
	select {
	case err := <-done:
		if !slices.Equal(failedRanks(err), []int{2}) {
			t.Fatalf("WaitAll = %v, want an error naming rank 2", err)
		}
	case <-ctx.Done():
		t.Fatal("WaitAll hung on the live rank's request after rank 2 died")
	}
	if _, ok, _ := r1.Test(); ok {
		t.Error("the live rank's receive completed; it should still be pending")
	}
	if !r1.Cancel() {
		t.Error("the pending receive could not be cancelled")
	}
}

// A rank that finalizes once its part of a collective is done is not
// counted against that collective where it still runs: rank 2 gets rank
// 0's Bcast and finalizes; rank 1 enters the same Bcast only once the
// view that says rank 2 left is installed there, and still gets the value
// (rank 0 sent it to 1 directly). A collective that needs rank 2 then
// fails at the step that needs it, saying that rank 2 left.
func TestFinalizedRankSparesRunningCollective(t *testing.T) {
	ss := job(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	errc := make(chan error, 2)
	for _, r := range []int{0, 2} {
		go func() {
			v := []int64{0}
			if r == 0 {
				v[0] = 42
			}
			err := Bcast(ctx, ss[r].World(), v, 0)
			if err == nil && v[0] != 42 {
				err = fmt.Errorf("rank %d got %d, want 42", r, v[0])
			}
			if err == nil && r == 2 {
				err = ss[2].Finalize(ctx)
			}
			errc <- err
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	waitGone(ctx, t, ss[1], 2)
	v := []int64{0}
	if err := Bcast(ctx, ss[1].World(), v, 0); err != nil || v[0] != 42 {
		t.Fatalf("rank 1's Bcast after rank 2 finalized: %v, value %d; want 42", err, v[0])
	}
	// A Reduce to rank 2 cannot complete.
	if err := Reduce(ctx, ss[1].World(), []int64{1}, []int64{0}, Sum[int64](), 2); !slices.Equal(leftRanks(err), []int{2}) {
		t.Fatalf("rank 1's Reduce to the finalized rank 2: %v, want rank 2 left", err)
	}
}
