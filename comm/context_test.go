package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// contextState counts what a session keeps per context or communicator id
// that a peer can name: queues, buffered agreement steps and mapping
// updates, revocations of communicators not created yet.
func contextState(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.queues) + len(s.revokedID)
	for _, b := range s.agreeBuf {
		n += 1 + len(b)
	}
	for _, b := range s.vmapBuf {
		n += 1 + len(b)
	}
	return n
}

// A peer that names random context ids — of communicators the receiver
// neither has nor is about to create — in any frame that carries one
// (data, collective step, ready-to-send, agreement step, mapping update,
// revocation) is cut off at the first, and the receiver keeps nothing for
// any of them.
func TestUnknownContextsCutOff(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 47))
	cases := []struct {
		name  string
		frame func(id uint64) wire.Frame
	}{
		{"data", func(id uint64) wire.Frame { return rawFrame(kindData, id|subP2P, 0, 16) }},
		{"collective", func(id uint64) wire.Frame { return rawFrame(kindData, id|subColl, 0, 16) }},
		{"virtual", func(id uint64) wire.Frame { return rawFrame(kindVData, id|subVirt, 0, 16) }},
		{"ready-to-send", func(id uint64) wire.Frame { return rawFrame(kindRTS, id|subP2P, 0, 1<<20) }},
		{"agreement", func(id uint64) wire.Frame {
			m := agreeMsg{Comm: id, Instance: 1, Type: agreeContrib, AccB: -1}
			return wire.Frame{Kind: kindAgree, Payload: m.marshal()}
		}},
		{"mapping", func(id uint64) wire.Frame {
			m := vmapMsg{Comm: id, Counter: 1, Rank: 0, VNodes: []uint64{1}}
			return wire.Frame{Kind: kindVMap, Payload: m.marshal()}
		}},
		{"revocation", func(id uint64) wire.Frame {
			return wire.Frame{Kind: kindRevoke, Payload: binary.AppendUvarint(nil, id)}
		}},
	}
	t.Run("window", func(t *testing.T) {
		r := job(t, 1)[0]
		w, w1 := worldID, childID(worldID, 1)
		for _, c := range []struct {
			id   uint64
			want bool
		}{
			{childID(w, commWindow), true},
			{childID(w, commWindow+1), false},
			{childID(w1, commWindow), true},
			{childID(w1, commWindow+1), false},
			{childID(childID(w1, 1), 1), false}, // three levels ahead
		} {
			r.mu.Lock()
			got := r.expectedCommLocked(c.id)
			r.mu.Unlock()
			if got != c.want {
				t.Errorf("communicator %#x expected: %v, want %v", c.id, got, c.want)
			}
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := job(t, 2)
			r := ss[1]
			before := contextState(r)
			const frames = 1000
			for range frames {
				f := tc.frame(rng.Uint64() &^ subMask)
				f.Src, f.Dst = 0, 1
				r.dataPath(f)
			}
			if after := contextState(r); after != before {
				t.Errorf("after %d frames naming random contexts the receiver keeps %d entries, before %d", frames, after, before)
			}
			select {
			case fail := <-r.Failures():
				var ce *ContextError
				if fail.Rank != 0 || !errors.As(fail.Err, &ce) || !errors.Is(fail.Err, ErrOverrun) || ce.Rank != 0 {
					t.Errorf("failure %+v (%v), want rank 0 cut off for an unknown context", fail, fail.Err)
				}
			default:
				t.Errorf("rank 0 was not cut off")
			}
		})
	}
}

// A member that runs ahead by Dups, within the window and two levels deep,
// is served: its messages on communicators the receiver creates later wait
// for them and are received.
func TestRunAheadWithinWindow(t *testing.T) {
	ss := job(t, 2)
	each(t, ss, func(ctx context.Context, w *Comm) error {
		// Rank 0 creates them all and sends on each before rank 1
		// creates any.
		var comms []*Comm
		mk := func(parent *Comm) (*Comm, error) {
			c, err := parent.Dup()
			comms = append(comms, c)
			return c, err
		}
		build := func() error {
			a, err := mk(w) // world's child 1
			if err != nil {
				return err
			}
			for range commWindow - 1 { // a's children 1…7
				if _, err := mk(a); err != nil {
					return err
				}
			}
			for range commWindow - 1 { // world's children 2…8
				if _, err := mk(w); err != nil {
					return err
				}
			}
			_, err = mk(comms[len(comms)-1]) // world's child 8's child 1
			return err
		}
		if w.Rank() == 0 {
			if err := build(); err != nil {
				return err
			}
			for i, c := range comms {
				if err := c.Send(ctx, []byte{byte(i)}, 1, i); err != nil {
					return err
				}
			}
			return w.Send(ctx, nil, 1, 99)
		}
		if _, err := w.Recv(ctx, nil, 0, 99); err != nil { // everything has arrived
			return err
		}
		if err := build(); err != nil {
			return err
		}
		for i, c := range comms {
			buf := make([]byte, 1)
			if _, err := c.Recv(ctx, buf, 0, i); err != nil || buf[0] != byte(i) {
				return fmt.Errorf("communicator %d: got %v, %v", i, buf, err)
			}
		}
		if f := w.Failed(); len(f) != 0 {
			return fmt.Errorf("failed ranks %v", f)
		}
		return nil
	})
}
