package tcp_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// SendDirect and Send mixed by one sender keep its order, whatever path
// each frame takes (direct when the connection is idle, queued otherwise),
// with bodies of every size around MaxDirect; the body is not kept.
func TestSendDirectKeepsOrder(t *testing.T) {
	a := listen(t, config(1, nil))
	b := listen(t, config(2, nil))
	rb := transporttest.NewRecorder()
	b.SetHandler(rb)
	a.SetPeer(2, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
	defer cancel()
	rng := rand.New(rand.NewPCG(*seed, 2))
	const n = 2000
	for i := range uint64(n) {
		p := transporttest.Payload(i, 0)
		var err error
		if rng.IntN(3) == 0 {
			err = a.Send(ctx, 2, wire.Frame{Kind: transporttest.KindTest, Payload: p})
		} else {
			// The header part in the frame's payload, the rest as body.
			pad := 0
			if rng.IntN(10) == 0 {
				pad = tcp.MaxDirect - 64 + rng.IntN(128) // both sides of the limit
			}
			full := transporttest.Payload(i, pad)
			body := append([]byte(nil), full[len(p)/2:]...)
			err = a.SendDirect(ctx, 2, wire.Frame{Kind: transporttest.KindTest, Payload: append([]byte(nil), full[:len(p)/2]...)}, body)
			clear(body) // the transport must not keep it
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rb.Wait(t, transporttest.Timeout, "every frame", gotFrames(n))
	for i, f := range rb.Frames() {
		seq, ok := transporttest.Seq(f.Payload)
		if !ok || seq != uint64(i) || f.Src != 1 || f.Dst != 2 {
			t.Fatalf("frame %d: seq %d (valid %v), %v→%v", i, seq, ok, f.Src, f.Dst)
		}
	}
	if st := a.Stats(); st.Direct == 0 || st.Direct == st.FramesOut {
		t.Errorf("stats %+v: want some frames written directly and some queued", st)
	}
}

// SendDirect to a node without a connection queues the frame (and fails
// like Send for an unknown node or itself).
func TestSendDirectFallsBack(t *testing.T) {
	a := listen(t, config(1, nil))
	ctx := context.Background()
	if err := a.SendDirect(ctx, 1, wire.Frame{Kind: transporttest.KindTest}, []byte{1}); err == nil {
		t.Error("SendDirect to itself succeeded")
	}
	if err := a.SendDirect(ctx, 9, wire.Frame{Kind: transporttest.KindTest}, []byte{1}); err == nil {
		t.Error("SendDirect to an unknown node succeeded")
	}
}
