package coll

import (
	"context"
	"errors"
)

// Transport is one communicator's private collective channel: messages on it
// never match user point-to-point traffic. coll chooses the tags (see the
// package doc: tag = seq·256 + phase, where seq comes from NextSeq), so a
// Transport only has to deliver by (sender, tag).
//
// Concurrency: coll calls Send from at most one extra goroutine at a time
// while the calling goroutine is inside Recv (an exchange with two peers), and
// never issues two Sends to the same peer concurrently, so per-pair FIFO order
// is the order coll sends in.
type Transport interface {
	// Rank is this process's rank in the communicator, 0 ≤ Rank < Size.
	Rank() int
	// Size is the number of ranks of the communicator, ≥ 1.
	Size() int
	// Send delivers data to rank `to` (FIFO per pair and tag). It may return
	// before the receiver has the data. coll does not modify data until Send
	// returns and may reuse it afterwards, so a Transport that still needs the
	// bytes after returning must have copied them. Send must return once ctx
	// is done.
	Send(ctx context.Context, to, tag int, data []byte) error
	// Recv returns the next message from rank `from` with tag `tag`. The
	// returned slice belongs to coll (it may be modified and kept). Recv must
	// return once ctx is done, and must fail (pending and later calls) once a
	// member of the communicator is known to have failed.
	Recv(ctx context.Context, from, tag int) ([]byte, error)
	// NextSeq returns the next collective sequence number of this
	// communicator: the same on every rank for the same call, because every
	// rank calls collectives in the same order.
	NextSeq() uint64
}

// EagerSender is an optional interface of a Transport. EagerSend reports
// true when Send never waits for the receiver to take part — it buffers the
// message or hands it to a connection whose reader drains it whether or not
// a receive is posted — though it may wait for room in a queue. coll then
// does an exchange (both partners send and receive) by sending first and
// receiving next, on the calling goroutine; otherwise it sends from a second
// goroutine while receiving.
type EagerSender interface {
	EagerSend() bool
}

// RecvIntoer is an optional interface of a Transport that can receive into a
// buffer the caller provides, saving the allocation and the copy of Recv.
// RecvInto receives the next message from rank `from` with tag `tag` into
// buf and returns the message's length n; a message longer than buf fills
// buf and reports its full length (n > len(buf)) without an error (coll
// reports the mismatch itself). Errors and cancellation are as for Recv.
type RecvIntoer interface {
	RecvInto(ctx context.Context, from, tag int, buf []byte) (n int, err error)
}

// ExchangeIntoer is a RecvIntoer that can also run an exchange's two
// halves itself: post the receive into buf first, then send sdata, then
// wait for the receive. With the receive posted before the peer's message
// can arrive, a transport that reads large messages straight into a
// posted buffer (comm over TCP) needs no copy and no buffer of its own.
// serr and rerr are the send's and the receive's errors (a failed send
// withdraws the receive); n is as for RecvInto.
type ExchangeIntoer interface {
	ExchangeInto(ctx context.Context, to int, sdata []byte, from, tag int, buf []byte) (n int, serr, rerr error)
}

// Preposter is an ExchangeIntoer that can post a receive into buf well
// before the exchange it belongs to: an algorithm whose steps' buffers are
// known in advance posts them all at its start, so that a partner that runs
// ahead finds its step's receive posted (no copy at either end) however far
// behind this rank is. PostInto returns the posted receive, which exactly
// one of ExchangePosted (send sdata to `to` with the receive's tag, then
// wait for it) and Withdraw (cancel it, waiting for a read into buf in
// progress, so that buf is no longer written once it returns) ends. A nil
// receive and no error means none was posted: the exchange posts its own
// (ExchangeInto).
type Preposter interface {
	ExchangeIntoer
	PostInto(from, tag int, buf []byte) (posted any, err error)
	ExchangePosted(ctx context.Context, to int, sdata []byte, tag int, posted any) (n int, serr, rerr error)
	Withdraw(posted any)
}

// Paced is a Preposter that says whether its peers answer a step only
// once this rank's own send of it has reached them: Paced reports false
// where a copy of this rank may trail the one its peers hear from (comm's
// replicated ranks: a backup follows its master, and a peer answers the
// master). A collective may then post the receive of a step's answer
// into the memory the step sends from, before it sends it: the answer
// cannot come before the step has gone.
type Paced interface {
	Preposter
	Paced() bool
}

// Lender is a Preposter whose exchanges may lend their data to the
// transport beyond the exchange (comm over TCP keeps a large step's data
// by reference until the peer acknowledges it): ExchangeLent is
// ExchangePosted, except that where ExchangePosted would wait for the
// transport to give sdata back, it returns lent, which Reclaim waits
// for; lent is nil when there is nothing to wait for. The exchange's end
// then no longer waits for the peer's acknowledgement, which arrives
// behind the peer's own data. A collective reclaims everything it lent
// before it returns, error or not, and Reclaim takes it all at once (the
// call's own slice, which it does not keep): what the transport asks of
// the peers before it waits (comm's acknowledgements of their steps)
// then goes to all of them before it waits for any.
//
// Until Reclaim, sdata must not change, with one exception: the receive
// of a later step from the same peer may overwrite it (Rabenseifner's
// allgather receives its partner's blocks where the halving sent that
// partner its own). The peer sends that step only once it has delivered
// the lent data, and a copy sent again after that (a resend, a relay
// going back) reaches a peer that drops it as a duplicate, whatever it
// holds.
type Lender interface {
	Preposter
	ExchangeLent(ctx context.Context, to int, sdata []byte, tag int, posted any) (n int, lent any, serr, rerr error)
	Reclaim(lent []any)
}

// Sentinel errors for bad input. They are returned wrapped (use errors.Is)
// with the offending values in the message, before any message is sent when
// the caller's own arguments are inconsistent, or after the collective when a
// peer's message disagrees with this rank's arguments.
var (
	// ErrCount reports a buffer length or a count vector that does not fit
	// the collective: a receive buffer of the wrong length, counts that do
	// not add up, a negative count, or a peer that sent a different amount
	// than this rank's arguments imply.
	ErrCount = errors.New("coll: count mismatch")
	// ErrRoot reports a root rank outside [0, Size).
	ErrRoot = errors.New("coll: root out of range")
	// ErrOp reports a zero Op (no function).
	ErrOp = errors.New("coll: invalid reduction operator")
	// ErrSize reports a byte slice whose length is not a multiple of the
	// element size (FromBytes).
	ErrSize = errors.New("coll: byte length not a multiple of the element size")
)
