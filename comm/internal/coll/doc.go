// Package coll implements cohort's collective operations — broadcast,
// reductions, gathers, scatters, all-to-all, reduce-scatter, scans and the
// barrier — over a minimal point-to-point Transport. The comm package adapts
// each communicator to Transport and exposes these functions as comm.Bcast,
// comm.Allreduce, …; applications call those, not this package.
//
// # Calling convention
//
// Every rank of the communicator calls the same collectives in the same order
// with consistent arguments (the same root, the same op, counts that agree).
// Each call takes one sequence number from Transport.NextSeq and tags its
// messages seq·256 + phase, so consecutive collectives never mix. Functions
// are generic over Elem (fixed-size numbers); data moves as AsBytes views,
// without reflection or encoding. A caller's send buffer is never modified;
// receive buffers are written only by the call that owns them.
//
// # Algorithms
//
// p is the size, n the vector length (bytes or elements), rounds are
// communication steps on the critical path. P2P-MPI's Table 1 (Genaud et al.,
// §3.3) is the baseline; every choice here matches or beats its entry in the
// regime where it is chosen — no more rounds for short messages, fewer bytes
// through the busiest rank for long ones. Thresholds are exported constants; the
// algorithm choice depends only on arguments every rank shares, so all ranks
// choose the same.
//
//	Bcast       n < BcastShortBytes (12 KiB) or p < 8: binomial tree,
//	            ⌈log₂p⌉ rounds, p−1 messages of n (Table 1: binomial).
//	            Larger: van de Geijn — binomial scatter of p chunks, then an
//	            allgather: recursive doubling (p a power of two and
//	            n < BcastLongBytes, 512 KiB; log₂p rounds) or a ring (p−1
//	            rounds); the root sends ≈ n instead of n·⌈log₂p⌉.
//	Reduce      binomial tree, ⌈log₂p⌉ rounds (Table 1: binomial or flat);
//	            n ≥ ReduceLongBytes (16 KiB, and n ≥ p' elements):
//	            Rabenseifner — reduce-scatter by recursive halving then a
//	            binomial gather to root, 2·log₂p' rounds, ≈ 2n sent per rank.
//	Allreduce   on an eager transport, 2 < p ≤ AllreduceFlatRanks (4) and
//	            n ≤ AllreduceFlatBytes (1 KiB): flat — every rank sends n to
//	            every other and combines the p vectors in rank order
//	            itself, one round, (p−1)·n sent per rank (Table 1: flat);
//	            otherwise recursive doubling, log₂p' rounds of n (Table 1: butterfly);
//	            n ≥ ReduceLongBytes: Rabenseifner — recursive halving then
//	            recursive-doubling allgather, 2·log₂p' rounds, ≈ 2n·(p'−1)/p'
//	            sent per rank; for a commutative op, p not a power of two and
//	            n ≥ (p−2−log₂p')·AllreduceRingUnitBytes (32 KiB): a ring
//	            (reduce-scatter then allgather), 2(p−1) rounds, 2n·(p−1)/p
//	            per rank and no fold-in.
//	            On a transport that can post a receive ahead of its
//	            exchange (Preposter), Rabenseifner's halving steps post all
//	            their receives at the start, and each allgather step its own
//	            once the half it fills is free, so that a partner running
//	            ahead finds them; for a commutative op on p a power of two its first step
//	            reads the input itself, which is never copied whole. A
//	            transport that lends sent data (Lender) keeps the input
//	            and the allgather steps' blocks until the call's end.
//	            p' is the largest power of two ≤ p. Other sizes fold in
//	            first: among ranks 0…2(p−p')−1 each even rank hands its vector
//	            to the odd rank above it and gets the result back at the end
//	            (+2 rounds).
//	Gather      binomial tree, ⌈log₂p⌉ rounds (Table 1: flat tree, p−1).
//	Scatter     binomial tree, ⌈log₂p⌉ rounds (Table 1: flat tree).
//	Gatherv,    linear: the root exchanges one message with every rank
//	Scatterv    (Table 1: flat tree); with uneven counts a tree would forward
//	            every block again, and the root's link carries the same bytes.
//	Allgather,  total < AllgatherLongBytes (512 KiB) and p a power of two:
//	Allgatherv  recursive doubling, log₂p rounds; total < AllgatherShortBytes
//	            (80 KiB): Bruck, ⌈log₂p⌉ rounds for any p; otherwise a ring,
//	            p−1 rounds, total·(p−1)/p per rank (Table 1: gather(v) then
//	            bcast, 2·⌈log₂p⌉ rounds and the whole vector through root).
//	Alltoall,   pairwise exchange: in step s = 1…p−1 send to rank+s, receive
//	Alltoallv   from rank−s: p−1 rounds, one message per link per round
//	            (Table 1: asynchronous rotation). Alltoall with blocks of
//	            ≤ AlltoallShortBytes (256 B) and p ≥ AlltoallMinRanks (8):
//	            Bruck, ⌈log₂p⌉ rounds of ≈ p/2 blocks.
//	ReduceScatter, ReduceScatterBlock
//	            commutative op and total ≥ ReduceScatterLongBytes (64 KiB):
//	            pairwise exchange, p−1 rounds, n·(p−1)/p sent per rank;
//	            otherwise Allreduce of the whole vector and each rank keeps its
//	            block (log₂p' rounds) (Table 1: reduce then scatterv).
//	Barrier     dissemination: round k sends to rank+2ᵏ and waits for
//	            rank−2ᵏ, ⌈log₂p⌉ rounds of empty messages (Table 1: 4-ary
//	            tree, 2·⌈log₄p⌉ rounds).
//	Scan,       recursive doubling, ⌈log₂p⌉ rounds of n.
//	Exscan
//
// # Shared memory
//
// When a communicator's ranks share a host, comm may hand AllreduceShared a
// Segment instead: each rank copies its vector into its own slot, waits for
// the others' progress words, and reduces the slots in rank order — all of
// a piece of the vector itself below SharedSplitBytes (8 KiB), else its
// 1/p of it into a shared output that every rank copies out after a second
// wait. One round (one or two waits) per SlotBytes of the vector, no
// message, and the flat algorithm's result bit for bit. BcastShared and
// BarrierShared run the same rounds, root's slot alone carrying data, or
// none. The waits are the Segment's, and fail as a Transport's receives
// do.
//
// Exchanges (both partners send and receive in the same round) send from a
// second goroutine while receiving, so no algorithm relies on the Transport
// buffering a Send (the tests run every algorithm over a rendezvous
// transport too); a Transport that says its sends never wait for the
// receiver (EagerSender) gets the cheaper send-then-receive on one
// goroutine, and one that receives into a given buffer (RecvIntoer) gets its
// messages written in place, without an allocation and a copy per message.
//
// # Operators and order
//
// A reduction computes x₀ ⊕ x₁ ⊕ … ⊕ x_{p−1} in rank order. Every algorithm
// combines only partial results of contiguous rank ranges, lower range on the
// left, so user operators (NewOp) need only be associative and element-wise;
// commutative ones are also combined in other orders. The vector is cut at
// arbitrary element boundaries (Rabenseifner, reduce-scatter), which is why an
// operator must act on each element on its own.
//
// # Errors
//
// Bad arguments are errors wrapping ErrCount, ErrRoot or ErrOp, returned
// before any message when every rank can see them (a root out of range,
// buffers that do not match the counts). Checks that only root can make
// (Gather's receive buffer, Gatherv's counts, Scatter's send buffer,
// Reduce's result buffer) still let root take part with a scratch buffer, so
// the other ranks finish instead of waiting. When a peer's message does not
// have the size this rank's arguments imply, the receiving rank keeps going
// with the message trimmed or zero-padded and returns ErrCount naming the
// peer at the end; ranks whose inconsistent arguments make them choose
// different algorithms are an erroneous program (as in MPI) that only a
// context deadline ends.
//
// A Transport error (a failed peer, a revoked communicator, ctx ending) is
// returned wrapped with %w, with the collective, the direction and the peer
// in the message, so errors.As finds comm's error types through it. The
// collectives never wait on their own: every wait is a Transport.Recv or
// Send, so once the Transport fails the pending and later receives of a
// communicator with a failed member, every rank's call returns. A rank that
// finished its part before the failure returns nil with a correct result;
// every rank that still needed a message returns an error (ULFM semantics:
// a collective does not fail uniformly, Agree is for that). When one half of
// an exchange fails, the other half is cancelled, and the call returns only
// after its sending goroutine has, so a buffer is never touched after the
// call returns.
package coll
