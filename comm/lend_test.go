package comm

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// TestSendLentData: the data of large messages over transport/tcp is lent
// to the transport (lendRData), each send completing once the receiver
// has acknowledged it, while rank 0 breaks the connection now and then.
// Every message arrives intact although rank 0 overwrites each buffer as
// soon as its send completes: data resent from a buffer given back too
// early would arrive wrong.
func TestSendLentData(t *testing.T) {
	t.Setenv(unixEnv, "off")
	ss := tcpJob(t, 2)
	const msgs, size = 24, 1 << 20
	fill := func(b []byte, i int) {
		for k := range b {
			b[k] = byte(i*31 + k*7)
		}
	}
	each(t, ss, func(ctx context.Context, c *Comm) error {
		buf := make([]byte, size)
		want := make([]byte, size)
		for i := range msgs {
			switch c.Rank() {
			case 0:
				fill(buf, i)
				if i%5 == 2 {
					c.s.tcpTr.BreakConns(core.NodeID(1))
				}
				if err := c.Send(ctx, buf, 1, i); err != nil {
					return err
				}
				clear(buf)
			case 1:
				if _, err := c.Recv(ctx, buf, 0, i); err != nil {
					return err
				}
				fill(want, i)
				if !bytes.Equal(buf, want) {
					return fmt.Errorf("message %d arrived altered", i)
				}
			}
		}
		return nil
	})
	if ss[0].tcpTr.Stats().Lent == 0 {
		t.Fatal("no message's data was lent to the transport")
	}
}
