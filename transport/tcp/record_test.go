package tcp_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// tamperProxy is a man in the middle: it forwards TCP connections to
// target, and on the first one changes the dialler's record stream once,
// after the handshake, as mode says: "flip" a byte of the first record
// of at least wire.PlaceMin bytes (a large frame's payload, placed
// straight into the handler's buffer), "flip-small" one of the first
// smaller record, "resume" the first record (the handshake's resume),
// "replay" a record (written twice), "reorder" two records (swapped),
// "drop" one. Later connections pass untouched.
type tamperProxy struct {
	ln       net.Listener
	target   string
	mode     string
	first    atomic.Bool
	tampered atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startTamperProxy(t *testing.T, target, mode string) *tamperProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tamperProxy{ln: ln, target: target, mode: mode}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *tamperProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		tamper := p.first.CompareAndSwap(false, true)
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(c, s)
			c.Close()
			s.Close()
		}()
		go func() {
			defer p.wg.Done()
			if tamper {
				p.forward(c, s)
			} else {
				io.Copy(s, c)
			}
			c.Close()
			s.Close()
		}()
	}
}

// forward copies the dialler's stream from c to s: its hello and proof
// frames, then its records, one of which it changes.
func (p *tamperProxy) forward(c, s net.Conn) {
	r := bufio.NewReader(c)
	read := func(n int) []byte {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil
		}
		return b
	}
	for range 2 { // the hello and the proof
		head := read(wire.LengthSize)
		if head == nil {
			return
		}
		body := read(int(binary.BigEndian.Uint32(head)))
		if body == nil {
			return
		}
		if _, err := s.Write(append(head, body...)); err != nil {
			return
		}
	}
	record := func() []byte {
		head := read(wire.RecordLengthSize)
		if head == nil {
			return nil
		}
		rest := read(int(binary.BigEndian.Uint32(head)) + wire.RecordTagSize)
		if rest == nil {
			return nil
		}
		return append(head, rest...)
	}
	for k := 0; ; k++ {
		rec := record()
		if rec == nil {
			return
		}
		n := len(rec) - wire.RecordOverhead
		pick := k >= 1 && !p.tampered.Load()
		switch p.mode {
		case "flip":
			pick = pick && n >= wire.PlaceMin
		case "flip-small":
			pick = pick && n < wire.PlaceMin
		case "resume":
			pick = k == 0
		}
		out := [][]byte{rec}
		if pick {
			p.tampered.Store(true)
			switch p.mode {
			case "flip", "flip-small", "resume":
				rec[wire.RecordLengthSize+n-1] ^= 0x20 // the last byte of the record's frames
			case "replay":
				out = append(out, rec)
			case "reorder":
				next := record()
				if next == nil {
					return
				}
				out = [][]byte{next, rec}
			case "drop":
				out = nil
			}
		}
		for _, b := range out {
			if _, err := s.Write(b); err != nil {
				return
			}
		}
	}
}

// Addr is where the proxy listens.
func (p *tamperProxy) Addr() string { return p.ln.Addr().String() }

// tamperCheck is the receiver's handler: it places large frames
// (transport.Placer), and logs every body delivered or placed whole.
type tamperCheck struct {
	log    *seqLog
	mu     sync.Mutex
	dst    []byte
	failed int
}

func (h *tamperCheck) Deliver(f wire.Frame) { h.log.add(f.Payload, true) }
func (h *tamperCheck) Hint(core.PeerHint)   {}

func (h *tamperCheck) Place(f wire.Frame, n int) (int, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dst = make([]byte, n-8)
	return 8, h.dst
}

func (h *tamperCheck) Placed(f wire.Frame, ok bool) {
	h.mu.Lock()
	body := append(append([]byte(nil), f.Payload...), h.dst...)
	if !ok {
		h.failed++
	}
	h.mu.Unlock()
	if ok {
		h.log.add(body, true)
	}
}

// TestTamperedRecordsAreRefused runs a stream of numbered frames, small
// and large (placed into the handler's memory), between two transports
// whose connection carries records, through a man in the middle that
// alters a byte of a record, replays one, swaps two or drops one. The
// receiver refuses the connection at that record (logged, counted in
// Stats.Tampered), never delivers or reports placed an altered frame, and
// the stream resumes on the next connection with every frame delivered
// once, in order and intact.
func TestTamperedRecordsAreRefused(t *testing.T) {
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	for _, mode := range []string{"flip", "flip-small", "resume", "replay", "reorder", "drop"} {
		t.Run(mode, func(t *testing.T) { testTamperedRecords(t, mode) })
	}
}

func testTamperedRecords(t *testing.T, mode string) {
	const n = 400
	var logs logBuffer
	ca, cb := config(1, nil), config(2, &logs)
	for _, c := range []*tcp.Config{&ca, &cb} {
		c.NoUnix, c.Integrity = true, tcp.IntegrityAlways
	}
	a, b := listen(t, ca), listen(t, cb)
	proxy := startTamperProxy(t, b.Addr(), mode)
	a.SetPeer(2, proxy.Addr())
	b.SetPeer(1, a.Addr())
	h := &tamperCheck{log: newSeqLog(n)}
	b.SetHandler(h)

	ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
	defer cancel()
	rng := rand.New(rand.NewPCG(*seed, 47))
	for i := range n {
		size := 8 + rng.IntN(64)
		if i%5 == 2 {
			size = wire.PlaceMin + rng.IntN(4096)
		}
		body := make([]byte, size)
		seqBody(body, uint64(i))
		var err error
		if rng.IntN(2) == 0 {
			err = a.SendDirect(ctx, 2, wire.Frame{Kind: seqKind}, body)
		} else {
			err = a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: body})
		}
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	select {
	case <-h.log.done:
	case <-ctx.Done():
		t.Fatalf("%d of %d frames arrived; stats a %+v, b %+v", h.log.arrived(), n, a.Stats(), b.Stats())
	}
	h.log.check(t)
	if !proxy.tampered.Load() {
		t.Fatal("the proxy found no record to tamper with")
	}
	sa, sb := a.Stats(), b.Stats()
	connections := uint64(2) // the one refused at a record, the one after
	if mode == "resume" {
		connections = 1 // refused in its handshake
	}
	if sb.Tampered != 1 || sb.Established < connections || sb.Integrity != sb.Established || sa.Integrity != sa.Established {
		t.Fatalf("b's stats %+v, a's %+v: want 1 connection refused for a record, another one after, all in records", sb, sa)
	}
	if !strings.Contains(logs.String(), "failed its integrity check") {
		t.Fatalf("b logged no integrity failure:\n%s", logs.String())
	}
	h.mu.Lock()
	failed := h.failed
	h.mu.Unlock()
	if mode == "flip" && failed == 0 {
		t.Fatal("the altered large frame was not reported failed (Placed false)")
	}
}

// A transport that turns records off (unsafe) still gets them from a
// peer that asks: either Hello's request is enough.
func TestRecordsWhenEitherSideAsks(t *testing.T) {
	ca, cb := config(1, nil), config(2, nil)
	ca.NoUnix, cb.NoUnix = true, true
	ca.Integrity, cb.Integrity = tcp.IntegrityAlways, tcp.IntegrityOff
	a, b := listen(t, ca), listen(t, cb)
	a.SetPeer(2, b.Addr())
	rec := transporttest.NewRecorder()
	b.SetHandler(rec)
	ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
	defer cancel()
	if err := a.Send(ctx, 2, frame(1)); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, transporttest.Timeout, "the frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	if sa, sb := a.Stats(), b.Stats(); sa.Integrity != 1 || sb.Integrity != 1 {
		t.Fatalf("connections in records: a %d, b %d; want 1 each", sa.Integrity, sb.Integrity)
	}
}

func TestParseIntegrity(t *testing.T) {
	for _, c := range []struct {
		in   string
		want tcp.IntegrityMode
	}{{"", tcp.IntegrityAuto}, {"auto", tcp.IntegrityAuto}, {"on", tcp.IntegrityAlways}, {"off", tcp.IntegrityOff}} {
		got, err := tcp.ParseIntegrity(c.in)
		if err != nil || got != c.want || (c.in != "" && got.String() != c.in) {
			t.Errorf("ParseIntegrity(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if _, err := tcp.ParseIntegrity("maybe"); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Errorf("ParseIntegrity(maybe): %v", err)
	}
	cfg := config(1, nil)
	cfg.Integrity = tcp.IntegrityOff + 1
	if err := cfg.Validate(); err == nil || !errors.Is(err, transport.ErrBadConfig) {
		t.Errorf("Validate with an unknown Integrity: %v", err)
	}
}
