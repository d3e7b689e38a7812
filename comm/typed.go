package comm

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"

	"github.com/cohort-mp/cohort/comm/internal/coll"
)

// Elem is the set of element types of the typed API and the collectives:
// every fixed-size integer and float type (and types defined on them). The
// elements travel as their in-memory bytes (no reflection, no copy on the
// sending side): every rank of a job must share one byte order, which every
// supported platform (little-endian) does.
type Elem = coll.Elem

// Send sends the elements of buf to rank dest, as [Comm.Send].
func Send[T Elem](ctx context.Context, c *Comm, buf []T, dest, tag int) error {
	return c.Send(ctx, coll.AsBytes(buf), dest, tag)
}

// Recv receives elements into buf, as [Comm.Recv]; Status.Count is in
// elements. A message that is not a whole number of elements fails with
// [ErrElemSize]; one longer than buf with a [*TruncateError] (in bytes).
func Recv[T Elem](ctx context.Context, c *Comm, buf []T, src, tag int) (Status, error) {
	if err := c.checkSource(src, tag); err != nil {
		return Status{}, err
	}
	src, err := c.resolveSource(ctx, src, tag)
	if err != nil {
		return Status{}, err
	}
	return c.s.recv(ctx, c.st, subP2P, coll.AsBytes(buf), src, tag, coll.SizeOf[T]())
}

// Isend starts sending the elements of buf, as [Comm.Isend].
func Isend[T Elem](c *Comm, buf []T, dest, tag int) *Request {
	return c.Isend(coll.AsBytes(buf), dest, tag)
}

// Irecv posts a receive of elements into buf, as [Comm.Irecv]; the
// request's Status.Count is in elements.
func Irecv[T Elem](c *Comm, buf []T, src, tag int) *Request {
	if err := c.checkSource(src, tag); err != nil {
		return failedRequest(c, err)
	}
	req := c.s.irecv(c.st, subP2P, coll.AsBytes(buf), false, src, tag, 0, true)
	req.elem = coll.SizeOf[T]()
	return req
}

// SendValue sends any Go value that encoding/gob can encode (structs, maps,
// slices, …). It costs an encoding and allocations: use Send or the typed
// functions for bulk data.
func SendValue(ctx context.Context, c *Comm, v any, dest, tag int) error {
	if err := c.checkDest(dest, tag); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return fmt.Errorf("%w: encoding a %T: %v", ErrBadArg, v, err)
	}
	return c.Send(ctx, b.Bytes(), dest, tag)
}

// RecvValue receives a value sent by SendValue into the value ptr points
// to (as gob.Decoder.Decode). Status.Count is the encoded size in bytes.
func RecvValue(ctx context.Context, c *Comm, ptr any, src, tag int) (Status, error) {
	if err := c.checkSource(src, tag); err != nil {
		return Status{}, err
	}
	src, err := c.resolveSource(ctx, src, tag)
	if err != nil {
		return Status{}, err
	}
	req := c.s.irecv(c.st, subP2P, nil, true, src, tag, 0, true)
	st, err := waitRecv(ctx, req)
	if err != nil {
		return st, err
	}
	if err := gob.NewDecoder(bytes.NewReader(req.bytes())).Decode(ptr); err != nil {
		return st, fmt.Errorf("comm: decoding a value from rank %d (tag %d) into %T: %w", st.Source, st.Tag, ptr, err)
	}
	return st, nil
}
