package resil

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/comm"
)

// recover brings the survivors (j.procs, agreed by Shrink) from a failed
// attempt to the start of the next: the new map, the epoch to go back to,
// the states moved to whoever must keep them, and the new communicators.
// Each round ends with an agreement; a failure during a round makes it
// fail at every survivor, which then shrink and begin another. Each round
// starts again from the failed attempt's map, so that what a failed round
// planned never counts.
func (j *Job) recover(ctx context.Context) error {
	me := j.procs.WorldRank(j.procs.Rank())
	attempt := j.mapping
	for {
		live := make([]int, j.procs.Size())
		for i := range live {
			live[i] = j.procs.WorldRank(i)
		}
		// Shrink keeps the processes' order, but a Grow appends
		// newcomers after processes of higher numbers that joined before.
		slices.Sort(live)
		next, orphans := assign(attempt, live)
		if orphans != nil {
			// A newcomer admitted after the attempt's end (or during a
			// failed round) is a spare every survivor may already see:
			// it takes the orphans rather than the job failing.
			added, err := j.admitDuringRecovery(ctx)
			if err != nil {
				return err
			}
			if added {
				continue
			}
		}
		newRank := identity(len(attempt))
		if orphans != nil {
			if !j.shrink {
				return &NoSpareError{Ranks: orphans}
			}
			next, newRank = dropOrphans(next)
		}
		procOf := make([]int, len(next)) // rank → index among the survivors
		for r, p := range next {
			procOf[r] = procsRank(j.procs, p)
		}
		// The round's waits end when any survivor fails: a survivor whose
		// Allgather failed sends nothing, and one waiting for its transfer
		// must not wait for ever.
		rctx, cancel := j.watch.arm(ctx, live)
		res, roundErr := j.restoreRound(rctx, attempt, next, newRank, procOf, me)
		cancel()
		// Flag bits, ANDed by the agreement: 1 this round's transfers
		// succeeded here, 2 no rank's state was found lost here.
		var lost *StateLostError
		flag := 3
		switch {
		case errors.As(roundErr, &lost):
			flag = 1
		case roundErr != nil:
			flag = 2
		}
		v, err := j.procs.Agree(ctx, flag)
		if err != nil {
			return fmt.Errorf("resil: agreeing on the recovery: %w", err)
		}
		if v&2 == 0 {
			if lost != nil {
				return lost // every survivor that saw the inventories found the same
			}
			return fmt.Errorf("%w (found by another survivor)", ErrStateLost)
		}
		if v == 3 {
			wasSpare := j.Rank() < 0
			j.mapping, j.n = next, len(next)
			r := j.Rank()
			var held, mine []int
			if r >= 0 {
				mine = res.keptBy[r]
				for x, h := range res.space.holder {
					if h == r {
						held = append(held, x)
					}
				}
			}
			j.st.settle(res.epoch, res.width, r, held, mine, res.got)
			j.space = res.space
			j.stats.TookOver = j.stats.TookOver || (wasSpare && r >= 0)
			j.stats.Shrunk = j.stats.Shrunk || len(orphans) > 0
			return j.begin()
		}
		if j.procs, err = j.procs.Shrink(ctx); err != nil {
			return fmt.Errorf("resil: agreeing on the survivors: %w", err)
		}
	}
}

// restoration is what a successful recovery round settles at a process:
// the epoch gone back to and how many ranks took it, how its slots fall
// to the new ranks, the slots each new rank keeps copies of, and the
// states this process received.
type restoration struct {
	epoch, width int
	space        space
	keptBy       [][]int
	got          map[int][]byte
}

// restoreRound gathers every survivor's inventory, plans the transfers
// from the failed attempt's map to next (newRank: each rank's number in
// next, -1 if dropped; procOf: each new rank's index among the survivors)
// and does this process's part of them.
func (j *Job) restoreRound(ctx context.Context, attempt, next, newRank, procOf []int, me int) (restoration, error) {
	var res restoration
	size := inventorySize(j.n0)
	all := make([]byte, size*j.procs.Size())
	if err := comm.Allgather(ctx, j.procs, j.st.inventory(j.n0).marshal(j.n0), all); err != nil {
		return res, err
	}
	invs := make([]inventory, j.procs.Size())
	for q := range invs {
		in, err := unmarshalInventory(all[q*size:(q+1)*size], j.n0)
		if err != nil {
			return res, err
		}
		invs[q] = in
	}
	e, width := restoreEpoch(invs)
	// An epoch taken by the attempt's ranks has slot r at rank r; one
	// taken by more (before a shrink) falls to them as j.space says, the
	// same at every survivor: each then holds that epoch committed, none
	// having learned of a commit since.
	from := identitySpace(len(attempt))
	if e > 0 && width != len(attempt) {
		if len(j.space.holder) != width {
			panic(fmt.Sprintf("resil: epoch %d was taken by %d ranks, and this process maps %d slots", e, width, len(j.space.holder)))
		}
		from = j.space
	}
	res.epoch, res.width = e, width
	res.space = space{holder: adopt(from.holder, newRank), own: make([]int, len(next))}
	for r, s := range from.own {
		if newRank[r] >= 0 {
			res.space.own[newRank[r]] = s
		}
	}
	if e == 0 {
		res.width, res.space = 0, identitySpace(len(next))
	}
	keep, keptBy := slotKeepers(j.k, j.rankHosts(next), res.space.holder)
	oldKeep, _ := slotKeepers(j.k, j.rankHosts(attempt), from.holder)
	res.keptBy = keptBy
	moves, err := plan(invs, procOf, e, keep, oldKeep)
	if err != nil {
		return res, err
	}
	if j.duringRecovery != nil {
		j.duringRecovery()
	}
	self := j.procs.Rank()
	var sends []*comm.Request
	for _, m := range moves {
		if m.From == self {
			b, ok := j.st.get(m.Rank, e)
			if !ok {
				panic(fmt.Sprintf("resil: process %d sends slot %d's state of epoch %d, which it does not hold", me, m.Rank, e))
			}
			sends = append(sends, j.procs.Isend(b, m.To, m.Rank))
		}
	}
	res.got = map[int][]byte{}
	for _, m := range moves {
		if m.To != self {
			continue
		}
		st, err := j.procs.Probe(ctx, m.From, m.Rank)
		if err != nil {
			return res, err
		}
		buf := make([]byte, st.Count)
		if _, err := j.procs.Recv(ctx, buf, m.From, m.Rank); err != nil {
			return res, err
		}
		res.got[m.Rank] = buf
	}
	return res, comm.WaitAll(ctx, sends...)
}

// admitDuringRecovery, called by every survivor of a recovery round that
// leaves ranks without a process, agrees on the newcomers every survivor
// has seen admitted and adds them to the survivors, as an attempt's end
// does: they join the next round as idle processes. It reports whether
// the round must be planned again: a newcomer was added, or a survivor
// failed meanwhile.
func (j *Job) admitDuringRecovery(ctx context.Context) (bool, error) {
	v, err := j.procs.Agree(ctx, j.newcomerBits())
	if err != nil {
		return false, fmt.Errorf("resil: agreeing on the newcomers: %w", err)
	}
	next, err := j.procs.Shrink(ctx)
	if err != nil {
		return false, fmt.Errorf("resil: agreeing on the survivors: %w", err)
	}
	grown, err := j.admit(next, v, outcomeRecover)
	if err != nil {
		return false, err
	}
	again := grown.Size() != next.Size() || next.Size() != j.procs.Size()
	j.procs = grown
	return again, nil
}
