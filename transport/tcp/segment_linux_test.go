package tcp

import (
	"context"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestShrunkWindowKeepsFlowing streams 1 MiB over loopback TCP between
// sockets made with the transport's options (Config.SocketBuffer 32 KiB)
// whose receive window falls, after the handshake, to less than half the
// largest it announced, while the receiver writes a byte every 50 ms, as
// a peer's heartbeats do: every byte must arrive.
//
// Linux sizes a connection's segments to at most half the largest window
// its peer has announced, and sends into a smaller window only the probes
// of its persist timer; an acknowledgement that leaves the window too
// small starts that timer again, so a peer that writes more often than
// the timer's 200 ms holds off every probe and the stream stops for good.
// The window falls so when the receiver's segments cost it more memory
// per byte than earlier ones (it sizes its window from its buffer by that
// ratio): comm's TestSendOrderThroughBacklog, 1 KB messages over 32 KiB
// buffers, once stopped with 88 KB unsent behind a window of 29,357 bytes
// and segments of 29,391. Here the receiver's buffer is lowered instead,
// to a quarter of the one it was made with. The transport bounds its
// segments by a fraction of the buffer (bufferControl), far below any
// window such a receiver offers.
func TestShrunkWindowKeepsFlowing(t *testing.T) {
	cfg := Config{SocketBuffer: 32 << 10}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lc := net.ListenConfig{Control: socketControl(cfg)}
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: socketControl(cfg)}
	snd, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	rcv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	context.AfterFunc(ctx, func() { snd.Close(); rcv.Close() })

	got := 0
	read := func(want int) error {
		buf := make([]byte, 64<<10)
		for got < want {
			n, err := rcv.Read(buf)
			got += n
			if err != nil {
				return err
			}
		}
		return nil
	}
	// The receiver announces its whole window, and the sender sizes its
	// segments from it.
	warm := 256 << 10
	go snd.Write(make([]byte, warm))
	if err := read(warm); err != nil {
		t.Fatal(err)
	}
	// Both ends bound their segments: the dialled socket and the accepted
	// one, through its listener.
	for _, c := range []net.Conn{snd, rcv} {
		if mss := segmentMax(t, c); mss > smallBufferSegment(cfg.SocketBuffer) {
			t.Errorf("%v: segments of %d bytes, want at most %d", c.LocalAddr(), mss, smallBufferSegment(cfg.SocketBuffer))
		}
	}
	if err := rcv.(*net.TCPConn).SetReadBuffer(cfg.SocketBuffer / 4); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, snd)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if _, err := rcv.Write([]byte{1}); err != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	stream := 1 << 20
	go snd.Write(make([]byte, stream))
	if err := read(warm + stream); err != nil {
		t.Fatalf("%d of %d bytes arrived after the window shrank: %v", got-warm, stream, err)
	}
}

// segmentMax returns the segment size of c's socket (TCP_MAXSEG).
func segmentMax(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mss int
	cerr := rc.Control(func(fd uintptr) {
		mss, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
	})
	if cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	return mss
}
