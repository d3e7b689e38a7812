package tcp

import (
	"encoding/binary"
	"math"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// headEncoder encodes the heads of the frames a peer is sent on the
// shared-memory direct path (writeDirectShm), as wire.Frame.AppendHead
// does, remembering the last header it encoded: between two ranks
// exchanging messages in one view every frame has the kind, source,
// destination and epoch of the one before, and its head is then the
// length prefix, the remembered bytes and the payload, without the
// header's varints (the head decoder's cache, wire.HeadCache, is the
// reading side of the same idea). It is the peer's, under its wmu.
type headEncoder struct {
	kind     core.Kind
	src, dst core.NodeID
	epoch    uint64
	n        int // the length of head; 0: nothing remembered
	head     [wire.MaxHeaderSize]byte
}

// appendHead appends to b the head of f for a frame whose payload is
// f.Payload followed by extra more bytes, as f.AppendHead(b, extra).
func (e *headEncoder) appendHead(b []byte, f *wire.Frame, extra int) []byte {
	if e.n == 0 || f.Kind != e.kind || f.Src != e.src || f.Dst != e.dst || f.Epoch != e.epoch {
		e.remember(f)
	}
	body := e.n + len(f.Payload) + extra
	if uint64(body) > math.MaxUint32 || extra < 0 {
		return f.AppendHead(b, extra) // which panics with the frame's size
	}
	if k := len(b); e.n <= 16 && cap(b)-k >= wire.LengthSize+16 {
		// The header as two word stores rather than a copy (a call):
		// the buffer, the peer's, is grown once and has the room.
		b = b[:k+wire.LengthSize+16]
		binary.BigEndian.PutUint32(b[k:], uint32(body))
		binary.LittleEndian.PutUint64(b[k+wire.LengthSize:], binary.LittleEndian.Uint64(e.head[:]))
		binary.LittleEndian.PutUint64(b[k+wire.LengthSize+8:], binary.LittleEndian.Uint64(e.head[8:]))
		b = b[:k+wire.LengthSize+e.n]
	} else {
		b = binary.BigEndian.AppendUint32(b, uint32(body))
		b = append(b, e.head[:e.n]...)
	}
	return append(b, f.Payload...)
}

// remember encodes f's header (without its payload) and keeps it.
func (e *headEncoder) remember(f *wire.Frame) {
	var hb [wire.LengthSize + wire.MaxHeaderSize]byte
	h := wire.Frame{Kind: f.Kind, Src: f.Src, Dst: f.Dst, Epoch: f.Epoch}
	enc := h.AppendHead(hb[:0], 0)
	e.n = copy(e.head[:], enc[wire.LengthSize:])
	e.kind, e.src, e.dst, e.epoch = f.Kind, f.Src, f.Dst, f.Epoch
}
