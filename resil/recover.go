package resil

import (
	"context"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/comm"
)

// recover brings the survivors (j.procs, agreed by Shrink) from a failed
// attempt to the start of the next: the new map, the epoch to go back to,
// the states moved to whoever must keep them, and the new communicators.
// Each round ends with an agreement; a failure during a round makes it
// fail at every survivor, which then shrink and begin another.
func (j *Job) recover(ctx context.Context) error {
	me := j.procs.WorldRank(j.procs.Rank())
	for {
		live := make([]int, j.procs.Size())
		for i := range live {
			live[i] = j.procs.WorldRank(i)
		}
		// Processes are numbered as Session.Processes is, and Shrink keeps
		// their order: live is sorted.
		next, err := remap(j.mapping, live)
		if err != nil {
			return err
		}
		procOf := make([]int, j.n) // rank → index among the survivors
		for r, p := range next {
			procOf[r] = procsRank(j.procs, p)
		}
		keep, keptBy := keeperTable(j.k, j.rankHosts(next))
		// The round's waits end when any survivor fails: a survivor whose
		// Allgather failed sends nothing, and one waiting for its transfer
		// must not wait for ever.
		rctx, cancel := j.watch.arm(ctx, live)
		got, e, roundErr := j.restoreRound(rctx, procOf, keep, me)
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
			j.mapping = next
			r := j.Rank()
			var mine []int
			if r >= 0 {
				mine = keptBy[r]
			}
			j.st.settle(e, r, mine, got)
			j.stats.TookOver = j.stats.TookOver || (wasSpare && r >= 0)
			return j.begin()
		}
		if j.procs, err = j.procs.Shrink(ctx); err != nil {
			return fmt.Errorf("resil: agreeing on the survivors: %w", err)
		}
		j.mapping = next
	}
}

// restoreRound gathers every survivor's inventory, plans the transfers
// and does this process's part of them; it returns the states received
// and the epoch restored.
func (j *Job) restoreRound(ctx context.Context, procOf []int, keep [][]int, me int) (map[int][]byte, int, error) {
	size := 16 + j.n
	all := make([]byte, size*j.procs.Size())
	if err := comm.Allgather(ctx, j.procs, j.st.inventory(j.n).marshal(j.n), all); err != nil {
		return nil, 0, err
	}
	invs := make([]inventory, j.procs.Size())
	for q := range invs {
		in, err := unmarshalInventory(all[q*size:(q+1)*size], j.n)
		if err != nil {
			return nil, 0, err
		}
		invs[q] = in
	}
	e := restoreEpoch(invs)
	moves, err := plan(invs, procOf, e, keep, j.keep)
	if err != nil {
		return nil, e, err
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
				panic(fmt.Sprintf("resil: process %d sends rank %d's state of epoch %d, which it does not hold", me, m.Rank, e))
			}
			sends = append(sends, j.procs.Isend(b, m.To, m.Rank))
		}
	}
	got := map[int][]byte{}
	for _, m := range moves {
		if m.To != self {
			continue
		}
		st, err := j.procs.Probe(ctx, m.From, m.Rank)
		if err != nil {
			return nil, e, err
		}
		buf := make([]byte, st.Count)
		if _, err := j.procs.Recv(ctx, buf, m.From, m.Rank); err != nil {
			return nil, e, err
		}
		got[m.Rank] = buf
	}
	return got, e, comm.WaitAll(ctx, sends...)
}
