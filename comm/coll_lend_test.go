package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// TestAllreduceLentSteps: over transport/tcp the large steps of an
// Allreduce are lent to the transport, not copied (coll_fast.go's
// sendStep), while rank 0 breaks its connections between calls. Every
// sum is exact, although each rank overwrites its input as soon as a call
// returns: a step resent on a new connection after that would carry the
// wrong numbers.
func TestAllreduceLentSteps(t *testing.T) {
	const p, n, calls = 4, 1 << 17, 12 // float64: 1 MiB vectors
	// Over loopback TCP, as between hosts: no segment of shared memory
	// for the collectives of ranks of one host.
	t.Setenv(unixEnv, "off")
	ss := tcpJob(t, p)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		send, recv := make([]float64, n), make([]float64, n)
		for call := range calls {
			for i := range send {
				send[i] = float64(c.Rank()*n + i + call)
			}
			if c.Rank() == 0 && call%3 == 1 {
				for r := 1; r < p; r++ {
					c.s.tcpTr.BreakConns(core.NodeID(r))
				}
			}
			if err := Allreduce(ctx, c, send, recv, Sum[float64]()); err != nil {
				return err
			}
			clear(send)
			for i, got := range recv {
				if want := float64(p*(i+call) + n*p*(p-1)/2); got != want {
					return fmt.Errorf("call %d: recv[%d] = %v, want %v", call, i, got, want)
				}
			}
		}
		return nil
	})
	for r, s := range ss {
		if s.tcpTr.Stats().Lent == 0 {
			t.Errorf("rank %d lent no step to the transport", r)
		}
	}
}
