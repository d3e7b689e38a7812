package comm

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of package comm. They are returned wrapped with details: test with
// errors.Is (and errors.As for [*ProcFailedError] and [*TruncateError]).
var (
	// ErrRevoked: the communicator was revoked (by any member, see
	// [Comm.Revoke]); every pending and later operation on it fails, except
	// Agree, Shrink, Failed and AckFailed.
	ErrRevoked = errors.New("comm: communicator revoked")
	// ErrRank: a rank outside [0, Size) (and not AnySource where that is
	// allowed).
	ErrRank = errors.New("comm: rank out of range")
	// ErrTag: a negative tag (other than AnyTag in a receive).
	ErrTag = errors.New("comm: invalid tag")
	// ErrTruncated: the message is longer than the receive buffer. The
	// error is a [*TruncateError] with the sizes.
	ErrTruncated = errors.New("comm: message truncated")
	// ErrElemSize: a typed receive got a message whose length is not a
	// whole number of elements.
	ErrElemSize = errors.New("comm: message is not a whole number of elements")
	// ErrFinalized: the session was finalized (or its process stopped);
	// pending operations fail with it.
	ErrFinalized = errors.New("comm: session finalized")
	// ErrEvicted: the membership service excluded this process from the
	// job (it was declared failed while alive); every operation fails.
	ErrEvicted = errors.New("comm: this process was excluded from the job")
	// ErrBadArg: an invalid argument other than a rank or a tag (a nil
	// request, a negative size, an unknown option value).
	ErrBadArg = errors.New("comm: invalid argument")
	// ErrProcFailed is what every [*ProcFailedError] matches with
	// errors.Is.
	ErrProcFailed = errors.New("comm: process failed")
	// ErrProcLeft is what every [*ProcLeftError] matches with errors.Is:
	// an operation needs a rank that finished (it left the job with
	// [Session.Finalize]). It is not a failure: errors.Is(err,
	// ErrProcFailed) is false.
	ErrProcLeft = errors.New("comm: process left the job")
	// ErrOverrun is what every [*OverrunError] matches with errors.Is: a
	// process sent beyond a limit of this one and was cut off.
	ErrOverrun = errors.New("comm: process sent beyond its limit")
	// ErrAbandoned: a rank's context ended in the middle of a collective
	// that went through the communicator's shared memory (coll_shm.go),
	// leaving the others without its part; that collective and every
	// later one on the communicator fail with it, at every rank, naming
	// the rank. Continue on another communicator ([Comm.Dup] made before,
	// or [Comm.Shrink]).
	ErrAbandoned = errors.New("comm: a rank left a shared-memory collective unfinished")
)

// ProcFailedError reports that an operation involves ranks that have failed:
// the source or destination of a point-to-point operation, any unacknowledged
// failed rank for an AnySource receive, or the failed members of the
// communicator for a collective. Ranks that left the job by finalizing are
// not failed (see [ProcLeftError]). Ranks are ranks of the communicator of
// the operation, in increasing order.
type ProcFailedError struct {
	Ranks []int
}

// Error names the failed ranks.
func (e *ProcFailedError) Error() string {
	s := make([]string, len(e.Ranks))
	for i, r := range e.Ranks {
		s[i] = fmt.Sprint(r)
	}
	if len(e.Ranks) == 1 {
		return "comm: rank " + s[0] + " failed"
	}
	return "comm: ranks " + strings.Join(s, ", ") + " failed"
}

// Is makes errors.Is(err, ErrProcFailed) true.
func (e *ProcFailedError) Is(target error) bool { return target == ErrProcFailed }

// ProcLeftError reports that an operation needs ranks that left the job
// by finalizing ([Session.Finalize]) before it could complete: the
// destination of a send, the source of a receive (once the messages it
// sent before leaving are consumed), a rank that a step of a collective
// sends to or waits for, or ranks that left before contributing to an
// [Comm.Agree]. A program that meets it is waiting for a rank that has
// finished its program: a mismatch of the program's own logic, not a
// failure to recover from. Ranks are ranks of the communicator of the
// operation, in increasing order.
type ProcLeftError struct {
	Ranks []int
}

// Error names the ranks that left.
func (e *ProcLeftError) Error() string {
	s := make([]string, len(e.Ranks))
	for i, r := range e.Ranks {
		s[i] = fmt.Sprint(r)
	}
	if len(e.Ranks) == 1 {
		return "comm: rank " + s[0] + " left the job (it finalized)"
	}
	return "comm: ranks " + strings.Join(s, ", ") + " left the job (they finalized)"
}

// Is makes errors.Is(err, ErrProcLeft) true.
func (e *ProcLeftError) Is(target error) bool { return target == ErrProcLeft }

// TruncateError reports a message longer than the receive buffer (MPI's
// MPI_ERR_TRUNCATE). The receive consumed the message and filled the buffer
// with its first Have bytes.
type TruncateError struct {
	Need, Have  int // bytes of the message, bytes of the buffer
	Source, Tag int
}

// Error gives the sizes.
func (e *TruncateError) Error() string {
	return fmt.Sprintf("comm: message truncated: %d bytes from rank %d (tag %d) into a buffer of %d bytes", e.Need, e.Source, e.Tag, e.Have)
}

// Is makes errors.Is(err, ErrTruncated) true.
func (e *TruncateError) Is(target error) bool { return target == ErrTruncated }
