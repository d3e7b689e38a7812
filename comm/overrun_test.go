package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// rawFrame is frame i of a flood from a sender that ignores every limit:
// kind data in context ctxID with size bytes, or (kind kindRTS) a
// ready-to-send of a message of size bytes.
func rawFrame(kind core.Kind, ctxID uint64, i, size int) wire.Frame {
	if kind == kindRTS {
		p := binary.AppendUvarint(nil, uint64(i+1))
		p = binary.AppendUvarint(p, ctxID)
		p = binary.AppendVarint(p, 1)
		p = binary.AppendUvarint(p, uint64(size))
		return wire.Frame{Kind: kindRTS, Payload: p}
	}
	p := appendDataHeader(nil, kind, dataHeader{ctxID: ctxID, tag: 1})
	return wire.Frame{Kind: kind, Payload: append(p, make([]byte, size)...)}
}

// queuedFrom returns what world rank src's messages waiting unexpected in
// s count: the bytes of its eager point-to-point messages (plus the
// overhead of each), and those of the rest (ready-to-sends at the
// overhead), counted from the queues themselves.
func queuedFrom(s *Session, src core.NodeID) (eager, loose, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queues {
		for _, m := range q.unexpected {
			if m.src != src {
				continue
			}
			n++
			switch {
			case m.rdv != 0:
				loose += eagerOverhead
			case q.sub == subP2P:
				eager += len(m.data) + eagerOverhead
			default:
				loose += len(m.data) + eagerOverhead
			}
		}
	}
	return eager, loose, n
}

// A sender that ignores its eager credit, or floods collective steps or
// ready-to-sends that no receive takes, is cut off at the first frame
// beyond the receiver's limit: the receiver reports an *OverrunError
// naming it on Failures, holds no more than the limit of its messages
// whatever it sends after, still delivers the messages it sent within
// the limit, and fails sends to it. The frames go straight into the
// receiver's data path, as its transport's reader hands them over, so the
// receiver sees every one of them, in order.
func TestOverrunCutsOffSender(t *testing.T) {
	const budget = MinEagerCredit
	const limit = MinUnexpectedLimit
	cases := []struct {
		name  string
		kind  core.Kind
		ctxID uint64
		size  int
		what  string
		bound int // bytes the receiver may hold, counted as queuedFrom does
		eager bool
	}{
		{"eager", kindData, worldID | subP2P, 4 << 10, "eager credit", budget, true},
		{"credit-returning", kindCData, worldID | subP2P, 1 << 10, "eager credit", budget, true},
		{"collective", kindData, worldID | subColl, 64 << 10, "unexpected limit", limit, false},
		{"virtual", kindVData, worldID | subVirt, 64 << 10, "unexpected limit", limit, false},
		{"rendezvous", kindRTS, worldID | subP2P, 1 << 20, "unexpected limit", limit, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := job(t, 2, WithEagerCredit(budget), WithUnexpectedLimit(limit))
			r := ss[1]
			per := eagerCharge(tc.size)
			if tc.kind == kindRTS {
				per = eagerOverhead
			}
			frames := 4 * tc.bound / per // four times the limit
			for i := range frames {
				f := rawFrame(tc.kind, tc.ctxID, i, tc.size)
				f.Src, f.Dst = 0, 1
				r.dataPath(f)
			}
			var fail Failure
			select {
			case fail = <-r.Failures():
			default:
				eager, loose, n := queuedFrom(r, 0)
				t.Fatalf("%d frames of %d bytes sent: not cut off; the receiver holds %d messages, %d eager bytes and %d others (limit %d)",
					frames, tc.size, n, eager, loose, tc.bound)
			}
			var oe *OverrunError
			if fail.Rank != 0 || !errors.As(fail.Err, &oe) || !errors.Is(fail.Err, ErrOverrun) || oe.Rank != 0 || oe.What != tc.what || oe.Limit != tc.bound {
				t.Fatalf("failure %+v (error %v), want rank 0 cut off for its %s of %d", fail, fail.Err, tc.what, tc.bound)
			}
			if oe.Sent <= oe.Limit {
				t.Errorf("%v: sent %d, not beyond the limit %d", oe, oe.Sent, oe.Limit)
			}
			eager, loose, n := queuedFrom(r, 0)
			held := loose
			if tc.eager {
				held = eager
			}
			if held > tc.bound || held < tc.bound-2*per || eager+loose != held {
				t.Errorf("the receiver holds %d eager bytes and %d others of rank 0, want at most %d (and all but a frame of it)", eager, loose, tc.bound)
			}
			if got := r.heldEager(0); got != eager {
				t.Errorf("credit accounting holds %d eager bytes, the queues %d", got, eager)
			}
			w := r.World()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if tc.eager {
				st, err := w.Recv(ctx, make([]byte, tc.size), 0, 1)
				if err != nil || st.Count != tc.size {
					t.Errorf("receiving a message sent within the credit: %+v, %v", st, err)
				}
				n--
			}
			if err := w.Send(ctx, nil, 0, 2); !errors.As(err, new(*ProcFailedError)) {
				t.Errorf("send to the cut-off rank: %v, want a *ProcFailedError", err)
			}
			// Frames after the cut-off are dropped.
			f := rawFrame(tc.kind, tc.ctxID, frames, tc.size)
			f.Src, f.Dst = 0, 1
			r.dataPath(f)
			if _, _, after := queuedFrom(r, 0); after != n {
				t.Errorf("%d messages held after a frame that followed the cut-off, want %d", after, n)
			}
		})
	}
}

// The same over TCP, with a sender writing frames into its transport as a
// program that ignores the credit would: the receiver cuts it off while
// holding at most the budget of its messages.
func TestOverrunCutsOffSenderTCP(t *testing.T) {
	const budget = MinEagerCredit
	ss := jobOver(t, "tcp", 2, WithEagerCredit(budget))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const size = 8 << 10
	frames := 8 * budget / eagerCharge(size)
	done := make(chan error, 1)
	go func() {
		for i := range frames {
			if err := ss[0].tr.Send(ctx, 1, rawFrame(kindData, worldID|subP2P, i, size)); err != nil {
				done <- fmt.Errorf("frame %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case fail := <-ss[1].Failures():
		if fail.Rank != 0 || !errors.Is(fail.Err, ErrOverrun) {
			t.Fatalf("failure %+v (%v), want rank 0 cut off", fail, fail.Err)
		}
	case <-ctx.Done():
		eager, _, n := queuedFrom(ss[1], 0)
		t.Fatalf("not cut off; the receiver holds %d messages, %d bytes (budget %d)", n, eager, budget)
	}
	if eager, loose, _ := queuedFrom(ss[1], 0); eager > budget || loose != 0 {
		t.Errorf("the receiver holds %d eager bytes and %d others of rank 0, budget %d", eager, loose, budget)
	}
	<-done // its connection was closed, or every frame was written
}
