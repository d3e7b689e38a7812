package tcp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// shmPeerEnv, set in the environment of this test binary, makes it the
// peer process of TestShmPeerKilledMidWrite (see TestMain): node 2, which
// streams frames of shmFrame bytes to node 1 at the address it gives,
// until it is killed.
const shmPeerEnv = "COHORT_TEST_SHM_PEER"

// shmFrame is larger than the rings (tcp.DefaultShmRingSize), so that a
// writer blocked on a full ring is always in the middle of a frame.
const shmFrame = 4 * tcp.DefaultShmRingSize

// runShmPeer is the peer process's body.
func runShmPeer(addr string) {
	tr, err := tcp.Listen(config(2, nil))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tr.SetPeer(1, addr)
	for seq := uint64(0); ; seq++ {
		p := transporttest.Payload(seq, shmFrame)
		if err := tr.SendDirect(context.Background(), 1, wire.Frame{Kind: transporttest.KindTest, Payload: p[:8]}, p[8:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// A peer process killed while it writes a frame into the ring: every frame
// it published whole is delivered intact and in order, the one it was
// writing is not delivered at all, and the connection's end is reported
// (a hint, as over TCP) as a stream cut off inside a frame. The reader is
// held so that the ring fills and the peer blocks in the middle of a frame
// (frames are larger than the ring) before it is killed.
func TestShmPeerKilledMidWrite(t *testing.T) {
	if !tcp.ShmSupported {
		t.Skip("no shared-memory path on this system")
	}
	var logs logBuffer
	tr := listen(t, config(1, &logs))
	rec := transporttest.NewRecorder()
	tr.SetHandler(rec)
	const held = 3 // frames delivered before the reader is held

	peer := exec.Command(os.Args[0], "-test.run=^$")
	peer.Env = append(os.Environ(), shmPeerEnv+"="+tr.Addr())
	peer.Stderr = os.Stderr
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer peer.Process.Kill()
	rec.Wait(t, transporttest.Timeout, fmt.Sprintf("%d frames", held), func(fs []wire.Frame, _ []core.PeerHint) bool {
		return len(fs) >= held
	})
	rec.Hold()
	rec.WaitHeld(t, transporttest.Timeout, 1)
	waitFor(t, "the ring from the peer to fill", func() bool { return tcp.ShmInboundFull(tr, 2) })
	if err := peer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	peer.Wait()
	rec.Release()
	rec.Wait(t, transporttest.Timeout, "a hint about node 2", func(_ []wire.Frame, hs []core.PeerHint) bool { return len(hs) > 0 })

	fs := rec.Frames()
	for i, f := range fs {
		seq, ok := transporttest.Seq(f.Payload)
		if !ok || seq != uint64(i) || len(f.Payload) != 8+shmFrame {
			t.Fatalf("frame %d: seq %d (intact %v), %d bytes; want seq %d of %d bytes", i, seq, ok, len(f.Payload), i, 8+shmFrame)
		}
	}
	if len(fs) < held {
		t.Fatalf("%d frames delivered, want at least %d", len(fs), held)
	}
	st := tr.Stats()
	if st.Shm != 1 || st.Lost != 1 {
		t.Fatalf("stats %+v: want 1 shared-memory connection, lost", st)
	}
	if h := rec.Hints()[0]; h.Node != 2 || !strings.Contains(h.Reason, "unexpected EOF") {
		t.Fatalf("hint %+v: want node 2's connection cut off inside a frame", h)
	}
}

// waitFor polls cond until it holds, failing the test after
// transporttest.Timeout (a bound on a wait, not a measurement).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(transporttest.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v", what, transporttest.Timeout)
		}
		time.Sleep(time.Millisecond)
	}
}
