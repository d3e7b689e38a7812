package chaos

import (
	"errors"
	"testing"
)

// toy: rank 0 asks every other rank for a number and finishes with their
// sum; a rank that is told to "fail" reports an error.
type toy struct {
	rank, ranks int
	got, sum    int
	done        bool
	err         error
	dead        map[int]bool
}

func (t *toy) Start() []Envelope[int] {
	if t.rank != 0 {
		return nil
	}
	var outs []Envelope[int]
	for r := 1; r < t.ranks; r++ {
		outs = append(outs, Envelope[int]{To: r, Msg: 0})
	}
	return outs
}
func (t *toy) Work() ([]Envelope[int], bool) { return nil, false }
func (t *toy) Receive(from int, m int) []Envelope[int] {
	if m == -1 {
		t.err = errors.New("told to fail")
		return nil
	}
	if t.rank != 0 {
		return []Envelope[int]{{To: 0, Msg: t.rank}}
	}
	t.got++
	t.sum += m
	t.done = t.got == t.ranks-1-len(t.dead)
	return nil
}
func (t *toy) Failed(r int) []Envelope[int] {
	if t.dead == nil {
		t.dead = map[int]bool{}
	}
	t.dead[r] = true
	return nil
}
func (t *toy) Result() (uint64, bool) { return uint64(t.sum), t.done }
func (t *toy) Err() error             { return t.err }

func toys(n int) []Node[int] {
	nodes := make([]Node[int], n)
	for r := range nodes {
		nodes[r] = &toy{rank: r, ranks: n}
	}
	return nodes
}

func TestRunDeliversAndFinishes(t *testing.T) {
	rep, err := Run(Config{Seed: 1}, toys(5))
	if err != nil || rep.Count != 1+2+3+4 || rep.Finisher != 0 {
		t.Fatalf("report %+v, error %v; want count 10 from rank 0", rep, err)
	}
}

func TestRunDetectsDeadlock(t *testing.T) {
	nodes := toys(3)
	nodes[0] = &toy{rank: 0, ranks: 4} // waits for a rank that does not exist
	if _, err := Run(Config{Seed: 2}, nodes); !errors.Is(err, ErrDeadlock) {
		t.Fatalf("error %v, want ErrDeadlock", err)
	}
}

func TestRunReportsNodeError(t *testing.T) {
	nodes := toys(2)
	nodes[1] = &failer{toy{rank: 1, ranks: 2}}
	if _, err := Run(Config{Seed: 3}, nodes); !errors.Is(err, ErrNode) {
		t.Fatalf("error %v, want ErrNode", err)
	}
}

// failer tells rank 0 to fail instead of answering.
type failer struct{ toy }

func (f *failer) Receive(int, int) []Envelope[int] { return []Envelope[int]{{To: 0, Msg: -1}} }
