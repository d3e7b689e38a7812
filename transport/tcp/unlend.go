package tcp

import (
	"context"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// A lender that may have to give up waiting for its buffer (a blocking
// send whose context ends while the peer reads nothing) lends it with
// TryLendDirectCtx, whose write watches the context as SendDirect's does,
// and takes it back with Unlend, which has the resend log hold a copy
// instead: the log is the only holder of a lent body once its write has
// returned, and it reads the body only under its lock (since copies it
// out), so the copy is made there, once, and only by a lender that gave
// up.

// TryLendDirectCtx is TryLendDirect whose write watches ctx: when ctx
// ends before the kernel has taken the whole frame, what is left of it
// is copied for the peer's writer goroutine, which writes it before
// anything else, and ended is true. body stays lent to the log until it
// is released or the lender calls Unlend.
func (t *Transport) TryLendDirectCtx(ctx context.Context, to core.NodeID, f wire.Frame, body []byte, release func()) (ok, ended bool) {
	if len(body) < LendMin || len(f.Payload)+len(body) > t.cfg.DirectMax || to == t.self {
		return false, false
	}
	p, c := t.current(to)
	if c == nil || c.shm != nil {
		return false, false
	}
	return t.writeDirectCtx(ctx, p, c, &f, body, release)
}

// Unlend has the resend log of peer to hold a copy of body, which
// TryLendDirect or TryLendDirectCtx lent to it in a call that has
// returned, and calls the release lent with it, if the log still holds
// body: the lender has its buffer back before the peer acknowledges the
// frame, which is resent from the copy if a connection breaks. It
// reports false when the log holds body no more (released already, or
// about to be: the peer acknowledged the frame, or was removed).
func (t *Transport) Unlend(to core.NodeID, body []byte) bool {
	p, _ := t.current(to)
	if p == nil || len(body) == 0 {
		return false
	}
	return p.log.unlend(body)
}

// unlend is Unlend on the log. Every frame that holds body is given the
// copy: a buffer sent twice at once (two sends may read one buffer) is
// then free whichever send gave up.
func (l *sendLog) unlend(body []byte) bool {
	var lent lentOut
	var clone []byte
	l.mu.Lock()
	for i := l.lhead; i < len(l.refs); i++ {
		if r := l.refs[i]; l.releases[i] != nil && len(r) == len(body) && &r[0] == &body[0] {
			if clone == nil {
				clone = slices.Clone(body)
			}
			l.refs[i] = clone
			lent.take(&l.releases[i])
		}
	}
	l.mu.Unlock()
	lent.call()
	return clone != nil
}
