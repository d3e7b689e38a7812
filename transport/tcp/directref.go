package tcp

import (
	"context"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// DirectRef remembers the peer a direct send to one destination found,
// so that a sender keeping one per destination (comm's queue to a peer)
// finds it again without the lookup in the transport's map. A peer the
// transport removed, or one whose connection is gone, never has a live
// connection again (RemovePeer; the handshake sets one only on the peer
// the transport holds): the remembered peer is used only while it has
// one, and looked up again otherwise. The zero value is ready; one
// DirectRef serves one destination of one transport, and must not be
// copied after its first use.
type DirectRef struct{ p atomic.Pointer[peer] }

// TrySendDirectRef is TrySendDirect with ref's memory of to's peer, whose
// write watches ctx as SendDirect's does. It takes the frame by pointer,
// as the writes do, and may set its Src and Dst; it keeps neither *f,
// f.Payload nor body. When ctx ends before the kernel has taken the whole
// frame, the peer's writer goroutine writes the rest, and TrySendDirectRef
// reports true with ctx's error: the frame is still delivered, as one
// queued by Send is, though its sender was told the send failed.
func (t *Transport) TrySendDirectRef(ctx context.Context, ref *DirectRef, to core.NodeID, f *wire.Frame, body []byte) (bool, error) {
	if len(f.Payload)+len(body) > t.cfg.DirectMax || to == t.self {
		return false, nil
	}
	p := ref.p.Load()
	var c *conn
	if p != nil {
		c = p.live.Load()
	}
	if c == nil {
		if p, c = t.current(to); c == nil {
			return false, nil
		}
		ref.p.Store(p)
	}
	if c.shm != nil && t.writeLineShm(p, c, f, body) {
		return true, nil
	}
	if ok, ended := t.writeDirectCtx(ctx, p, c, f, body, nil); !ended {
		return ok, nil
	}
	return true, ctx.Err()
}
