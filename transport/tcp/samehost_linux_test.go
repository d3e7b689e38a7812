package tcp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// quietPeerEnv, set in the environment of this test binary run for
// TestQuietPeerProcess alone, makes it a peer process: node 2 of the test
// job, which sends one frame to node 1 at the address the variable holds,
// then says nothing until its standard input ends.
const quietPeerEnv = "COHORT_TEST_QUIET_PEER"

func TestQuietPeerProcess(t *testing.T) {
	addr := os.Getenv(quietPeerEnv)
	if addr == "" {
		t.Skip("run as the peer of TestSameHostPeerProcessHint")
	}
	tr, err := tcp.Listen(config(2, nil))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tr.SetPeer(1, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tr.Send(ctx, 1, wire.Frame{Kind: seqKind, Payload: []byte("hello")}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// procState returns the scheduling state letter of process pid.
func procState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return b[i+2]
}

// A peer process of this host that sent one frame and then went quiet,
// alive (waiting on its input), while the detector suspects it, is
// hinted as answering: alive and not running. Stopped (SIGSTOP) it is
// no longer: a stopped process is declared like a hung one. Killed
// (SIGKILL), its connection's end is reported as a refused connection
// would be (its process is gone), and no hint says it answers after.
func TestSameHostPeerProcessHint(t *testing.T) {
	a, hints, peer, ctx := startQuietPeer(t)
	if s := a.Stats(); s.Unix == 0 {
		t.Fatalf("the peer process's connection is not over the same-host socket: %+v", s)
	}
	a.Suspect(2, true)
	answering := func(what string) {
		t.Helper()
		for {
			select {
			case h := <-hints:
				if h.Node == 2 && h.Answering {
					return
				}
			case <-ctx.Done():
				t.Fatalf("%s: no hint that node 2 answers within a minute", what)
			}
		}
	}
	answering("quiet live peer process")

	// Stopped, it draws at most the hint of a look that read its state
	// just before; that look is over once two more looks have hinted.
	// Looks that hint nothing leave no trace, so a second peer, in this
	// process and silent, is hinted at every look to count them.
	if err := peer.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for procState(t, peer.Process.Pid) != 'T' {
		if ctx.Err() != nil {
			t.Fatal("the peer process not stopped within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	for len(hints) > 0 {
		<-hints // made before it stopped
	}
	b := listen(t, config(3, nil))
	b.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) {}})
	a.SetPeer(3, b.Addr())
	b.SetPeer(1, a.Addr())
	if err := a.Send(ctx, 3, wire.Frame{Kind: seqKind, Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	a.Suspect(3, true)
	stale, live := 0, 0
	for live < 2 {
		select {
		case h := <-hints:
			switch {
			case h.Node == 2 && h.Answering:
				stale++
			case h.Node == 3 && h.Answering:
				live++
			}
		case <-ctx.Done():
			t.Fatal("no hints that node 3 answers within a minute")
		}
	}
	if stale > 1 {
		t.Errorf("stopped peer process: %d hints that it answers, want at most the one in flight", stale)
	}

	// Resumed, then killed: its end is reported, no answering hint after.
	peer.Process.Signal(syscall.SIGCONT)
	answering("resumed peer process")
	if err := peer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	peer.Wait()
	for lost := false; ; {
		select {
		case h := <-hints:
			if h.Node != 2 {
				continue
			}
			if lost && h.Answering {
				t.Fatalf("after the peer process was killed: hint %+v, want none answering", h)
			}
			if !h.Answering && !lost {
				if !h.Refused {
					t.Fatalf("killed peer process: hint %+v, want it Refused (its process is gone)", h)
				}
				lost = true
				t.Logf("killed peer process: its end reported (%s)", h.Reason)
			}
			if lost && len(hints) == 0 {
				return
			}
		case <-ctx.Done():
			t.Fatal("no hint that the connection to the killed peer process was lost within a minute")
		}
	}
}

// A peer process of this host killed (SIGKILL) as soon as it has
// connected and sent its first frame, as a job's rank killed in its
// first quarter second is, has its connection's end hinted as Refused:
// its process is gone, so the detector may suspect it at once and give
// the verdict no settling margin. The hint comes from the connection's
// end, with nothing sent to the peer (no dial refused it).
func TestSameHostPeerKilledEarlyRefused(t *testing.T) {
	_, hints, peer, ctx := startQuietPeer(t)
	if err := peer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case h := <-hints:
			if h.Node != 2 {
				continue
			}
			if !h.Refused || h.Answering {
				t.Fatalf("killed peer process: first hint %+v, want it Refused", h)
			}
			t.Logf("killed peer process: %s", h.Reason)
			return
		case <-ctx.Done():
			t.Fatal("no hint about the killed peer process within a minute")
		}
	}
}

// startQuietPeer starts a peer process of this host (TestQuietPeerProcess)
// that connects to a new transport, sends it one frame and then waits on
// its input, and returns once the frame has come: the transport, the
// hints it got, the peer's process (killed and reaped when the test
// ends) and a context of a minute for the test's waits.
func startQuietPeer(t *testing.T) (*tcp.Transport, chan core.PeerHint, *exec.Cmd, context.Context) {
	t.Helper()
	a := listen(t, config(1, nil))
	hints := make(chan core.PeerHint, 1024)
	got := make(chan struct{}, 1)
	a.SetHandler(transport.HandlerFuncs{
		OnHint: func(h core.PeerHint) {
			select {
			case hints <- h:
			default:
			}
		},
		OnDeliver: func(wire.Frame) {
			select {
			case got <- struct{}{}:
			default:
			}
		},
	})
	peer := exec.Command(os.Args[0], "-test.run=^TestQuietPeerProcess$")
	peer.Env = append(os.Environ(), quietPeerEnv+"="+a.Addr())
	peer.Stderr = os.Stderr
	stdin, err := peer.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		peer.Process.Kill()
		peer.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("no frame from the peer process within a minute")
	}
	return a, hints, peer, ctx
}
