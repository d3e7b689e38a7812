package tcp_test

import (
	"bytes"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// placingRecorder is a handler that takes every large frame whose payload
// starts with 'P' into a buffer of its own (transport.Placer), keeping the
// first byte in Payload, and records the placed frames (whole again) in
// order with the delivered ones.
type placingRecorder struct {
	*transporttest.Recorder
	mu     sync.Mutex
	dst    []byte
	placed []wire.Frame
	failed []wire.Frame
	calls  []string // "place", "placed", "failed", in order
}

func (r *placingRecorder) Place(f wire.Frame, n int) (int, []byte) {
	if len(f.Payload) == 0 || f.Payload[0] != 'P' {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "place")
	r.dst = make([]byte, n-1)
	return 1, r.dst
}

func (r *placingRecorder) Placed(f wire.Frame, ok bool) {
	r.mu.Lock()
	f.Payload = append(slices.Clone(f.Payload), r.dst...)
	if ok {
		r.placed = append(r.placed, f)
		r.calls = append(r.calls, "placed")
	} else {
		r.failed = append(r.failed, f)
		r.calls = append(r.calls, "failed")
	}
	r.mu.Unlock()
	r.Deliver(wire.Frame{Kind: f.Kind, Src: f.Src, Dst: f.Dst, Payload: []byte("placed")})
}

// A large frame offered to a transport.Placer lands whole in the buffer it
// gives, in order with the frames around it; a frame from a sender that is
// not the authenticated peer is never offered; a frame cut off by the end
// of its connection is reported failed (Placed false) and hinted.
func TestPlacedFrames(t *testing.T) {
	srv := listen(t, config(1, nil))
	rec := &placingRecorder{Recorder: transporttest.NewRecorder()}
	srv.SetHandler(rec)

	payload := func(first byte, n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*31 + 7)
		}
		p[0] = first
		return p
	}
	big := payload('P', 3*wire.PlaceMin+11)
	plain := payload('x', 2*wire.PlaceMin)
	c := dialRaw(t, "tcp", srv.Addr())
	c.handshake(t, hello(3), secret)
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 3, Dst: 1, Payload: []byte("small")})
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 3, Dst: 1, Payload: big})
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 2, Dst: 1, Payload: big}) // forged source
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 3, Dst: 1, Payload: plain})
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 3, Dst: 1, Payload: big})
	// A last one cut off in its payload.
	cut := wire.AppendFrame(nil, wire.Frame{Kind: transporttest.KindTest, Src: 3, Dst: 1, Payload: big})
	if _, err := c.nc.Write(cut[:len(cut)/2]); err != nil {
		t.Fatal(err)
	}
	// A half-close: a close with the server's proof unread would reset the
	// connection and lose what the server had not read yet.
	if err := c.nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, transporttest.Timeout, "a hint about node 3", func(_ []wire.Frame, hs []core.PeerHint) bool {
		return len(hs) > 0
	})

	var order []string
	for _, f := range rec.Frames() {
		order = append(order, string(f.Payload[:min(len(f.Payload), 6)]))
	}
	if want := []string{"small", "placed", "x" + string(plain[1:6]), "placed", "placed"}; !slices.Equal(order, want) {
		t.Fatalf("delivered in the order %q, want %q (hints %v)", order, want, rec.Hints())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []string{"place", "placed", "place", "placed", "place", "failed"}; !slices.Equal(rec.calls, want) {
		t.Fatalf("calls %v, want %v", rec.calls, want)
	}
	for i, f := range rec.placed {
		if f.Src != 3 || !bytes.Equal(f.Payload, big) {
			t.Fatalf("placed frame %d: from %v, %d bytes, equal %v", i, f.Src, len(f.Payload), bytes.Equal(f.Payload, big))
		}
	}
	if st := srv.Stats(); st.Placed != 2 || st.Misaddressed != 1 {
		t.Fatalf("stats %+v: want 2 frames placed and 1 misaddressed", st)
	}
}
