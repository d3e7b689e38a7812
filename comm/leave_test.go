package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// leftRanks returns the ranks of a *ProcLeftError, or nil.
func leftRanks(err error) []int {
	var pl *ProcLeftError
	if errors.As(err, &pl) {
		return pl.Ranks
	}
	return nil
}

// waitGone waits until s's views have excluded every world rank listed
// (failed or left), or fails the test when ctx ends. It waits on the
// session's failWake, which every exclusion closes.
func waitGone(ctx context.Context, t *testing.T, s *Session, ranks ...int) {
	t.Helper()
	for {
		s.mu.Lock()
		all := true
		for _, r := range ranks {
			all = all && s.failed[r]
		}
		wake := s.failWake
		s.mu.Unlock()
		if all {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("rank %d never saw ranks %v gone", s.self, ranks)
		}
	}
}

// noFailures fails the test if s reported a failure.
func noFailures(t *testing.T, s *Session) {
	t.Helper()
	select {
	case f := <-s.Failures():
		t.Fatalf("rank %d reported rank %d failed (epoch %d); it left", s.self, f.Rank, f.Epoch)
	default:
	}
}

// Ranks that finish at different times leave: the survivors' views say
// they left, not that they failed, over the in-process transport and over
// TCP. Nothing reports them on Failures or Failed, an AnySource receive
// does not fail for them, and only what still needs them fails, with a
// *ProcLeftError: a receive from one once the message it sent before
// leaving is consumed, a send to one. The event stream says so too.
func TestRanksLeaveAtDifferentTimes(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			events := newEventWaiter()
			opts := []Option{}
			if tr == "mem" {
				opts = append(opts, WithEvents(events))
			}
			ss := jobOver(t, tr, 4, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			w0 := ss[0].World()
			// Rank 3 sends rank 0 a message and finishes first.
			if err := ss[3].World().Send(ctx, []byte("last words"), 0, 5); err != nil {
				t.Fatal(err)
			}
			if err := ss[3].Finalize(ctx); err != nil {
				t.Fatal(err)
			}
			for _, r := range []int{0, 1, 2} {
				waitGone(ctx, t, ss[r], 3)
			}
			// Rank 2 finishes later.
			if err := ss[2].Finalize(ctx); err != nil {
				t.Fatal(err)
			}
			for _, r := range []int{0, 1} {
				waitGone(ctx, t, ss[r], 2)
				w := ss[r].World()
				if got := w.Left(); !slices.Equal(got, []int{2, 3}) {
					t.Errorf("rank %d: Left %v, want [2 3]", r, got)
				}
				if got := w.Failed(); len(got) != 0 {
					t.Errorf("rank %d: Failed %v, want none", r, got)
				}
				noFailures(t, ss[r])
			}
			// An AnySource receive waits for rank 1, which is alive.
			anyReq := w0.Irecv(make([]byte, 8), AnySource, 9)
			if err := ss[1].World().Send(ctx, []byte("alive"), 0, 9); err != nil {
				t.Fatal(err)
			}
			if st, err := anyReq.Wait(ctx); err != nil || st.Source != 1 {
				t.Fatalf("AnySource receive: source %d, %v; want rank 1's message", st.Source, err)
			}
			// Rank 3's message is still there; then its receives fail.
			buf := make([]byte, 16)
			if st, err := w0.Recv(ctx, buf, 3, 5); err != nil || string(buf[:st.Count]) != "last words" {
				t.Fatalf("receive of rank 3's last message: %q, %v", buf[:st.Count], err)
			}
			if _, err := w0.Recv(ctx, buf, 3, 5); !slices.Equal(leftRanks(err), []int{3}) || errors.Is(err, ErrProcFailed) {
				t.Fatalf("receive from rank 3 after its last message: %v; want rank 3 left, no failure", err)
			}
			if err := w0.Send(ctx, buf, 2, 5); !slices.Equal(leftRanks(err), []int{2}) {
				t.Fatalf("send to rank 2: %v; want rank 2 left", err)
			}
			if tr == "mem" {
				events.mu.Lock()
				stream := events.buf.String()
				events.mu.Unlock()
				for _, want := range []string{`"Left":[3]`, `"Left":[2]`, `"type":"member.Leaving"`} {
					if !strings.Contains(stream, want) {
						t.Errorf("the event stream lacks %s", want)
					}
				}
				if strings.Contains(stream, `"type":"core.Failed"`) {
					t.Error("the event stream declares a rank failed; every rank that went left")
				}
			}
		})
	}
}

// A leave races a crash. Rank 2 announces its leave and dies once the
// survivors have heard it, before the view that excludes it: it left, and
// every survivor says so. Rank 3 announces its leave and dies at once:
// whether the announcement got out first is a race, but every survivor
// says the same of it, left or failed, as the view change decided. Rank 1
// dies without a word: it failed, everywhere.
func TestCrashDuringLeave(t *testing.T) {
	heard := newEventWaiter()
	ss := job(t, 5, detecting, WithEvents(heard))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := ss[2].announceLeave(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{0, 1, 3, 4} {
		// Heard it, or installed the view it caused already.
		heard.wait(ctx, t, fmt.Sprintf(`"node":%d,"type":"member.Leaving","fields":{"Node":2}`, r),
			fmt.Sprintf(`"node":%d,"type":"member.ViewInstalled",`, r)+`"fields":{"Epoch":\d+,"Members":\[[0-9,]*\],"Joined":null,"Departed":\[2\],"Left":\[2\]}`)
	}
	ss[2].kill()
	if err := ss[3].announceLeave(ctx); err != nil {
		t.Fatal(err)
	}
	ss[3].kill()
	ss[1].kill()
	type outcome struct{ left, failed, reported []int }
	var first outcome
	for i, r := range []int{0, 4} {
		waitGone(ctx, t, ss[r], 1, 2, 3)
		w := ss[r].World()
		o := outcome{left: w.Left(), failed: w.Failed()}
		// A rank is marked gone before it is reported on Failures: wait
		// for a report of each failed rank, then take any more there are.
		for !containsAll(o.reported, o.failed) {
			select {
			case f := <-ss[r].Failures():
				o.reported = append(o.reported, f.Rank)
			case <-ctx.Done():
				t.Fatalf("rank %d: failed %v, reported failed only %v", r, o.failed, o.reported)
			}
		}
	drain:
		for {
			select {
			case f := <-ss[r].Failures():
				o.reported = append(o.reported, f.Rank)
			default:
				break drain
			}
		}
		slices.Sort(o.reported)
		if !slices.Contains(o.left, 2) || !slices.Contains(o.failed, 1) || !slices.Equal(o.reported, o.failed) {
			t.Errorf("rank %d: left %v, failed %v, reported failed %v; want 2 left, 1 failed, the failed reported", r, o.left, o.failed, o.reported)
		}
		if i == 0 {
			first = o
		} else if !slices.Equal(o.left, first.left) || !slices.Equal(o.failed, first.failed) {
			t.Errorf("rank %d: left %v, failed %v; rank 0 says left %v, failed %v", r, o.left, o.failed, first.left, first.failed)
		}
	}
}

// containsAll reports whether have holds every element of want.
func containsAll(have, want []int) bool {
	for _, x := range want {
		if !slices.Contains(have, x) {
			return false
		}
	}
	return true
}

// eventWaiter is an event stream that a test waits on for a line.
type eventWaiter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	grown chan struct{} // closed and renewed at each write
}

func newEventWaiter() *eventWaiter { return &eventWaiter{grown: make(chan struct{})} }

func (e *eventWaiter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.grown)
	e.grown = make(chan struct{})
	return e.buf.Write(p)
}

// wait returns once a line written holds want, or matches the regular
// expression orMatch if given, or fails the test when ctx ends.
func (e *eventWaiter) wait(ctx context.Context, t *testing.T, want string, orMatch ...string) {
	t.Helper()
	var res []*regexp.Regexp
	for _, m := range orMatch {
		res = append(res, regexp.MustCompile(m))
	}
	for {
		e.mu.Lock()
		found, grown := strings.Contains(e.buf.String(), want), e.grown
		for _, re := range res {
			found = found || re.Match(e.buf.Bytes())
		}
		e.mu.Unlock()
		if found {
			return
		}
		select {
		case <-grown:
		case <-ctx.Done():
			t.Fatalf("no event %s", want)
		}
	}
}

// Agree with a rank that left: rank 2 finalizes while ranks 0 and 1 wait
// in an Agree that counts on it. They do not wait for it for ever: both
// return the agreed value (the AND of the flags of those that took part)
// and the same *ProcLeftError naming rank 2. A later Agree says the same;
// Shrink leaves rank 2 out without an error.
func TestAgreeWithRankThatLeft(t *testing.T) {
	ss := job(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type result struct {
		flag int
		err  error
	}
	results := make(chan result, 2)
	for _, r := range []int{0, 1} {
		go func() {
			flag, err := ss[r].World().Agree(ctx, 0b11^r)
			results <- result{flag, err}
		}()
	}
	if err := ss[2].Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got := <-results
		if got.flag != 0b10 || !slices.Equal(leftRanks(got.err), []int{2}) {
			t.Fatalf("Agree with rank 2 gone: flag %b, %v; want 10 and rank 2 left", got.flag, got.err)
		}
	}
	each(t, ss[:2], func(ctx context.Context, c *Comm) error {
		if flag, err := c.Agree(ctx, 1); flag != 1 || !slices.Equal(leftRanks(err), []int{2}) {
			return fmt.Errorf("second Agree: flag %d, %v; want 1 and rank 2 left", flag, err)
		}
		nc, err := c.Shrink(ctx)
		if err != nil {
			return err
		}
		if nc.Size() != 2 {
			return fmt.Errorf("Shrink: %d ranks, want 2", nc.Size())
		}
		return nil
	})
}

// Every rank but one leaves: a receive from any source at the last one
// fails with a *ProcLeftError rather than waiting for a message nobody can
// send.
func TestAnySourceAfterEveryOtherLeft(t *testing.T) {
	ss := job(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req := ss[0].World().Irecv(make([]byte, 8), AnySource, AnyTag)
	for _, r := range []int{1, 2} {
		if err := ss[r].Finalize(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := req.Wait(ctx); !slices.Equal(leftRanks(err), []int{1, 2}) {
		t.Fatalf("AnySource receive with every other rank gone: %v; want ranks 1 and 2 left", err)
	}
	noFailures(t, ss[0])
}
