package resil

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cohort-mp/cohort/comm"
)

// store is what this process keeps of the checkpoints: the states of
// the last epoch it knows committed, taken by width ranks, and those of
// the next epoch while it is being stored (pending), by slot (the rank
// that took the state).
type store struct {
	epoch, width int
	states       map[int][]byte
	pending      int // 0: none
	pend         map[int][]byte
}

func (s *store) reset() {
	s.epoch, s.width, s.states, s.pending, s.pend = 0, 0, map[int][]byte{}, 0, nil
}

// get returns slot x's state of epoch e, if held.
func (s *store) get(x, e int) ([]byte, bool) {
	if s.epoch == e {
		if b, ok := s.states[x]; ok {
			return b, true
		}
	}
	if s.pending == e {
		if b, ok := s.pend[x]; ok {
			return b, true
		}
	}
	return nil, false
}

func (s *store) inventory(n int) inventory {
	in := inventory{Epoch: s.epoch, Width: s.width, Pending: s.pending, committed: make([]bool, n), pending: make([]bool, n)}
	for x := range s.states {
		in.committed[x] = true
	}
	for x := range s.pend {
		in.pending[x] = true
	}
	return in
}

// ckptTag is the tag of a checkpoint's copies to buddies: the epoch,
// kept within the non-negative ints.
func ckptTag(epoch int) int { return epoch & 0x3fffffff }

// Checkpoint stores state as this rank's part of the next checkpoint
// epoch: a collective of every rank of the attempt's communicator, called
// at the same points of the program. Each rank keeps its state and sends
// a copy to each of its k buddies (Config.Buddies); once every rank has
// stored every copy it is owed, the epoch commits through an agreement
// ([comm.Comm.Agree]), so every rank that returns nil returns it for the
// same epoch, and a recovery goes back to the newest epoch any survivor
// knows committed. state is copied; the caller may reuse it. A failure
// during the call makes it return an error (the run then restarts from
// the last committed epoch): the function should return it.
//
// With Config.Dir set, each rank also writes its own state of the
// committed epoch to a file there, after the commit (see disk.go).
func (j *Job) Checkpoint(ctx context.Context, state []byte) error {
	if j.cc == nil {
		return fmt.Errorf("%w: Checkpoint outside the function of Run", ErrConfig)
	}
	e := j.st.epoch + 1
	if err := j.commit(ctx, e, state); err != nil {
		return err
	}
	j.stats.Checkpoints++
	j.stats.CheckpointBytes += int64(len(j.keep[j.cc.Rank()][1:]) * len(state))
	if j.dir != "" {
		if err := writeDiskCopy(j.dir, j.cc.Rank(), j.n, e, state); err != nil {
			return err
		}
	}
	return nil
}

// commit stores state as this rank's part of epoch e at its keepers and
// commits the epoch by an agreement (Checkpoint's two phases; also how a
// state read from disk is given back its copies).
func (j *Job) commit(ctx context.Context, e int, state []byte) error {
	c := j.cc
	r := c.Rank()
	tag := ckptTag(e)
	copies := map[int][]byte{r: slices.Clone(state)}
	sends := make([]*comm.Request, 0, j.k)
	for _, b := range j.keep[r][1:] {
		sends = append(sends, c.Isend(state, b, tag))
	}
	var err error
	for _, src := range j.keptBy[r] {
		var st comm.Status
		if st, err = c.Probe(ctx, src, tag); err != nil {
			break
		}
		buf := make([]byte, st.Count)
		if _, err = c.Recv(ctx, buf, src, tag); err != nil {
			break
		}
		copies[src] = buf
	}
	if werr := comm.WaitAll(ctx, sends...); err == nil {
		err = werr
	}
	flag := 0
	if err == nil {
		flag = 1
		j.st.pending, j.st.pend = e, copies
	}
	v, aerr := c.Agree(ctx, flag)
	switch {
	case aerr != nil:
		return errors.Join(ErrCheckpoint, aerr)
	case v != 1:
		return errors.Join(ErrCheckpoint, err)
	}
	j.st.epoch, j.st.width, j.st.states = e, j.n, j.st.pend
	j.st.pending, j.st.pend = 0, nil
	j.space = identitySpace(j.n)
	return nil
}

// settle keeps, after a recovery to epoch e taken by width ranks, the
// states this process must keep: the slots rank r restores (held) and the
// copies of the slots in keptBy (none at an idle process, r < 0).
func (s *store) settle(e, width, r int, held, keptBy []int, got map[int][]byte) {
	keep := map[int][]byte{}
	if r >= 0 && e > 0 {
		for _, x := range append(slices.Clone(held), keptBy...) {
			b, ok := s.get(x, e)
			if !ok {
				b, ok = got[x]
			}
			if !ok {
				panic(fmt.Sprintf("resil: rank %d lacks rank %d's state of epoch %d after the transfers (have %v)", r, x, e, slices.Sorted(maps.Keys(got))))
			}
			keep[x] = b
		}
	}
	s.epoch, s.width, s.states, s.pending, s.pend = e, width, keep, 0, nil
}
