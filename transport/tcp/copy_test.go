package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

var _ transport.Copier = (*tcp.Transport)(nil)

// TestSendCopy checks transport.Copier: frames sent with SendCopy from one
// buffer that the caller overwrites after each call arrive with the
// payload they had at the call, on the control lane and the ordinary
// one, small (copied into the transport's reused buffers) and large.
func TestSendCopy(t *testing.T) {
	forPaths(t, func(t *testing.T, path pathKind) {
		var trs []*tcp.Transport
		for id := range 2 {
			cfg := config(core.NodeID(id+1), nil)
			path.set(&cfg)
			trs = append(trs, listen(t, cfg))
		}
		a, b := trs[0], trs[1]
		a.SetPeer(b.Self(), b.Addr())
		rec := transporttest.NewRecorder()
		b.SetHandler(rec)
		const frames = 400
		payload := func(seq int) []byte {
			p := binary.AppendUvarint(nil, uint64(seq))
			return append(p, bytes.Repeat([]byte{byte(seq % 251)}, (seq*37)%6000)...)
		}
		kinds := []core.Kind{transporttest.KindTest, core.MakeKind(core.ProtoFD, 250)}
		var buf []byte
		for seq := range frames {
			buf = append(buf[:0], payload(seq)...)
			f := wire.Frame{Kind: kinds[seq%2], Payload: buf}
			if err := a.SendCopy(context.Background(), b.Self(), f); err != nil {
				t.Fatal(err)
			}
			for i := range buf {
				buf[i] = 0xee
			}
		}
		rec.Wait(t, 20*time.Second, "every frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) >= frames })
		seen := make([]bool, frames)
		for _, f := range rec.Frames() {
			seq, n := binary.Uvarint(f.Payload)
			if n <= 0 || seq >= frames || seen[seq] {
				t.Fatalf("frame %v with payload %x…", f, f.Payload[:min(len(f.Payload), 8)])
			}
			seen[seq] = true
			if f.Kind != kinds[seq%2] || !bytes.Equal(f.Payload, payload(int(seq))) {
				t.Errorf("frame %d: kind %v, %d bytes, not the payload sent", seq, f.Kind, len(f.Payload))
			}
		}
		checkPath(t, a, path)
	})
}
