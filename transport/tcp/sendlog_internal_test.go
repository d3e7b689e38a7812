package tcp

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// TestSendLogRefs checks the resend log against a naive one (every
// frame's encoding in a slice) while frames are added, some copied into
// the ring, some held by reference (a relayed frame's payload) and small
// ones kept in slots, acknowledged, dropped and read back, the ring
// wrapping and the slots filling as it goes: the frames read back are the
// frames added, and a frame acknowledged no longer holds its payload.
func TestSendLogRefs(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	const stream = 7
	l := newSendLog(256 << 10)
	l.bind(stream)
	var naive [][]byte // the frames held, oldest first
	first := uint64(1)
	for step := range 5000 {
		switch r := rng.IntN(10); {
		case r < 6:
			size := rng.IntN(20 << 10)
			if r < 2 {
				size = rng.IntN(2 * smallFrameMax) // a slot's, or just over
			}
			f := wire.Frame{Kind: core.MakeKind(core.ProtoTest, 21), Src: 1, Dst: 2, Payload: make([]byte, size)}
			for i := range f.Payload {
				f.Payload[i] = byte(step + i)
			}
			enc := wire.AppendFrame(nil, f)
			var kept, same bool
			if r < 2 {
				// SendDirect's: a head and a body, small frames slotted;
				// now and then a burst that fills the slots.
				burst, held := 1, 0
				for _, b := range naive {
					held += len(b)
				}
				if rng.IntN(50) == 0 && held < l.limit/2 {
					burst = smallSlots + rng.IntN(smallSlots)
				}
				for range burst - 1 {
					if !l.add(stream, true, enc) {
						t.Fatalf("step %d: a small frame declined", step)
					}
					naive = append(naive, enc)
				}
				cut := rng.IntN(len(enc) + 1)
				kept, same = l.add(stream, true, enc[:cut], enc[cut:]), true
			} else if r < 4 {
				kept, same = l.addAt(l.next, stream, enc)
			} else {
				head := enc[:len(enc)-len(f.Payload)]
				kept, same = l.addRefAt(l.next, stream, slices.Clone(head), f.Payload)
			}
			if !same {
				t.Fatalf("step %d: the log's next number moved", step)
			}
			total := 0
			for _, b := range naive {
				total += len(b)
			}
			if fits := total == 0 || total+len(enc) <= l.limit; kept != fits {
				t.Fatalf("step %d: kept %v a frame of %d bytes beside %d, limit %d", step, kept, len(enc), total, l.limit)
			}
			if kept {
				naive = append(naive, enc)
			}
		case r < 8 && len(naive) > 0:
			k := 1 + rng.IntN(len(naive))
			l.ack(stream, first+uint64(k)-1)
			naive, first = naive[k:], first+uint64(k)
		case len(naive) > 0:
			l.dropLast(stream)
			naive = naive[:len(naive)-1]
		}
		if rng.IntN(8) == 0 { // not at every step: since moves the slots' frames to the ring
			from := first + uint64(rng.IntN(len(naive)+1))
			got, frames := l.since(stream, from)
			if want := slices.Concat(naive[from-first:]...); got != from || !bytes.Equal(frames, want) {
				t.Fatalf("step %d: since(%d) gave %d frames from %d, want those added (%d bytes, got %d)", step, from, len(naive), got, len(want), len(frames))
			}
		}
		if l.held() != len(naive) || l.first != first {
			t.Fatalf("step %d: the log holds %d frames from %d, want %d from %d", step, l.held(), l.first, len(naive), first)
		}
		refs := 0
		for _, b := range l.refs[l.lhead:] {
			refs += len(b)
		}
		if refs != l.refN || slices.ContainsFunc(l.refs[:l.lhead], func(b []byte) bool { return b != nil }) {
			t.Fatalf("step %d: %d bytes referenced, counted %d; or an acknowledged frame still referenced", step, refs, l.refN)
		}
		total := 0
		for _, b := range naive {
			total += len(b)
		}
		if got := l.n + l.refN + l.sm.bytes; got != total {
			t.Fatalf("step %d: the log counts %d bytes held, want %d", step, got, total)
		}
	}
}

// TestSendLogLent: a lent frame's release is called once, outside the
// log's lock, when the frame leaves the log (acknowledged, dropped last,
// dropped with the peer's stream or with the peer), never for a frame the
// log declined or did not keep (one to a predecessor of the peer, which
// its writer releases); a dropped log lends no more.
func TestSendLogLent(t *testing.T) {
	const stream = 7
	l := newSendLog(1 << 20)
	l.bind(stream)
	calls := map[int]int{}
	lend := func(id, size int, s uint64) (ok, kept bool) {
		return l.addLent(s, []byte{1, 2, 3}, make([]byte, size), func() {
			if !l.mu.TryLock() {
				t.Errorf("frame %d released under the log's lock", id)
			} else {
				l.mu.Unlock()
			}
			calls[id]++
		})
	}
	kept := func(id, size int, s uint64) bool { // and written
		ok, kept := lend(id, size, s)
		if kept {
			l.written()
		}
		return ok && kept
	}
	want := func(step string, ids ...int) {
		t.Helper()
		for _, id := range ids {
			if calls[id] != 1 {
				t.Fatalf("%s: frame %d released %d times, want once (releases %v)", step, id, calls[id], calls)
			}
		}
		if len(calls) != len(ids) {
			t.Fatalf("%s: releases %v, want frames %v once each", step, calls, ids)
		}
	}
	for id := range 4 {
		if !kept(id, 100<<10, stream) {
			t.Fatalf("frame %d declined", id)
		}
	}
	if !l.add(stream, true, []byte("copied")) { // frame 5 of the stream, not lent
		t.Fatal("a copied frame declined")
	}
	want("added")
	l.ack(stream, 2)
	want("acknowledged up to 2", 0, 1)
	if ok, _ := lend(9, 2<<20, stream); ok {
		t.Fatal("a lent frame beyond the log's limit was taken")
	}
	if !kept(4, 10, stream) {
		t.Fatal("frame 4 declined")
	}
	l.dropLast(stream)
	want("dropped last", 0, 1, 4)
	if _, enc := l.since(stream, 3); len(enc) != 2*(3+100<<10)+len("copied") {
		t.Fatalf("since(3) gave %d bytes", len(enc))
	}
	if ok, k := lend(5, 10, stream+1); !ok || k {
		t.Fatalf("a frame to a predecessor of the peer: taken %v, kept %v; want taken, not kept", ok, k)
	}
	want("to a predecessor", 0, 1, 4)
	l.reset(stream + 1)
	want("reset", 0, 1, 2, 3, 4)
	if !kept(6, 10, stream+1) || !kept(7, 10, stream+1) {
		t.Fatal("a lent frame declined after the reset")
	}
	l.ack(stream+1, 1)
	want("acknowledged after the reset", 0, 1, 2, 3, 4, 6)
	l.drop()
	want("dropped", 0, 1, 2, 3, 4, 6, 7)
	if ok, _ := lend(8, 10, stream+1); ok {
		t.Fatal("a dropped log took a lent frame")
	}
	l.ack(stream+1, 2)
	want("acknowledged after the drop", 0, 1, 2, 3, 4, 6, 7)

	// A peer removed (or a stream reset) while a lent frame is being
	// written: the releases wait for the end of the write, which may
	// still read that frame's body.
	for _, reset := range []bool{false, true} {
		l = newSendLog(1 << 20)
		l.bind(stream)
		clear(calls)
		if !kept(10, 10, stream) {
			t.Fatal("frame 10 declined")
		}
		if ok, k := lend(11, 10, stream); !ok || !k {
			t.Fatal("frame 11 declined")
		}
		if reset {
			l.reset(stream + 1)
		} else {
			l.drop()
		}
		want("gone during a write")
		l.written()
		want("written", 10, 11)
	}
}
