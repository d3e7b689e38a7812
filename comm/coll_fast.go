package comm

import (
	"context"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/comm/internal/coll"
)

// The optional interfaces of coll.Transport that let the collectives skip
// a goroutine and a copy per step.
var (
	_ coll.EagerSender    = collTransport{}
	_ coll.RecvIntoer     = collTransport{}
	_ coll.ExchangeIntoer = collTransport{}
)

// EagerSend is true: a send completes once the transport has the message
// (written to the connection, or queued), and the peer's reader takes
// messages whether or not a receive is posted, so an exchange can send first
// and receive next on one goroutine.
func (t collTransport) EagerSend() bool { return true }

// RecvInto receives the next collective message from rank from with tag tag
// straight into buf (a message that arrives after the receive is posted is
// copied once, from the connection's buffer into buf; one that arrived
// before, from comm's queue). A longer message fills buf and reports its
// full length without an error, as coll expects.
func (t collTransport) RecvInto(ctx context.Context, from, tag int, buf []byte) (int, error) {
	if from < 0 || from >= t.c.Size() {
		return 0, fmt.Errorf("%w: collective step from rank %d of %d", ErrRank, from, t.c.Size())
	}
	st, err := t.c.s.recv(ctx, t.c.st, subColl, buf, from, tag, 0)
	return intoCount(st, err)
}

// intoCount turns a receive's outcome into RecvInto's: a truncated message
// reports its full length without an error.
func intoCount(st Status, err error) (int, error) {
	if err == nil {
		return st.Count, nil
	}
	// Declared here: its address escapes, and the common path must not
	// allocate it.
	var te *TruncateError
	if errors.As(err, &te) {
		return te.Need, nil
	}
	return 0, err
}

// ExchangeInto posts the receive into buf, then sends sdata, then waits
// for the receive: a large step from the peer finds its receive posted and
// is read from the socket straight into buf (place.go), with no copy and
// no buffer of comm's own.
func (t collTransport) ExchangeInto(ctx context.Context, to int, sdata []byte, from, tag int, buf []byte) (int, error, error) {
	if to < 0 || to >= t.c.Size() || from < 0 || from >= t.c.Size() {
		return 0, fmt.Errorf("%w: collective step to rank %d and from rank %d of %d", ErrRank, to, from, t.c.Size()), nil
	}
	s, c := t.c.s, t.c.st
	req := s.irecvReq(pooledRequest(s, c), c, subColl, buf, false, from, tag, 0, true)
	if serr := s.send(ctx, c, subColl, to, tag, sdata); serr != nil {
		req.Cancel() // or it completed: its outcome no longer matters
		req.release()
		return 0, serr, nil
	}
	n, err := intoCount(req.awaitRecv(ctx))
	return n, nil, err
}
