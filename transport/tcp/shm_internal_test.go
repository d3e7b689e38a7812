//go:build linux

package tcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// shmTransport returns a transport of node id that uses shared memory
// with peers of this process.
func shmTransport(t *testing.T, id core.NodeID) *Transport {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Node, cfg.JobID, cfg.Secret = id, shmTestJob, shmTestSecret
	cfg.ShmInProcess = true
	tr, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// ringOffer is what a fake peer offers: the ring it made (mem, whose
// descriptor fd is sent unless noFD) and the size its offer states.
type ringOffer struct {
	fd   int
	mem  []byte
	size uint64
	noFD bool
}

// A ring is used only if its reader's checks pass: a peer that knows the
// job secret but offers a ring made for another job, another connection
// or direction, other nodes, or memory that it could resize or that is not
// what the offer says, is refused (the transport answers 0 and counts it),
// and the connection goes on over its Unix socket. The first case, a
// correct ring, is accepted: it shows the fake peer does the rest right.
func TestShmRefusesForeignRings(t *testing.T) {
	const peer = core.NodeID(3)
	good := func(t *testing.T, local, remote wire.Hello) ringOffer {
		fd, mem, err := createRing(DefaultShmRingSize)
		if err != nil {
			t.Fatal(err)
		}
		newRing(mem).writeHeader(uint32(peer), 1, wire.RingTag(shmTestSecret, local, remote, true, true))
		return ringOffer{fd: fd, mem: mem, size: DefaultShmRingSize}
	}
	retag := func(tag func(local, remote wire.Hello) [wire.ProofSize]byte) func(*testing.T, wire.Hello, wire.Hello) ringOffer {
		return func(t *testing.T, local, remote wire.Hello) ringOffer {
			o := good(t, local, remote)
			newRing(o.mem).writeHeader(uint32(peer), 1, tag(local, remote))
			return o
		}
	}
	for _, tc := range []struct {
		name   string
		offer  func(t *testing.T, local, remote wire.Hello) ringOffer
		accept bool
	}{
		{"a correct ring", good, true},
		{"a ring of another job", retag(func(l, r wire.Hello) [wire.ProofSize]byte {
			l.JobID, r.JobID = "another-job", "another-job"
			return wire.RingTag(shmTestSecret, l, r, true, true)
		}), false},
		{"a ring made with another secret", retag(func(l, r wire.Hello) [wire.ProofSize]byte {
			return wire.RingTag([]byte("another secret"), l, r, true, true)
		}), false},
		{"a ring of another connection", retag(func(l, r wire.Hello) [wire.ProofSize]byte {
			l.Nonce[0]++
			return wire.RingTag(shmTestSecret, l, r, true, true)
		}), false},
		{"a ring tagged for the other direction", retag(func(l, r wire.Hello) [wire.ProofSize]byte {
			return wire.RingTag(shmTestSecret, l, r, true, false)
		}), false},
		{"a ring for other nodes", func(t *testing.T, l, r wire.Hello) ringOffer {
			o := good(t, l, r)
			newRing(o.mem).writeHeader(uint32(peer), 9, wire.RingTag(shmTestSecret, l, r, true, true))
			return o
		}, false},
		{"a ring that is not empty", func(t *testing.T, l, r wire.Hello) ringOffer {
			o := good(t, l, r)
			newRing(o.mem).u64(offTail).Store(5)
			return o
		}, false},
		{"an offer larger than its memory", func(t *testing.T, l, r wire.Hello) ringOffer {
			o := good(t, l, r)
			o.size *= 2
			return o
		}, false},
		{"a ring whose size is not a power of two", func(t *testing.T, l, r wire.Hello) ringOffer {
			const size = DefaultShmRingSize - 64
			fd, mem, err := createRing(size)
			if err != nil {
				t.Fatal(err)
			}
			newRing(mem).writeHeader(uint32(peer), 1, wire.RingTag(shmTestSecret, l, r, true, true))
			return ringOffer{fd: fd, mem: mem, size: size}
		}, false},
		{"an offer without its memory", func(t *testing.T, l, r wire.Hello) ringOffer {
			o := good(t, l, r)
			o.noFD = true
			return o
		}, false},
		{"memory that can be resized", func(t *testing.T, l, r wire.Hello) ringOffer {
			fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Ftruncate(fd, ringHeader+DefaultShmRingSize); err != nil {
				t.Fatal(err)
			}
			mem, err := unix.Mmap(fd, 0, ringHeader+DefaultShmRingSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			newRing(mem).writeHeader(uint32(peer), 1, wire.RingTag(shmTestSecret, l, r, true, true))
			return ringOffer{fd: fd, mem: mem, size: DefaultShmRingSize}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := shmTransport(t, 1)
			rec := transporttest.NewRecorder()
			tr.SetHandler(rec)
			nc, err := net.Dial("unix", tr.UnixAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(transporttest.Timeout))
			rc := newRightsConn(nc.(*net.UnixConn))
			defer rc.stopCollecting()
			fr := wire.NewFrameReader(rc)
			fw := wire.NewFrameWriter(rc, 512)
			local := wire.Hello{Version: wire.Version, JobID: shmTestJob, Node: peer}
			rand.Read(local.Nonce[:])
			if err := writeFlush(fw, wire.Frame{Src: peer, Dst: core.None}, local); err != nil {
				t.Fatal(err)
			}
			remote, err := readHello(fr, local)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeFlush(fw, wire.Frame{Src: peer, Dst: 1}, wire.Proof{MAC: wire.ComputeProof(shmTestSecret, local, remote, true)}); err != nil {
				t.Fatal(err)
			}
			if err := writeFlush(fw, wire.Frame{Src: peer, Dst: 1}, wire.Resume{Stream: 1}); err != nil {
				t.Fatal(err)
			}
			if err := readProof(fr, shmTestSecret, local, remote, true); err != nil {
				t.Fatal(err)
			}
			if f, err := fr.ReadFrame(); err != nil || f.Kind != wire.KindResume {
				t.Fatalf("the transport's resume: %v, %v", f, err)
			}

			o := tc.offer(t, local, remote)
			defer unmapRing(o.mem)
			msg := ringFrame(peer, 1, wire.Ring{Size: o.size})
			if o.noFD {
				_, err = rc.Write(msg)
			} else {
				err = writeWithFD(rc.UnixConn, msg, o.fd)
			}
			closeFD(o.fd)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := readRing(fr, 1, peer, false)
			if err != nil || theirs.Size == 0 {
				t.Fatalf("the transport's offer: %+v, %v; want a ring", theirs, err)
			}
			for _, fd := range rc.take() {
				closeFD(fd)
			}
			// Refuse the transport's ring, so that the connection stays on
			// the socket whatever it answers.
			if _, err := rc.Write(ringFrame(peer, 1, wire.Ring{Answer: true})); err != nil {
				t.Fatal(err)
			}
			answer, err := readRing(fr, 1, peer, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := answer.Size == 1; got != tc.accept {
				t.Fatalf("the transport accepted the ring: %v, want %v", got, tc.accept)
			}
			if st := tr.Stats(); st.ShmRefused != map[bool]uint64{true: 0, false: 1}[tc.accept] || st.Shm != 0 {
				t.Fatalf("stats %+v: want %v refused rings, no shared-memory connection", st, !tc.accept)
			}
			// The connection works over its socket.
			if _, err := rc.Write(wire.AppendFrame(nil, wire.Frame{Kind: transporttest.KindTest, Src: peer, Dst: 1, Payload: transporttest.Payload(7, 100)})); err != nil {
				t.Fatal(err)
			}
			rec.Wait(t, transporttest.Timeout, "the frame over the socket", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
		})
	}
}

// Indices in shared memory that cannot be (more published than the ring
// holds) close the connection as a malformed frame: they are never used to
// read.
func TestShmCorruptIndicesCloseTheConnection(t *testing.T) {
	a, b := shmTransport(t, 1), shmTransport(t, 2)
	ra, rb := transporttest.NewRecorder(), transporttest.NewRecorder()
	a.SetHandler(ra)
	b.SetHandler(rb)
	a.SetPeer(2, b.Addr())
	b.SetPeer(1, a.Addr())
	if err := a.Send(context.Background(), 2, wire.Frame{Kind: transporttest.KindTest, Payload: transporttest.Payload(0, 10)}); err != nil {
		t.Fatal(err)
	}
	rb.Wait(t, transporttest.Timeout, "the first frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	if st := b.Stats(); st.Shm != 1 {
		t.Fatalf("stats %+v: want a shared-memory connection", st)
	}
	b.mu.Lock()
	sc := b.peers[1].cur.nc.(*shmConn)
	b.mu.Unlock()
	sc.use.RLock()
	in := sc.in
	in.u64(offTail).Store(in.u64(offHead).Load() + in.size + 1)
	sc.use.RUnlock()
	sc.poke()
	rb.Wait(t, transporttest.Timeout, "a hint about node 1", func(_ []wire.Frame, hs []core.PeerHint) bool { return len(hs) > 0 })
	if st := b.Stats(); st.Malformed != 1 {
		t.Fatalf("stats %+v: want the connection closed as malformed", st)
	}
}

// A handshake read of a Unix socket that the peer reset (it closed with
// our bytes unread: the tie-break's refusal) reports 0 bytes and the
// error, as an io.Reader must; ReadMsgUnix itself reports -1, which the
// frame reader took for a broken reader rather than the peer's close.
func TestRightsConnReadAfterReset(t *testing.T) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@cohort-test-reset-" + t.Name(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write([]byte("unread by the peer")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // let the bytes reach the peer's queue
	peer.Close()
	rc := newRightsConn(nc.(*net.UnixConn))
	defer rc.stopCollecting()
	n, err := rc.Read(make([]byte, 16))
	if n != 0 || err == nil {
		t.Fatalf("Read after a reset = %d, %v; want 0 and an error", n, err)
	}
}

// A caller's progress reads a small frame straight from the ring
// (nextFrame) only when the ring holds it whole and in one piece, it fits
// the buffer and it decodes; otherwise it reads nothing, so that the frame
// reader takes the frame (across the ring's end) or reports it (malformed).
func TestShmNextFrame(t *testing.T) {
	mem := make([]byte, ringHeader+minShmRingSize)
	w, r := newRing(mem), newRing(mem)
	c := &shmConn{in: r}
	buf := make([]byte, 256)
	frame := func(n int) []byte {
		return wire.AppendFrame(nil, wire.Frame{Kind: core.Kind(0x0301), Src: 2, Dst: 1, Epoch: 7, Payload: make([]byte, n)})
	}
	var f wire.Frame
	if ok, empty := c.nextFrame(&f, buf, wire.DefaultMaxFrameSize); ok || !empty {
		t.Fatalf("an empty ring: ok %v, empty %v; want false, true", ok, empty)
	}
	// Two whole frames: read one at a time, each consumed.
	w.put(frame(10))
	w.put(frame(20))
	w.publish()
	for _, n := range []int{10, 20} {
		ok, _ := c.nextFrame(&f, buf, wire.DefaultMaxFrameSize)
		if !ok || len(f.Payload) != n || f.Src != 2 || f.Dst != 1 || f.Epoch != 7 {
			t.Fatalf("frame of %d: got %v ok %v", n, f, ok)
		}
	}
	if r.pos != w.pos || r.u64(offHead).Load() != w.pos {
		t.Fatalf("head %d (stored %d), want %d", r.pos, r.u64(offHead).Load(), w.pos)
	}
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"too large for the buffer", frame(300)},
		{"malformed (kind 0)", wire.AppendFrame(nil, wire.Frame{Kind: 0, Src: 2, Dst: 1})},
		{"not yet whole", frame(50)[:30]},
	}
	for _, tc := range cases {
		before := r.pos
		w.put(tc.bytes)
		w.publish()
		if ok, empty := c.nextFrame(&f, buf, wire.DefaultMaxFrameSize); ok || empty || r.pos != before {
			t.Fatalf("%s: got %v ok %v empty %v, head moved %d; want nothing read", tc.name, f, ok, empty, r.pos-before)
		}
		r.pos = w.pos // as if the frame reader had taken it
		r.u64(offHead).Store(r.pos)
	}
	// A frame across the ring's end is left to the frame reader: records
	// of one line each bring the next to the ring's last line, where a
	// frame longer than the line's rest after the record's header wraps.
	for w.pos%w.size != w.size-recAlign {
		w.put(make([]byte, recAlign-recHead))
		w.publish()
	}
	r.pos = w.pos
	r.u64(offHead).Store(r.pos)
	w.put(frame(60))
	w.publish()
	if ok, empty := c.nextFrame(&f, buf, wire.DefaultMaxFrameSize); ok || empty {
		t.Fatalf("a frame across the ring's end: ok %v empty %v; want neither", ok, empty)
	}
	// The frame reader's path reads it whole across the end.
	got := make([]byte, 200)
	n, err := r.read(got)
	if want := frame(60); err != nil || !bytes.Equal(got[:n], want) {
		t.Fatalf("read across the ring's end: %d bytes, %v; want the frame's %d", n, err, len(want))
	}
	if r.pos != w.pos || r.left != 0 || r.u64(offHead).Load() != w.pos {
		t.Fatalf("after the record: reader at %d (left %d, head %d), writer at %d", r.pos, r.left, r.u64(offHead).Load(), w.pos)
	}
}

// A record's commit word names its own position: what an earlier lap left
// in the ring (a stale commit, or data) is not taken for a record, and a
// tail ahead of a missing commit or a length out of bounds closes the
// connection as corrupt.
func TestShmRecordCommit(t *testing.T) {
	mem := make([]byte, ringHeader+minShmRingSize)
	w, r := newRing(mem), newRing(mem)
	c := &shmConn{in: r}
	b := make([]byte, 64)
	if n, err := r.read(b); n != 0 || err != nil || c.pending() {
		t.Fatalf("a zeroed ring: read %d, %v, pending %v; want nothing", n, err, c.pending())
	}
	// Laps of records of one line each: the word at every line then holds
	// the commit of the lap before.
	for lap := 0; lap < 3; lap++ {
		for i := uint64(0); i < w.size/recAlign; i++ {
			if c.pending() {
				t.Fatalf("lap %d, line %d: pending before the record is committed", lap, i)
			}
			w.put([]byte{byte(lap), byte(i)})
			if c.pending() {
				t.Fatalf("lap %d, line %d: pending before publish", lap, i)
			}
			w.publish()
			if !c.pending() {
				t.Fatalf("lap %d, line %d: not pending once published", lap, i)
			}
			if n, err := r.read(b); n != 2 || err != nil || b[0] != byte(lap) || b[1] != byte(i) {
				t.Fatalf("lap %d, line %d: read %d %v %v", lap, i, n, err, b[:2])
			}
		}
	}
	// Data that looks like a length but no commit, with the tail ahead.
	r.word(r.pos, 1).Store(8)
	r.u64(offTail).Store(r.pos + recAlign)
	_, err := r.read(b)
	if !errors.Is(err, errRingCorrupt) {
		t.Fatalf("a tail ahead of a missing commit: %v; want corrupt", err)
	}
	// The error names the words the check compared.
	if want := fmt.Sprintf("reader at %d: tail %d", r.pos, r.pos+recAlign); !strings.Contains(err.Error(), want) {
		t.Fatalf("a tail ahead of a missing commit: %q does not say %q", err, want)
	}
	// A committed record whose length is out of bounds.
	r.word(r.pos, 0).Store(^r.pos)
	r.word(r.pos, 1).Store(r.recMax() + 1)
	if _, err := r.read(b); !errors.Is(err, errRingCorrupt) {
		t.Fatalf("a record longer than the bound: %v; want corrupt", err)
	}
}

// writeHeadBody, the direct path's write of a frame's head and body, and
// writeRecord, which writes a vector of buffers, taking turns: the frames
// they write read back as written, at every position of several laps,
// those that wrap the ring's end included. The frames' sizes come from a
// fixed seed.
func TestShmWriteRecordLaps(t *testing.T) {
	mem := make([]byte, ringHeader+minShmRingSize)
	w, r := newRing(mem), newRing(mem)
	wc := &shmConn{out: w}
	rng := mrand.New(mrand.NewPCG(1, 2))
	got := make([]byte, 4096)
	wrapped := 0
	for i := 0; i < 4000; i++ {
		f := wire.Frame{Kind: core.Kind(0x0301), Src: 2, Dst: 1, Epoch: uint64(rng.IntN(1 << 20)), Payload: make([]byte, rng.IntN(40))}
		body := make([]byte, rng.IntN(600))
		for j := range body {
			body[j] = byte(i + j)
		}
		head := f.AppendHead(nil, len(body))
		if at := (w.pos + recHead) & w.mask; w.size-at < uint64(len(head)+len(body)) {
			wrapped++
		}
		ok := false
		if i%2 == 0 {
			ok = wc.writeHeadBody(head, body)
		} else {
			_, ok = wc.writeRecord([][]byte{head, body})
		}
		if !ok {
			t.Fatalf("frame %d: refused in an empty ring", i)
		}
		want := append(head, body...)
		n := 0
		for n < len(want) {
			k, err := r.read(got[n:len(want)])
			if err != nil || k == 0 {
				t.Fatalf("frame %d: read %d of %d bytes: %v", i, n+k, len(want), err)
			}
			n += k
		}
		if !bytes.Equal(got[:n], want) {
			t.Fatalf("frame %d (%d bytes of payload, %d of body) read back differently", i, len(f.Payload), len(body))
		}
		if r.left != 0 || r.pos != w.pos {
			t.Fatalf("frame %d: the reader is at %d (%d left in the record), the writer at %d", i, r.pos, r.left, w.pos)
		}
	}
	t.Logf("%d frames of 4000 wrapped the ring's end", wrapped)
	if wrapped < 10 {
		t.Fatalf("%d frames wrapped the ring's end: the laps missed the case", wrapped)
	}
}

// A write of no bytes, which net.Conn allows (net.Buffers.WriteTo makes
// one for each empty buffer), writes nothing: a record of no bytes would
// be read as the peer's corruption (ring.recordLen) and end the
// connection.
func TestShmEmptyWrite(t *testing.T) {
	a, b := shmPair(t)
	for _, bufs := range [][][]byte{nil, {nil}, {{}, nil}} {
		if n, err := a.writev(bufs); n != 0 || err != nil {
			t.Fatalf("writev(%d empty buffers): got %d, %v; want 0, nil", len(bufs), n, err)
		}
	}
	if n, err := a.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil): got %d, %v; want 0, nil", n, err)
	}
	if _, err := a.Write([]byte{7}); err != nil {
		t.Fatal(err)
	}
	var got [2]byte
	if n, err := b.Read(got[:]); n != 1 || err != nil || got[0] != 7 {
		t.Fatalf("Read after the empty writes: got %d bytes %v, %v; want 1 byte [7], nil", n, got[:n], err)
	}
	if !b.in.empty() {
		t.Fatal("the ring holds more after the only byte written")
	}
}
