// Package epjob runs the NAS EP benchmark over package comm, surviving the
// death of ranks: the batches of a dead rank are recomputed by the
// survivors and the verified sums are bit for bit those of a run without
// failures.
//
// # Algorithm
//
//  1. Batch k is owned by world rank k mod p. Every rank computes the
//     batches it owns and keeps each batch's results (package ep: the signed
//     and absolute sums, the ten annulus counts).
//  2. The results travel in a table of one slot per batch (the 14 values and
//     a contribution count), filled by the owner only and summed with
//     Allreduce: the other ranks contribute exact zeros, so every slot comes
//     back with its owner's bits.
//  3. The ranks agree (Comm.Agree) on whether every one of them got a complete
//     table (every slot contributed exactly once). If so, every rank adds the
//     slots in batch order: the same floating-point sums whatever the number
//     of ranks or the failures.
//  4. Otherwise some rank died: the survivors Shrink the communicator, give
//     the batches owned by dead ranks to the survivors in turn (a
//     deterministic rule over the agreed membership, so every survivor
//     computes the same owners), compute the ones now theirs and go back to 2.
//     A batch is computed again only if its owner died.
package epjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/examples/npb/internal/ep"
)

// slotLen is the number of float64 per batch in the exchanged table.
const slotLen = ep.FloatsLen + 1

// Result is one rank's outcome.
type Result struct {
	Sums       ep.Sums
	Ranks      int           // ranks at the start
	Survivors  int           // ranks in the final communicator
	Rounds     int           // Allreduce rounds (1 without failure)
	Recomputed int           // batches computed again after failures, all ranks
	MyBatches  int           // batches this rank computed
	Reporter   bool          // rank 0 of the final communicator: print the result
	Elapsed    time.Duration // from the start of Run
}

// Config is the same on every rank.
type Config struct {
	Class ep.Class
	// Crash, if set, is asked after every batch this rank computes, with
	// the rank's world rank and the number of batches it has computed; when
	// it returns true, Run returns ErrCrashed at once and the caller should
	// die without finalizing (fault injection for tests and demos).
	Crash func(worldRank, computed int) bool
}

// ErrCrashed is returned by Run when Config.Crash asked for a crash.
var ErrCrashed = errors.New("epjob: crash injected")

// Run runs this rank's part of EP on s.World().
func Run(ctx context.Context, s *comm.Session, cfg Config) (Result, error) {
	begin := time.Now()
	c := s.World()
	me := c.WorldRank(c.Rank())
	nb := cfg.Class.Batches()
	owner := make([]int, nb) // world rank owning each batch
	for k := range owner {
		owner[k] = k % c.Size()
	}
	res := Result{Ranks: c.Size()}
	done := make(map[int]ep.Sums)
	table := make([]float64, nb*slotLen)
	for {
		// Compute what is ours and not done yet.
		for k, o := range owner {
			if o != me {
				continue
			}
			if _, ok := done[k]; ok {
				continue
			}
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
			done[k] = ep.Batch(k)
			res.MyBatches++
			if cfg.Crash != nil && cfg.Crash(me, res.MyBatches) {
				return Result{}, ErrCrashed
			}
		}
		// Exchange.
		clear(table)
		for k, o := range owner {
			if o == me {
				b := done[k]
				copy(table[k*slotLen:], b.Floats())
				table[k*slotLen+ep.FloatsLen] = 1
			}
		}
		res.Rounds++
		err := comm.Allreduce(ctx, c, table, table, comm.Sum[float64]())
		if err != nil && !errors.Is(err, comm.ErrProcFailed) && !errors.Is(err, comm.ErrRevoked) {
			return Result{}, fmt.Errorf("epjob: allreduce: %w", err)
		}
		ok := err == nil && complete(table, nb)
		flag, err := c.Agree(ctx, b2i(ok))
		if err != nil {
			return Result{}, fmt.Errorf("epjob: agree: %w", err)
		}
		if flag == 1 {
			break
		}
		// Someone failed: shrink and hand the dead ranks' batches out.
		nc, err := c.Shrink(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("epjob: shrink: %w", err)
		}
		alive := make(map[int]bool, nc.Size())
		survivors := make([]int, nc.Size())
		for r := range nc.Size() {
			survivors[r] = nc.WorldRank(r)
			alive[survivors[r]] = true
		}
		next := 0
		for k, o := range owner {
			if !alive[o] {
				owner[k] = survivors[next%len(survivors)]
				next++
			}
		}
		res.Recomputed += next
		c = nc
	}
	for k := range nb {
		b, err := ep.SumsFromFloats(table[k*slotLen : k*slotLen+ep.FloatsLen])
		if err != nil {
			return Result{}, fmt.Errorf("epjob: batch %d: %w", k, err)
		}
		res.Sums.Add(&b)
	}
	res.Survivors = c.Size()
	res.Reporter = c.Rank() == 0
	res.Elapsed = time.Since(begin)
	return res, nil
}

// complete reports whether every batch of the table was contributed once.
func complete(table []float64, nb int) bool {
	for k := range nb {
		if table[k*slotLen+ep.FloatsLen] != 1 {
			return false
		}
	}
	return true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
