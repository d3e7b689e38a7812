package coll

import (
	"context"
	"fmt"
)

// Segment is the shared memory of a communicator whose ranks all run on
// one host: each rank writes its contribution into its own slot and reads
// the others' in place, so a collective costs no message and no copy
// through a connection. The Transport's adapter (package comm) maps it and
// waits on it; coll lays out the rounds over it.
//
// Rounds. A collective moves its vector in pieces of at most SlotBytes,
// one round each; round k uses the inputs and output of buffer k mod 2.
// Every rank keeps a progress word: 2k+1 once its input of round k is in
// its slot, 2k+2 once it has done its part of round k. A rank publishes
// round k's input only after it has finished round k−1, and it reaches
// round k+2, which writes buffer k mod 2 again, only after every rank has
// published round k+1: by then no rank still reads round k's buffer. So
// two buffers suffice, and no rank ever waits for another to read.
type Segment interface {
	// SlotBytes is the size of an input slot and of an output area: a
	// multiple of 64 bytes, hence of every element's size.
	SlotBytes() int
	// Input is rank r's input slot of buffer b (0 or 1).
	Input(r, b int) []byte
	// Small is rank r's small input of buffer b: LineBytes bytes beside
	// its progress word, aligned for every element, which a piece of at
	// most that many bytes takes instead of the slot, so that it reaches
	// the other ranks with the word that publishes it (one line moved
	// between the cores, not two).
	Small(r, b int) []byte
	// Output is the output area of buffer b, which every rank writes its
	// share of the result into and reads the whole result from.
	Output(b int) []byte
	// Begin starts this rank's next round and returns its number k,
	// counted from 0 on each segment.
	Begin() uint64
	// Publish stores v as this rank's progress word, with bytes (the
	// caller's whole vector) beside it for round ⌊(v−1)/2⌋, and wakes the
	// ranks that sleep waiting for progress.
	Publish(v uint64, bytes int)
	// Await returns once every rank's progress word is at least v, and
	// fails (with an error naming the ranks, or ctx's) when a rank is
	// known failed, the communicator is revoked or ctx ends: it never
	// waits for ever on a dead rank.
	Await(ctx context.Context, v uint64) error
	// Bytes is the vector size rank r published for round k; read it
	// after an Await that covers r's input of round k (a rank is never
	// more than one round ahead of another, and keeps the sizes of two).
	Bytes(r int, k uint64) int
}

// SharedSplitBytes is the piece size from which an Allreduce over a
// Segment splits the reduction among the ranks: below it every rank reads
// all p inputs and reduces the whole piece itself (one wait per round);
// from it each rank reduces 1/p of the piece into the output, and every
// rank copies the whole result out after a second wait, so that each rank
// reads about twice the piece rather than p times.
const SharedSplitBytes = 8 << 10

// LineBytes is the size of a Segment's small inputs (Small).
const LineBytes = 16

// AllreduceShared is Allreduce over the communicator's Segment seg: recv =
// send₀ ⊕ … ⊕ send_{p−1}, every element combined in rank order, so the
// result is the one the flat algorithm gives, bit for bit, on every rank.
// send is never modified; send and recv may be the same slice. Ranks that
// pass different lengths all fail with ErrCount after the first round.
func AllreduceShared[T Elem](ctx context.Context, seg Segment, rank, size int, send, recv []T, op Op[T]) error {
	if !op.Valid() {
		return fmt.Errorf("%w: allreduce: zero Op", ErrOp)
	}
	if len(recv) != len(send) {
		return fmt.Errorf("%w: allreduce: len(recv) = %d, want len(send) = %d", ErrCount, len(recv), len(send))
	}
	esize := SizeOf[T]()
	total := len(send) * esize
	per := seg.SlotBytes() / esize // elements per piece
	for off := 0; off == 0 || off < len(send); off += per {
		end := min(off+per, len(send))
		if err := sharedRound(ctx, seg, rank, size, total, send[off:end], recv[off:end], op); err != nil {
			return fmt.Errorf("coll: allreduce: %w", err)
		}
	}
	return nil
}

// inputOf is rank r's input of buffer b: its small one (Small) for a
// piece of at most LineBytes bytes, else its slot.
func inputOf(seg Segment, small bool, r, b int) []byte {
	if small {
		return seg.Small(r, b)
	}
	return seg.Input(r, b)
}

// sharedRound reduces one piece (in, into out) in one round of seg.
func sharedRound[T Elem](ctx context.Context, seg Segment, rank, size, total int, in, out []T, op Op[T]) error {
	k := seg.Begin()
	b := int(k % 2)
	m := len(in) * SizeOf[T]()
	small := m <= LineBytes
	copy(inputOf(seg, small, rank, b), AsBytes(in))
	split := m >= SharedSplitBytes
	if split {
		seg.Publish(2*k+1, total)
	} else {
		seg.Publish(2*k+2, total) // nothing more to wait for from this rank
	}
	if err := seg.Await(ctx, 2*k+1); err != nil {
		return err
	}
	for r := range size {
		if got := seg.Bytes(r, k); got != total {
			return fmt.Errorf("%w: rank %d reduces %d bytes, this rank %d", ErrCount, r, got, total)
		}
	}
	input := func(r, lo, hi int) []T {
		v, _ := FromBytes[T](inputOf(seg, small, r, b)[lo:hi]) // aligned: no copy
		return v
	}
	if !split {
		acc := out
		if len(out) > 0 {
			copy(acc, input(0, 0, m))
		}
		for r := 1; r < size; r++ {
			op.left(acc, input(r, 0, m))
		}
		return nil
	}
	// This rank's chunk of the piece: whole cache lines, the last rank's
	// possibly shorter.
	esize := SizeOf[T]()
	chunk := ((m+size-1)/size + 63) &^ 63
	lo, hi := min(rank*chunk, m), min((rank+1)*chunk, m)
	if lo < hi {
		res, _ := FromBytes[T](seg.Output(b)[lo:hi])
		copy(res, input(0, lo, hi))
		for r := 1; r < size; r++ {
			op.left(res, input(r, lo, hi))
		}
	}
	seg.Publish(2*k+2, total)
	if err := seg.Await(ctx, 2*k+2); err != nil {
		return err
	}
	copy(AsBytes(out), seg.Output(b)[:len(out)*esize])
	return nil
}

// BcastShared is Bcast over the communicator's Segment seg: root's buf
// reaches every rank's buf, one round per SlotBytes (root copies a piece
// into its slot, the others copy it out). Ranks that pass different
// lengths all fail with ErrCount after the first round.
func BcastShared[T Elem](ctx context.Context, seg Segment, rank, size int, buf []T, root int) error {
	if root < 0 || root >= size {
		return fmt.Errorf("%w: bcast: root %d of %d ranks", ErrRoot, root, size)
	}
	esize := SizeOf[T]()
	total := len(buf) * esize
	per := seg.SlotBytes() / esize
	for off := 0; off == 0 || off < len(buf); off += per {
		piece := AsBytes(buf[off:min(off+per, len(buf))])
		k := seg.Begin()
		b := int(k % 2)
		small := len(piece) <= LineBytes
		if rank == root {
			copy(inputOf(seg, small, root, b), piece)
		}
		seg.Publish(2*k+2, total)
		if err := seg.Await(ctx, 2*k+1); err != nil {
			return fmt.Errorf("coll: bcast: %w", err)
		}
		for r := range size {
			if got := seg.Bytes(r, k); got != total {
				return fmt.Errorf("%w: bcast: rank %d has %d bytes, this rank %d", ErrCount, r, got, total)
			}
		}
		if rank != root {
			copy(piece, inputOf(seg, small, root, b))
		}
	}
	return nil
}

// BarrierShared returns once every rank of seg has called it: a round
// without data.
func BarrierShared(ctx context.Context, seg Segment) error {
	k := seg.Begin()
	seg.Publish(2*k+2, 0)
	if err := seg.Await(ctx, 2*k+1); err != nil {
		return fmt.Errorf("coll: barrier: %w", err)
	}
	return nil
}
