package coll

import (
	"context"
	"errors"
	"testing"
)

// lateWriter is rank 0 of 4 over a transport whose every exchange fails
// (its peer died) while the receives it posted ahead stay posted until
// withdrawn, as a real transport's do. On Withdraw it takes scratch of
// every size from the pool and writes it: if a call had put back the
// scratch its posted receives point into, that write lands in them.
type lateWriter struct {
	posted [][]byte
	hit    bool
}

var errPeerDied = errors.New("peer died")

func (t *lateWriter) Rank() int                                    { return 0 }
func (t *lateWriter) Size() int                                    { return 4 }
func (t *lateWriter) NextSeq() uint64                              { return 0 }
func (t *lateWriter) Send(context.Context, int, int, []byte) error { return nil }
func (t *lateWriter) Recv(context.Context, int, int) ([]byte, error) {
	return nil, errPeerDied
}
func (t *lateWriter) ExchangeInto(context.Context, int, []byte, int, int, []byte) (int, error, error) {
	return 0, nil, errPeerDied
}
func (t *lateWriter) ExchangePosted(context.Context, int, []byte, int, any) (int, error, error) {
	return 0, nil, errPeerDied
}

func (t *lateWriter) PostInto(_, _ int, buf []byte) (any, error) {
	clear(buf)
	t.posted = append(t.posted, buf)
	return len(t.posted) - 1, nil
}

func (t *lateWriter) Withdraw(posted any) {
	var toks []*[]byte
	for c := 10; c <= 23; c++ {
		s, tok := getScratch[uint8](1 << c)
		for i := range s {
			s[i] = 0xAA
		}
		toks = append(toks, tok)
	}
	for _, tok := range toks {
		putScratch(tok)
	}
	for _, b := range t.posted {
		for _, x := range b {
			if x == 0xAA {
				t.hit = true
			}
		}
	}
}

// TestFailedCallKeepsScratchUntilWithdrawn: an Allreduce whose step fails
// with receives still posted into its scratch gives the scratch back only
// after it has withdrawn them. Given back first, another call could take
// it while the transport still writes a late message into it.
func TestFailedCallKeepsScratchUntilWithdrawn(t *testing.T) {
	sum := NewOp("sum", func(inout, in []float64) {
		for i := range inout {
			inout[i] += in[i]
		}
	}, true)
	buf := make([]float64, 1<<17) // 1 MiB: Rabenseifner's halving, its receives posted ahead
	for range 20 {
		tr := &lateWriter{}
		if err := Allreduce(context.Background(), tr, buf, buf, sum); !errors.Is(err, errPeerDied) {
			t.Fatalf("Allreduce over a dead peer: %v", err)
		}
		if len(tr.posted) == 0 {
			t.Fatal("no receive was posted ahead: the test no longer reaches the case")
		}
		if tr.hit {
			t.Fatal("a posted receive's buffer was handed out as scratch before it was withdrawn")
		}
	}
}
