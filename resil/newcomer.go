package resil

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// Newcomers: a process that joins the running job (comm's newcomers, a
// process started again where one died) becomes a spare. Every process
// ANDs into the agreement that ends an attempt one bit per newcomer it
// has seen admitted by a view and that is not in the processes'
// communicator yet, so the result lists the newcomers every survivor
// knows. After the Shrink that follows, the survivors add those to the
// survivors' communicator ([comm.Comm.Grow]), whose welcome tells each
// newcomer what it needs to go on as the survivors do: how the attempt
// ended, the job's first number of ranks, the attempt's map and how the
// last checkpoint's slots fall to its ranks. A newcomer holds no state:
// in the recovery that follows it is an idle process, the lowest-numbered
// of which take the failed ranks, their states fetched from buddies like
// any spare's. A newcomer admitted after the agreement waits for the next
// attempt's end, or the run's, unless a recovery round finds a rank
// without a process: the survivors then agree on the newcomers in the same
// way and add them before planning the round again (recover.go), so a
// failure that strikes during a recovery finds the newcomers every
// survivor already sees.

// The attempt's outcome, as a welcome carries it.
const (
	outcomeRecover = iota // a process holding a rank failed: recover
	outcomeDone           // every rank's function returned nil
	outcomeAborted        // a function failed without a failure
)

// newcomerBits returns a bit per newcomer (bit i: process Started()+i)
// seen admitted here and not yet among the processes.
func (j *Job) newcomerBits() int {
	bits := 0
	for _, p := range j.s.Newcomers() {
		if !inComm(j.procs, p) {
			bits |= 1 << (p - j.s.Started())
		}
	}
	return bits
}

// admit adds to next, the survivors of the attempt's end, the newcomers
// of bits (agreed), telling each the attempt's outcome.
func (j *Job) admit(next *comm.Comm, bits, outcome int) (*comm.Comm, error) {
	var add []int
	for i := range comm.MaxNewcomers {
		if p := j.s.Started() + i; bits&(1<<i) != 0 && !inComm(j.procs, p) {
			add = append(add, p)
		}
	}
	if len(add) == 0 {
		return next, nil
	}
	w := welcome{outcome: outcome, n0: j.n0, mapping: j.mapping, space: j.space}
	grown, err := next.Grow(add, w.marshal())
	if err != nil {
		return nil, fmt.Errorf("resil: adding newcomers %v: %w", add, err)
	}
	return grown, nil
}

// awaitWelcome waits, at a newcomer, until the survivors add it, and
// follows the outcome of the attempt that ended: it reports done when the
// run ended (with Run's result), and otherwise takes part in the
// recovery.
func (j *Job) awaitWelcome(ctx context.Context) (done bool, err error) {
	c, payload, err := j.s.Welcome(ctx)
	if errors.Is(err, comm.ErrNotNeeded) {
		return true, nil // the run ended without this newcomer, as a spare's may
	}
	if err != nil {
		return true, fmt.Errorf("resil: waiting to be added to the job: %w", err)
	}
	w, err := unmarshalWelcome(payload)
	if err != nil {
		return true, err
	}
	if err := checkBuddies(j.buddies, w.n0); err != nil {
		return true, err
	}
	j.procs, j.n0, j.n, j.k = c, w.n0, len(w.mapping), min(j.buddies, w.n0-1)
	j.mapping, j.space = w.mapping, w.space
	switch w.outcome {
	case outcomeDone:
		return true, nil
	case outcomeAborted:
		return true, ErrAborted
	}
	ended := time.Now()
	if err := j.recover(ctx); err != nil {
		return true, err
	}
	j.stats.Restarts++
	j.stats.Recoveries = append(j.stats.Recoveries, time.Since(ended))
	return false, nil
}

// welcome is what the survivors tell a newcomer they add.
type welcome struct {
	outcome, n0 int
	mapping     []int
	space       space
}

// marshal encodes w: uvarint outcome | uvarint n0 | then the map,
// space.holder and space.own, each a uvarint length and uvarint values.
func (w welcome) marshal() []byte {
	b := binary.AppendUvarint(nil, uint64(w.outcome))
	b = binary.AppendUvarint(b, uint64(w.n0))
	for _, list := range [][]int{w.mapping, w.space.holder, w.space.own} {
		b = binary.AppendUvarint(b, uint64(len(list)))
		for _, v := range list {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b
}

// errWelcome: a welcome's payload that does not decode.
var errWelcome = errors.New("resil: malformed welcome")

func unmarshalWelcome(p []byte) (welcome, error) {
	next := func(limit uint64) (int, error) {
		v, k := binary.Uvarint(p)
		if k <= 0 || v > limit {
			return 0, errWelcome
		}
		p = p[k:]
		return int(v), nil
	}
	var w welcome
	var err error
	if w.outcome, err = next(outcomeAborted); err != nil {
		return w, err
	}
	if w.n0, err = next(1 << 20); err != nil || w.n0 < 1 {
		return w, errWelcome
	}
	for _, list := range []*[]int{&w.mapping, &w.space.holder, &w.space.own} {
		n, err := next(uint64(w.n0))
		if err != nil || n > len(p) { // a value takes a byte at least
			return w, errWelcome
		}
		*list = make([]int, n)
		for i := range *list {
			if (*list)[i], err = next(1 << 20); err != nil {
				return w, err
			}
		}
	}
	if len(p) != 0 || len(w.mapping) == 0 || len(w.space.own) != len(w.mapping) {
		return w, errWelcome
	}
	return w, nil
}
