package tcp_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// TestSmallSocketBuffers streams frames around and above the size of
// small kernel socket buffers (Config.SocketBuffer 4 KiB, which Linux
// doubles) between two transports: every frame arrives, once and in
// order, through Send, through SendDirect, and in both directions at
// once. Over the same-host Unix socket and over loopback TCP, with and
// without polling reads.
//
// Over TCP this checks that the buffers are set before the handshake.
// Set after it, they shrank the receive window below the segment size
// the sender had chosen from the window announced at the handshake (half
// the largest window seen, 32 KiB on loopback), and the sender then sent
// nothing into that window but the window probes of its persist timer:
// one window per probe, about 56 KB/s, so that a stream of frames of the
// buffer's size or more looked stalled (Send's coalescing buffer makes
// even 2 KiB frames such writes). Each stream here is 4 MiB, which at
// that rate takes over a minute; one bound for the streams of each path
// (transporttest.Timeout) fails the test instead of hanging. The frames are
// sent on goroutines of their own: a SendDirect waits for the kernel to
// take its frame, whatever its context.
func TestSmallSocketBuffers(t *testing.T) {
	paths := []pathKind{
		{name: "unix"},
		{name: "tcp", noUnix: true},
		{name: "tcp-poll", noUnix: true, spin: 50 * time.Microsecond},
	}
	modes := []struct {
		name         string
		direct, both bool
	}{{name: "send"}, {name: "direct", direct: true}, {name: "both", both: true}}
	sizes := []int{2 << 10, 4 << 10, 8 << 10, 20 << 10}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
			defer cancel()
			for _, mode := range modes {
				for _, size := range sizes {
					t.Run(fmt.Sprintf("%s/size=%d", mode.name, size), func(t *testing.T) {
						testSmallSocketBuffers(ctx, t, path, size, mode.direct, mode.both)
					})
				}
			}
		})
	}
}

// smallBufferStream is how many bytes of frames each stream of
// TestSmallSocketBuffers carries, and sockBuf its Config.SocketBuffer.
const (
	smallBufferStream = 4 << 20
	sockBuf           = 4 << 10
)

func testSmallSocketBuffers(ctx context.Context, t *testing.T, path pathKind, size int, direct, both bool) {
	if ctx.Err() != nil {
		t.Fatal("the bound of this path's streams passed in an earlier subtest")
	}
	a, c := pathPair(t, path, func(ca, cc *tcp.Config) {
		ca.SocketBuffer, cc.SocketBuffer = sockBuf, sockBuf
	})
	for _, tr := range []*tcp.Transport{a, c} {
		if err := tr.SetSpin(path.spin); err != nil {
			t.Fatal(err)
		}
	}
	n := smallBufferStream / size
	toC, toA := newSeqLog(n), newSeqLog(n)
	record := func(log *seqLog) transport.Handler {
		return transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
			if f.Kind == seqKind {
				log.add(f.Payload, true)
			}
		}}
	}
	c.SetHandler(record(toC))
	a.SetHandler(record(toA))

	stream := func(from *tcp.Transport, to core.NodeID, direct bool) error {
		buf := make([]byte, size) // SendDirect's, reused: it copies or writes before returning
		for seq := range uint64(n) {
			var err error
			if direct {
				seqBody(buf, seq)
				err = from.SendDirect(ctx, to, wire.Frame{Kind: seqKind}, buf)
			} else {
				body := make([]byte, size) // Send's: the transport's until written
				seqBody(body, seq)
				err = from.Send(ctx, to, wire.Frame{Kind: seqKind, Payload: body})
			}
			if err != nil {
				return fmt.Errorf("frame %d of %d from %v: %w", seq, n, from.Self(), err)
			}
		}
		return nil
	}
	sent := make(chan error, 2)
	go func() { sent <- stream(a, 2, direct) }()
	if both {
		go func() { sent <- stream(c, 1, true) }()
	}
	wait := func(log *seqLog, what string) {
		select {
		case <-log.done:
			log.check(t)
		case <-ctx.Done():
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
			t.Fatalf("%s: %d of %d frames of %d bytes arrived within the test's bound; node 1 %+v, node 2 %+v",
				what, log.arrived(), n, size, a.Stats(), c.Stats())
		}
	}
	wait(toC, "1 to 2")
	if both {
		wait(toA, "2 to 1")
		if err := <-sent; err != nil {
			t.Error(err)
		}
	}
	if err := <-sent; err != nil {
		t.Error(err)
	}
	checkPath(t, a, path)
	// Both ends took the buffers: the dialled socket and the accepted one
	// (over TCP, its listener's).
	for _, end := range []struct {
		tr   *tcp.Transport
		peer core.NodeID
	}{{a, 2}, {c, 1}} {
		rcv, snd, ok := tcp.SocketBuffers(end.tr, end.peer)
		if ok && (rcv > 2*sockBuf || snd > 2*sockBuf) {
			t.Errorf("node %v: socket buffers of %d and %d bytes (receive, send), want at most twice %d", end.tr.Self(), rcv, snd, sockBuf)
		} else if !ok {
			t.Errorf("node %v: no socket buffers to read", end.tr.Self())
		}
	}
}
