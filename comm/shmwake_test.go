package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestShmPingPongWakeUps runs a two-rank ping-pong of 8-byte messages
// over a shared-memory ring, each rank on its own goroutine, with the
// callers' polling off (every reply needs the reader goroutine's wake-up
// from an armed wait: the doorbell of the futex pattern) and with a
// polling window short enough that readers turn from parked unarmed to
// armed and back within the run. A lost wake-up leaves a rank waiting
// for a reply that sits in its ring: the receive's deadline (testTimeout
// for each message, which a loaded machine's delays of milliseconds do
// not reach) fails the test. Every message's count is checked.
func TestShmPingPongWakeUps(t *testing.T) {
	for _, poll := range []string{"off", "2us"} {
		t.Run("poll="+poll, func(t *testing.T) {
			t.Setenv("COHORT_SHM", "on")
			t.Setenv("COHORT_UNIX", "on")
			t.Setenv("COHORT_POLL", poll)
			ss := tcpJobWith(t, 2, []Option{func(o *options) { o.shmInProcess = true }})
			n := 5000
			if raceEnabled || testing.Short() {
				n = 2000
			}
			errs := make(chan error, 2)
			for r, s := range ss {
				go func() {
					w := s.World()
					var buf [8]byte
					for i := range n {
						ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
						defer cancel()
						if r == 0 {
							binary.LittleEndian.PutUint64(buf[:], uint64(i))
							if err := w.Send(ctx, buf[:], 1, 1); err != nil {
								errs <- fmt.Errorf("rank 0, message %d: send: %w", i, err)
								return
							}
						}
						if _, err := w.Recv(ctx, buf[:], 1-r, 1); err != nil {
							errs <- fmt.Errorf("rank %d, message %d: receive: %w", r, i, err)
							return
						}
						if got := binary.LittleEndian.Uint64(buf[:]); got != uint64(i) {
							errs <- fmt.Errorf("rank %d: got message %d, want %d", r, got, i)
							return
						}
						if r == 1 {
							if err := w.Send(ctx, buf[:], 0, 1); err != nil {
								errs <- fmt.Errorf("rank 1, message %d: send: %w", i, err)
								return
							}
						}
					}
					errs <- nil
				}()
			}
			for range ss {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
