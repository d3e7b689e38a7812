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
	_ coll.EagerSender = collTransport{}
	_ coll.RecvIntoer  = collTransport{}
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
