package comm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// creditJob starts n ranks with the given eager credit, in process or over
// TCP, with more options.
func creditJob(t *testing.T, tr string, n, budget int, opts ...Option) []*Session {
	t.Helper()
	return jobOver(t, tr, n, append([]Option{WithEagerCredit(budget)}, opts...)...)
}

// unexpectedCount returns how many messages wait unexpected in s.
func unexpectedCount(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queues {
		n += len(q.unexpected)
	}
	return n
}

// A sender that sends far more than its credit to a receiver that has
// posted nothing leaves the receiver holding at most the budget of eager
// data (the rest are ready-to-sends); once received, every message arrives
// in the order sent, eager and rendezvous interleaved, with its contents,
// through specific and wildcard receives; and the credit is back. In
// process and over TCP.
func TestCreditBoundsUnexpected(t *testing.T) {
	const budget = 256 << 10
	sizes := []int{0, 100, 4 << 10, 60 << 10, EagerMax, EagerMax + 1, 30 << 10, 1}
	const k = 240 // 11 MiB, 45 times the budget
	size := func(i int) int { return sizes[i%len(sizes)] }
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ss := creditJob(t, tr, 2, budget)
			each(t, ss, func(ctx context.Context, c *Comm) error {
				if c.Rank() == 0 {
					reqs := make([]*Request, k)
					for i := range k {
						reqs[i] = c.Isend(rdvPayload(i, size(i)), 1, 1)
					}
					if err := c.Send(ctx, nil, 1, 9); err != nil { // after all of them
						return err
					}
					if err := WaitAll(ctx, reqs...); err != nil {
						return err
					}
					if _, err := c.Recv(ctx, nil, 1, 10); err != nil { // everything was received
						return err
					}
					if n := c.s.stats.creditFallbacks.Load(); n == 0 {
						return fmt.Errorf("no message went through the rendezvous for want of credit")
					}
					c.s.mu.Lock()
					avail := c.s.credit[1].avail
					c.s.mu.Unlock()
					if avail <= budget*3/4 {
						return fmt.Errorf("credit toward the receiver after it received everything: %d of %d", avail, budget)
					}
					return nil
				}
				if _, err := c.Probe(ctx, 0, 9); err != nil { // everything has arrived
					return err
				}
				held := c.s.heldEager(0)
				if held > budget || held == 0 {
					return fmt.Errorf("%d bytes of eager messages held, budget %d", held, budget)
				}
				if n := unexpectedCount(c.s); n != k+1 {
					return fmt.Errorf("%d messages queued, want %d", n, k+1)
				}
				for i := range k {
					src, tag := 0, 1
					switch i % 3 {
					case 1:
						src = AnySource
					case 2:
						src, tag = AnySource, AnyTag
					}
					buf := make([]byte, EagerMax+1)
					st, err := c.Recv(ctx, buf, src, tag)
					if err != nil {
						return fmt.Errorf("message %d: %w", i, err)
					}
					if st.Count != size(i) || !bytes.Equal(buf[:st.Count], rdvPayload(i, size(i))) {
						return fmt.Errorf("message %d: got %d bytes (want %d), contents equal %v", i, st.Count, size(i), bytes.Equal(buf[:st.Count], rdvPayload(i, size(i))))
					}
				}
				if _, err := c.Recv(ctx, nil, 0, 9); err != nil {
					return err
				}
				if held := c.s.heldEager(0); held != 0 {
					return fmt.Errorf("%d bytes held after every message was received", held)
				}
				return c.Send(ctx, nil, 0, 10)
			})
		})
	}
}

// Round after round of sends far beyond the budget in total, each round
// received before the next: the credit comes back (in batches, not a frame
// per message), so no message ever goes through the rendezvous. In process
// and over TCP.
func TestCreditReturns(t *testing.T) {
	const (
		budget = DefaultEagerCredit
		rounds = 40
		per    = 8
		size   = 48 << 10 // a round is 3/8 of the budget
	)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ss := creditJob(t, tr, 2, budget)
			each(t, ss, func(ctx context.Context, c *Comm) error {
				buf := make([]byte, size)
				for r := range rounds {
					if c.Rank() == 0 {
						reqs := make([]*Request, per)
						for i := range reqs {
							reqs[i] = c.Isend(rdvPayload(r*per+i, size), 1, i)
						}
						if err := WaitAll(ctx, reqs...); err != nil {
							return err
						}
						if _, err := c.Recv(ctx, nil, 1, 99); err != nil {
							return err
						}
						continue
					}
					for i := per - 1; i >= 0; i-- {
						if _, err := c.Recv(ctx, buf, 0, i); err != nil {
							return err
						}
						if !bytes.Equal(buf, rdvPayload(r*per+i, size)) {
							return fmt.Errorf("round %d, message %d: wrong contents", r, i)
						}
					}
					if err := c.Send(ctx, nil, 0, 99); err != nil {
						return err
					}
				}
				return nil
			})
			if n := ss[0].stats.creditFallbacks.Load(); n != 0 {
				t.Errorf("%d messages went through the rendezvous for want of credit, want 0", n)
			}
			total := rounds * per * eagerCharge(size)
			frames := ss[1].stats.creditFrames.Load()
			if frames == 0 || frames > uint64(total/(budget/creditReturnDiv)) {
				t.Errorf("%d credit frames for %d bytes of messages, want 1 to %d", frames, total, total/(budget/creditReturnDiv))
			}
		})
	}
}

// A blocking Send of a small message beyond the credit waits for its
// receive: with a context already done, Send succeeds exactly as long as
// the message fits in the credit, then returns the context's error (the
// message, copied, is still delivered when the receiver asks for it).
func TestCreditBlockingSend(t *testing.T) {
	const budget = MinEagerCredit * 2
	const size = 60 << 10
	ss := job(t, 2, WithEagerCredit(budget))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	w0, w1 := ss[0].World(), ss[1].World()
	sent, want := 0, budget/eagerCharge(size)
	for sent <= want {
		buf := rdvPayload(sent, size)
		err := w0.Send(done, buf, 1, 1)
		clear(buf)
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sent++
	}
	if sent != want {
		t.Fatalf("%d sends completed eagerly, want %d (the credit)", sent, want)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), testTimeout)
	defer cancel2()
	buf := make([]byte, size)
	for i := range sent + 1 {
		if _, err := w1.Recv(ctx, buf, 0, 1); err != nil || !bytes.Equal(buf, rdvPayload(i, size)) {
			t.Fatalf("message %d: %v, contents equal %v", i, err, bytes.Equal(buf, rdvPayload(i, size)))
		}
	}
}

// A receiver that dies while its sender is out of credit toward it fails
// the sender's pending sends and later ones, naming it; a sender that dies
// while its receiver owes it credit leaves its eager messages receivable
// and fails only what can no longer come. In process and over TCP.
func TestCreditPeerFails(t *testing.T) {
	const k = 40 // 60 KiB each: 2.3 MiB, beyond the default credit
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ss := creditJob(t, tr, 4, 0, detecting)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			w := func(r int) *Comm { return ss[r].World() }
			var toDead []*Request
			for i := range k {
				toDead = append(toDead, w(0).Isend(rdvPayload(i, 60<<10), 3, 1))
				w(2).Isend(rdvPayload(i, 60<<10), 1, 1)
			}
			w(0).Isend(nil, 3, 2)
			w(2).Isend(nil, 1, 2)
			if _, err := w(3).Probe(ctx, 0, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := w(1).Probe(ctx, 2, 2); err != nil {
				t.Fatal(err)
			}
			for _, r := range []int{0, 2} {
				if ss[r].stats.creditFallbacks.Load() == 0 {
					t.Fatalf("rank %d never ran out of credit", r)
				}
			}
			eager := DefaultEagerCredit / eagerCharge(60<<10) // nothing was received: no credit came back
			ss[3].kill()
			ss[2].kill()
			for _, r := range toDead {
				if _, err := r.Wait(ctx); err != nil && !slices.Equal(failedRanks(err), []int{3}) {
					t.Fatalf("a pending send to the dead rank: %v", err)
				}
			}
			if _, err := toDead[k-1].Wait(ctx); !slices.Equal(failedRanks(err), []int{3}) {
				t.Fatalf("the last send to the dead rank: %v, want a failure naming rank 3", err)
			}
			if err := w(0).Send(ctx, []byte("more"), 3, 1); !slices.Equal(failedRanks(err), []int{3}) {
				t.Fatalf("a send after the failure: %v, want a failure naming rank 3", err)
			}
			waitFailure(t, ctx, ss[1], 2)
			buf := make([]byte, 60<<10)
			for i := range k {
				_, err := w(1).Recv(ctx, buf, 2, 1)
				if i < eager {
					if err != nil || !bytes.Equal(buf, rdvPayload(i, len(buf))) {
						t.Fatalf("eager message %d of the dead rank: %v", i, err)
					}
					continue
				}
				if !slices.Equal(failedRanks(err), []int{2}) {
					t.Fatalf("message %d of the dead rank, sent through the rendezvous: %v, want a failure naming rank 2", i, err)
				}
				break
			}
			// The survivors still talk, eagerly.
			if err := w(0).Send(ctx, []byte("on"), 1, 3); err != nil {
				t.Fatal(err)
			}
			if _, err := w(1).Recv(ctx, buf, 0, 3); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Revoking a communicator drops its queued messages and returns their
// credit: the shrunk communicator's traffic between the same ranks is
// eager again.
func TestCreditRevoke(t *testing.T) {
	const budget = MinEagerCredit * 2
	ss := job(t, 2, WithEagerCredit(budget))
	each(t, ss, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 0 {
			for i := 0; c.s.stats.creditFallbacks.Load() == 0; i++ {
				if i > budget/eagerCharge(32<<10) {
					return fmt.Errorf("%d messages sent eagerly, beyond the credit", i)
				}
				c.Isend(rdvPayload(i, 32<<10), 1, 1)
			}
			if err := c.Send(ctx, nil, 1, 2); err != nil {
				return err
			}
		} else if _, err := c.Probe(ctx, 0, 2); err != nil && !errors.Is(err, ErrRevoked) {
			// Rank 0 revokes once its Send is out: a Probe that comes
			// after the revoke fails, though the message is queued (an
			// operation on a revoked communicator does), and rank 1 goes
			// on to Shrink all the same. (Returning here left rank 0 in
			// Shrink for good, on a loaded machine.)
			return err
		}
		c.Revoke()
		s, err := c.Shrink(ctx)
		if err != nil {
			return err
		}
		if err := Barrier(ctx, s); err != nil { // the credit frame is in before the barrier's step
			return err
		}
		if c.Rank() == 0 {
			before := c.s.stats.creditFallbacks.Load()
			for i := range budget / eagerCharge(32<<10) * 3 / 4 {
				s.Isend(rdvPayload(i, 32<<10), 1, 1) // never received
			}
			if n := c.s.stats.creditFallbacks.Load() - before; n != 0 {
				return fmt.Errorf("%d sends on the new communicator went through the rendezvous", n)
			}
		}
		return nil
	})
}

// A credit frame from a peer, and a data frame of each kind (kindCData
// returns credit; the credit a clear-to-send carries: see
// FuzzRendezvousFrames), is parsed or refused with errMalformed, never a
// panic, and what parses encodes back the same way; the one-byte fields
// of parseData and appendDataHeader decode and encode as the general
// varints do.
func FuzzCreditFrame(f *testing.F) {
	f.Add(binary.AppendUvarint(nil, DefaultEagerCredit/creditReturnDiv))
	f.Add(append(appendDataHeader(nil, kindCData, dataHeader{credit: 300, ctxID: 8, tag: -2}), "data"...))
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Add([]byte{1, 2})
	f.Add([]byte{3, 0x7f, 0x7e, 9})
	f.Add([]byte{3, 0x80, 1, 5})
	f.Fuzz(func(t *testing.T, p []byte) {
		if n, err := parseCredit(p); err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("parseCredit: %v", err)
			}
		} else if again, err := parseCredit(binary.AppendUvarint(nil, n)); err != nil || again != n {
			t.Fatalf("credit %d re-encoded parses as %d, %v", n, again, err)
		}
		for _, kind := range []core.Kind{kindData, kindCData, kindVData} {
			h, data, err := parseData(p, kind)
			if vh, vdata, verr := parseDataVarints(p, kind); vh != h || !bytes.Equal(vdata, data) || (verr == nil) != (err == nil) {
				t.Fatalf("%v frame %x: parseData gives %+v with %d bytes, %v; the varints %+v with %d bytes, %v", kind, p, h, len(data), err, vh, len(vdata), verr)
			}
			if err != nil {
				if !errors.Is(err, errMalformed) {
					t.Fatalf("parseData(%v): %v", kind, err)
				}
				continue
			}
			if enc, venc := appendDataHeader(nil, kind, h), appendDataHeaderVarints(nil, kind, h); !bytes.Equal(enc, venc) {
				t.Fatalf("%v header %+v encodes as %x, the varints as %x", kind, h, enc, venc)
			}
			again := append(appendDataHeader(nil, kind, h), data...)
			if h2, d2, err := parseData(again, kind); err != nil || h2 != h || !bytes.Equal(d2, data) {
				t.Fatalf("%v frame %+v with %d bytes re-encoded parses as %+v with %d bytes, %v", kind, h, len(data), h2, len(d2), err)
			}
		}
	})
}

// Options: a budget below the minimum is refused.
func TestCreditOption(t *testing.T) {
	if _, err := Local(context.Background(), 2, WithEagerCredit(MinEagerCredit-1)); !errors.Is(err, ErrBadArg) {
		t.Fatalf("Local with a budget below the minimum: %v, want ErrBadArg", err)
	}
}
