package tcp

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// TestHeadEncoder checks the remembering encoder against
// wire.Frame.AppendHead over frames whose kind, ids, epoch, payload and
// extra bytes change now and then, as a peer's frames do (a new view, a
// frame of another protocol), and over field values of every varint
// width: the heads are the same bytes.
func TestHeadEncoder(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	widths := []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1 << 21, 1 << 28, 1<<32 - 1}
	pick := func() uint64 { return widths[rng.IntN(len(widths))] + uint64(rng.IntN(2)) }
	var e headEncoder
	f := wire.Frame{Kind: core.MakeKind(core.ProtoTest, 1), Src: 1, Dst: 2}
	var got []byte
	for step := range 20000 {
		if rng.IntN(8) == 0 {
			switch rng.IntN(4) {
			case 0:
				f.Kind = core.Kind(pick() & 0xffff)
			case 1:
				f.Src = core.NodeID(pick())
			case 2:
				f.Dst = core.NodeID(pick())
			default:
				f.Epoch = pick()
			}
		}
		f.Payload = make([]byte, rng.IntN(shmDirectPayload+1))
		for i := range f.Payload {
			f.Payload[i] = byte(rng.Uint32())
		}
		extra := rng.IntN(padFrom)
		if rng.IntN(4) == 0 {
			got = nil // no room: the appending path
		}
		got = e.appendHead(got[:0], &f, extra)
		if want := f.AppendHead(nil, extra); !bytes.Equal(got, want) {
			t.Fatalf("step %d: frame %v with %d bytes more: head %x, want %x", step, f, extra, got, want)
		}
	}
}
