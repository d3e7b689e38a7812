package comm

import (
	"context"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// Over sockets, the Data held for a rank's fellow replicas leave in one
// write (replicabatch.go): over loopback TCP, plain and in records, rank 0
// sends rank 1 rounds of lazyMax messages of 8 B to 12 KiB, which rank 1's
// master gets at once and its fellow once the round's last send takes the
// batch out (the wait for the first is set far off). The fellow gets every
// message, in order, and at least one round goes out in one write (a
// round whose write finds the connection busy, a frame of the failure
// detector being written, goes one frame at a time: timing, so the test
// asks for one round of several). The acknowledgements and commits that
// follow are written at once by their senders too (sendControl).
func TestReplicatedDataToFellowsOneWrite(t *testing.T) {
	for _, integrity := range []string{"off", "on"} {
		t.Run("records="+integrity, func(t *testing.T) {
			t.Setenv(unixEnv, "off")
			t.Setenv(shmEnv, "off")
			t.Setenv(integrityEnv, integrity)
			testReplicatedDataToFellowsOneWrite(t)
		})
	}
}

func testReplicatedDataToFellowsOneWrite(t *testing.T) {
	const master, fellow, rounds = 1, 3, 5 // rank 1's replicas
	ss := tcpJobWith(t, 2*2, nil, func(b *launch.Bootstrap) { b.Replicas = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	body := func(i int) []byte {
		b := make([]byte, 8+i*1031%(12<<10))
		for k := range b {
			b[k] = byte(i + k)
		}
		return b
	}
	send := func(i int) {
		for _, p := range []int{0, 2} { // rank 0's replicas
			if err := ss[p].World().Send(ctx, body(i), 1, 1); err != nil {
				t.Fatalf("process %d: send %d: %v", p, i, err)
			}
		}
	}
	recv := func(p, i int) {
		want := body(i)
		buf := make([]byte, 16<<10)
		st, err := ss[p].World().Recv(ctx, buf, 0, 1)
		if err != nil || string(buf[:st.Count]) != string(want) {
			t.Fatalf("process %d: message %d: got %d bytes (%v), want %d bytes of its pattern", p, i, st.Count, err, len(want))
		}
	}
	send(0)
	recv(master, 0)
	recv(fellow, 0)
	for _, s := range ss {
		s.rep.lmu.Lock()
		s.rep.lazy.wait = time.Hour
		s.rep.lmu.Unlock()
	}
	r := ss[0].rep
	next := 1
	for range rounds {
		for range lazyMax {
			send(next)
			recv(master, next)
			next++
		}
		for i := next - lazyMax; i < next; i++ {
			recv(fellow, i)
		}
	}
	t.Logf("%d rounds: %d messages to the fellow in a batch's one write", rounds, r.batched.Load())
	if r.batched.Load() == 0 {
		t.Errorf("rank 0's master wrote none of %d rounds of %d messages to rank 1's fellow in one write", rounds, lazyMax)
	}
	// Rank 1's replicas acknowledged the deliveries (every
	// replica.Config.AckEvery on a channel), and rank 0's master
	// committed them to its fellow: written at once by the sender
	// (sendControl) unless each found its connection busy.
	now := uint64(0)
	for _, s := range ss {
		now += s.rep.controlNow.Load()
	}
	if now == 0 {
		t.Error("no control message of the layer was written at once (SendNow)")
	}
}
