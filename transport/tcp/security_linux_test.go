package tcp_test

import (
	"context"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents) - 1 // the directory being read
}

// sendWithFDs writes b on uc with n copies of fd passed beside it.
func sendWithFDs(t *testing.T, uc *net.UnixConn, b []byte, fd, n int) {
	t.Helper()
	fds := make([]int, n)
	for i := range fds {
		fds[i] = fd
	}
	if _, _, err := uc.WriteMsgUnix(b, unix.UnixRights(fds...), nil); err != nil {
		t.Logf("write: %v", err) // the server may have closed already
	}
}

// TestNoDescriptorKeptBeforeProof checks that descriptors passed beside
// the handshake bytes on the same-host Unix socket by a connection that
// never proves the secret are not kept: garbage instead of a hello, a
// hello followed by a wrong proof, and a hello followed by nothing (the
// handshake's timeout), each with /dev/null descriptors attached to every
// write. The process's descriptor count returns to where it was once the
// connections are refused, and after Close; then a proper peer connects.
func TestNoDescriptorKeptBeforeProof(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cfg := config(1, nil)
	cfg.HandshakeTimeout = 300 * time.Millisecond
	srv := listen(t, cfg)
	if srv.UnixAddr() == "" {
		t.Skip("no same-host Unix socket")
	}
	rec := transporttest.NewRecorder()
	srv.SetHandler(rec)
	baseline := openFDs(t)

	const perKind = 10
	const fdsPerWrite = 4
	kinds := []struct {
		name string
		run  func(uc *net.UnixConn, fr *wire.FrameReader)
	}{
		{"garbage", func(uc *net.UnixConn, _ *wire.FrameReader) {
			sendWithFDs(t, uc, []byte("GET / HTTP/1.0\r\n\r\n........................"), int(devNull.Fd()), fdsPerWrite)
		}},
		{"wrong proof", func(uc *net.UnixConn, fr *wire.FrameReader) {
			h := hello(7)
			sendWithFDs(t, uc, encode(wire.Frame{Src: 7, Dst: core.None}, h), int(devNull.Fd()), fdsPerWrite)
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			sh, _ := wire.DecodeHello(f.Payload)
			bad := wire.Proof{MAC: wire.ComputeProof([]byte("not the job secret"), h, sh, true)}
			sendWithFDs(t, uc, encode(wire.Frame{Src: 7, Dst: 1}, bad), int(devNull.Fd()), fdsPerWrite)
		}},
		{"no proof", func(uc *net.UnixConn, _ *wire.FrameReader) {
			sendWithFDs(t, uc, encode(wire.Frame{Src: 7, Dst: core.None}, hello(7)), int(devNull.Fd()), fdsPerWrite)
			sendWithFDs(t, uc, []byte{0}, int(devNull.Fd()), fdsPerWrite) // a proof's first byte
		}},
	}
	for _, k := range kinds {
		for range perKind {
			nc, err := net.Dial("unix", srv.UnixAddr())
			if err != nil {
				t.Fatal(err)
			}
			uc := nc.(*net.UnixConn)
			nc.SetDeadline(time.Now().Add(transporttest.Timeout))
			fr := wire.NewFrameReader(nc)
			k.run(uc, fr)
			// Wait for the server to close the connection.
			for {
				if _, err := fr.ReadFrame(); err != nil {
					break
				}
			}
			nc.Close()
		}
	}
	want := uint64(len(kinds) * perKind)
	deadline := time.Now().Add(transporttest.Timeout)
	for srv.Stats().Refused < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := srv.Stats(); st.Refused != want || st.FramesIn != 0 {
		t.Fatalf("stats %+v: want %d refused connections and no frame in", st, want)
	}
	// A little slack for descriptors the runtime opens on its own (the
	// leak this guards against is fdsPerWrite per write).
	const slack = 2
	if n := openFDs(t); n > baseline+slack {
		t.Fatalf("%d open descriptors after %d refused connections, %d before: descriptors passed before the proof were kept", n, want, baseline)
	}

	// A proper peer still connects.
	peer := listen(t, config(2, nil))
	peer.SetHandler(transporttest.NewRecorder())
	peer.SetPeer(1, srv.Addr())
	if err := peer.Send(context.Background(), 1, frame(0)); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, transporttest.Timeout, "the proper peer's frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) > 0 })
	peer.Close()
	srv.Close()
	if n := openFDs(t); n > baseline+slack {
		t.Fatalf("%d open descriptors after Close, %d before the refused connections", n, baseline)
	}
}

// encode returns the encoded frame f carrying m.
func encode(f wire.Frame, m wire.Message) []byte {
	var e wire.Encoder
	m.MarshalWire(&e)
	f.Kind = m.Kind()
	f.Payload = e.B
	return wire.AppendFrame(nil, f)
}

// dialAs connects to the abstract Unix socket name from a thread whose
// effective user id is uid, so that the server's SO_PEERCRED sees that
// user; the caller must be root.
func dialAs(t *testing.T, uid int, name string) net.Conn {
	t.Helper()
	type result struct {
		fd  int
		err error
	}
	done := make(chan result)
	go func() {
		// The thread's credentials change, not the process's (a raw
		// setresuid, unlike syscall.Setuid, touches one thread); the
		// thread is not unlocked, so it ends with the goroutine.
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			done <- result{-1, e}
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			if err = unix.Connect(fd, &unix.SockaddrUnix{Name: name}); err != nil {
				unix.Close(fd)
				fd = -1
			}
		}
		done <- result{fd, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatalf("connecting as uid %d: %v", uid, r.err)
	}
	f := os.NewFile(uintptr(r.fd), "unix")
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(transporttest.Timeout))
	return nc
}

// TestUnixRefusesOtherUser checks that the same-host Unix socket refuses
// a process of another user before any handshake, even one that knows
// the job secret: it gets no hello, only the end of the connection, and
// nothing it sends is delivered.
func TestUnixRefusesOtherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to connect as another user")
	}
	var logs logBuffer
	srv := listen(t, config(1, &logs))
	if srv.UnixAddr() == "" {
		t.Skip("no same-host Unix socket")
	}
	srv.SetHandler(transporttest.NewRecorder())
	nc := dialAs(t, 65534, srv.UnixAddr())
	c := &rawClient{nc: nc, fr: wire.NewFrameReader(nc), fw: wire.NewFrameWriter(nc, 0)}
	h := hello(7)
	nc.Write(encode(wire.Frame{Src: 7, Dst: core.None}, h)) // the server may have closed already
	if f, err := c.fr.ReadFrame(); err == nil {
		// The old behaviour: the handshake runs. Finish it with the
		// right secret, to show what such a process could do.
		sh, _ := wire.DecodeHello(f.Payload)
		c.sendMsg(t, wire.Frame{Src: 7, Dst: 1}, wire.Proof{MAC: wire.ComputeProof(secret, h, sh, true)})
		c.waitClosed(t)
		t.Fatalf("a process of uid 65534 got the server's hello; stats %+v", srv.Stats())
	}
	deadline := time.Now().Add(transporttest.Timeout)
	for srv.Stats().Refused == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := srv.Stats(); st.Refused != 1 || st.Accepted != 0 || st.FramesIn != 0 {
		t.Fatalf("stats %+v: want 1 refused connection, none accepted", st)
	}
	if log := logs.String(); !strings.Contains(log, "uid 65534") {
		t.Fatalf("the log does not name the other user:\n%s", log)
	}
}

// TestUnixHandshakeBound checks Config.MaxHandshakes on the same-host
// Unix socket, whose connections all come from our own user and so have
// no bound per source: handshakes that never complete fill the listener's
// bound, and the next connection is closed at once.
func TestUnixHandshakeBound(t *testing.T) {
	cfg := config(1, nil)
	cfg.HandshakeTimeout = 10 * transporttest.Timeout
	cfg.MaxHandshakes, cfg.MaxHandshakesPerSource = 4, 1
	srv := listen(t, cfg)
	if srv.UnixAddr() == "" {
		t.Skip("no same-host Unix socket")
	}
	for i := range 4 {
		if !served(t, dialRaw(t, "unix", srv.UnixAddr())) {
			t.Fatalf("connection %d closed at once, below the listener's bound", i)
		}
	}
	if served(t, dialRaw(t, "unix", srv.UnixAddr())) {
		t.Fatal("a connection beyond the listener's bound was served")
	}
	if st := srv.Stats(); st.Shed != 1 {
		t.Fatalf("stats %+v: want 1 shed", st)
	}
}
