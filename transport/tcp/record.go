package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/cohort-mp/cohort/wire"
)

// Frames between hosts go in authenticated records (wire's records): a
// connection whose Hellos asked for it (either side; see wantRecords)
// wraps its socket, from each side's proof on, in a recordConn. Every
// write becomes a record: a writer's batch, a large payload, a
// SendDirect's head and body, a goodbye. The reader hands on no byte of a
// record before its tag has verified; a record that fails closes the
// connection (Stats.Tampered), and the frames it carried are
// resent on the next connection from the pair's resend log, as after any
// broken connection, so none is lost and none delivered altered.
//
// Large payloads stay uncopied: a write of PlaceMin bytes or more is cut
// in two records, its first recordPeek bytes and the rest, so that the
// frame reader finds a large frame's header and first bytes (what it
// needs to place the payload, wire.PlaceFunc) in records it can take
// whole, and then asks for exactly the rest, the second record: that one
// is read straight into the destination, and its tag is checked there
// before the read returns, so a placed frame is reported placed only once
// its bytes have verified.
//
// SendNow and the inline acknowledgements seal their frame into a record
// of its own and write it with their one non-blocking write; what the
// socket does not take of the record, all of it included, the writer
// writes as it is (peer.rest, writeRaw) before any other record.

// recordPeek is how many bytes of a large write go in a record of their
// own before the rest: more than a frame's length, header and the
// payload's first bytes that the frame reader reads before placing it.
const recordPeek = 256

// recordSplit is the smallest write cut in two records (see above); a
// smaller one is copied into one record with its head.
const recordSplit = wire.PlaceMin

// recordDirectMin is the smallest record read straight into the caller's
// buffer; a smaller one is read through the connection's buffer.
const recordDirectMin = 4 << 10

// recordReadSize is the first size of a connection's read buffer, and
// recordKeep the largest it keeps once a record that needed more is
// consumed.
const (
	recordReadSize = 16 << 10
	recordKeep     = 256 << 10
)

// recordConn carries a connection's bytes in records. Its reading side
// belongs to one reader at a time (the handshake, then the connection's
// reader); its writing side is locked, so that records are sealed in the
// order they enter the stream.
type recordConn struct {
	net.Conn // the socket: addresses, deadlines, Close

	src       io.Reader // the socket, or its pollReader once the connection is in use
	open      *wire.RecordOpener
	raw       []byte // bytes read from src: raw[rs:re] not taken yet
	rs, re    int
	plain     []byte // the verified bytes of the last record not returned yet
	maxRecord int
	rerr      error // sticky
	rtag      wire.RecordTag

	wmu  sync.Mutex
	seal *wire.RecordSealer
	wbuf []byte
	tags [wire.RecordTagSize]byte
	bufs [3][]byte
	wbs  net.Buffers
	wtag wire.RecordTag
	nbuf []byte // sealNow's record
}

// newRecordConn wraps nc, on which the handshake of local and remote (our
// Hello and the peer's; initiator: we dialled) has passed both proofs, in
// records keyed from secret. Its writing side may be used at once, its
// reading side once startReading has given it what the handshake read
// ahead. Until raiseLimit, a record is at most a handshake frame.
func newRecordConn(nc net.Conn, secret []byte, local, remote wire.Hello, initiator bool) *recordConn {
	var sealKey, openKey [wire.RecordKeySize]byte
	if initiator {
		sealKey, openKey = wire.RecordKeys(secret, local, remote)
	} else {
		openKey, sealKey = wire.RecordKeys(secret, remote, local)
	}
	return &recordConn{Conn: nc, src: nc, open: wire.NewRecordOpener(openKey), seal: wire.NewRecordSealer(sealKey),
		maxRecord: wire.LengthSize + wire.MaxHandshakeFrameSize}
}

// startReading gives rc the bytes the handshake's frame reader read past
// its last frame: the first of the peer's records.
func (rc *recordConn) startReading(ahead []byte) {
	rc.raw = make([]byte, max(recordReadSize, len(ahead)))
	rc.rs, rc.re = 0, copy(rc.raw, ahead)
}

// raiseLimit sets the largest record rc reads: what a writer of frames of
// at most maxFrame bytes with a writeBuffer-byte batch can make (a
// batch flushed with a large message encoded in place, or a SendDirect's
// pad, head and payload).
func (rc *recordConn) raiseLimit(maxFrame, writeBuffer int) {
	rc.maxRecord = maxFrame + writeBuffer + wire.LengthSize + wire.PadMax + 4<<10
}

// setPoll makes rc read its socket through a pollReader (poll.go), as a
// plain connection's frame reader does, and returns the socket's raw
// connection (nil if it has none), for SendNow.
func (rc *recordConn) setPoll(poll *pollState) syscall.RawConn {
	pr := newPollReader(rc.Conn, poll)
	if pr == nil {
		return nil
	}
	rc.src = pr
	return pr.raw
}

// sealNow returns b, encoded frames, sealed as one record for a raw
// write by SendNow or an inline acknowledgement, which hold the peer's
// write lock: the record must enter the stream, whole, before anything
// else is written (what the socket does not take goes to peer.rest).
func (rc *recordConn) sealNow(b []byte) []byte {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	w := wire.AppendRecordLength(rc.nbuf[:0], len(b))
	w = append(w, b...)
	w = append(w, rc.seal.Seal(w[wire.RecordLengthSize:])...)
	rc.nbuf = w
	return w
}

// writeFrameNow is writeNow for SendNow's frame and an inline
// acknowledgement, b: on a connection in records it writes b sealed into
// a record, which it returns as out (else b itself). A record the socket
// takes nothing of counts as written in none of its bytes (n 0, errno 0):
// its number is taken, so it must go out, and the caller leaves it to the
// writer as it leaves the rest of a frame.
func (c *conn) writeFrameNow(b []byte) (out []byte, n int, errno syscall.Errno) {
	rc, ok := c.nc.(*recordConn)
	if !ok {
		n, errno = c.writeNow(b)
		return b, n, errno
	}
	out = rc.sealNow(b)
	n, errno = c.writeNow(out)
	if errno == syscall.EAGAIN || errno == syscall.EINTR {
		n, errno = 0, 0
	}
	return out, n, errno
}

// writeRaw writes b, bytes already encoded for c's stream (what SendNow
// left of a frame, or of a record), to c's socket.
func (c *conn) writeRaw(b []byte) error {
	nc := c.nc
	if rc, ok := nc.(*recordConn); ok {
		nc = rc.Conn
	}
	_, err := nc.Write(b)
	return err
}

// CloseWrite shuts the socket's writing side (idle retirement).
func (rc *recordConn) CloseWrite() error {
	if cw, ok := rc.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("tcp: %T cannot shut its writing side", rc.Conn)
}

// Read returns verified bytes of the peer's records: what is left of the
// last record, else the next record, whose tag it checks first. A record
// of at least recordDirectMin bytes that fits p and has not arrived yet is
// read straight into p, and p then holds its bytes even when the tag fails
// (the error says not to use them).
func (rc *recordConn) Read(p []byte) (int, error) {
	if len(rc.plain) > 0 {
		n := copy(p, rc.plain)
		rc.plain = rc.plain[n:]
		return n, nil
	}
	if rc.rerr != nil {
		return 0, rc.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := rc.readRecord(p)
	if err != nil {
		rc.rerr = err
	}
	return n, err
}

func (rc *recordConn) readRecord(p []byte) (int, error) {
	if rc.rs == rc.re && len(rc.raw) > recordKeep {
		rc.raw, rc.rs, rc.re = make([]byte, recordReadSize), 0, 0
	}
	if err := rc.fill(wire.RecordLengthSize); err != nil {
		if err == io.ErrUnexpectedEOF && rc.rs == rc.re {
			return 0, io.EOF // between records: the peer's clean end
		}
		return 0, err
	}
	n, err := wire.RecordLength(rc.raw[rc.rs:], rc.maxRecord)
	if err != nil {
		return 0, err
	}
	start := rc.rs + wire.RecordLengthSize
	if have := rc.re - start; have < n && len(p) >= n && n >= recordDirectMin {
		copy(p, rc.raw[start:rc.re])
		rc.rs, rc.re = 0, 0
		if err := rc.readDirect(p[:n], have); err != nil {
			return 0, err
		}
		return n, nil
	}
	if err := rc.fill(wire.RecordOverhead + n); err != nil {
		return 0, err
	}
	start = rc.rs + wire.RecordLengthSize
	b := rc.raw[start : start+n]
	if err := rc.open.Open(b, rc.raw[start+n:start+n+wire.RecordTagSize]); err != nil {
		return 0, err
	}
	rc.rs = start + n + wire.RecordTagSize
	k := copy(p, b)
	rc.plain = b[k:]
	return k, nil
}

// readDirect reads a record whose first have bytes are in p straight
// into p (the whole record: len(p) bytes), then its tag, and checks it.
// Where the tag can be computed in pieces, each piece is hashed as it
// arrives, while it is in the cache and while the peer writes the next.
func (rc *recordConn) readDirect(p []byte, have int) error {
	if !wire.RecordsInPieces() {
		if err := readFull(rc.src, p[have:]); err != nil {
			return err
		}
		if err := rc.fill(wire.RecordTagSize); err != nil {
			return err
		}
		err := rc.open.Open(p, rc.raw[rc.rs:rc.rs+wire.RecordTagSize])
		rc.rs += wire.RecordTagSize
		return err
	}
	rc.open.Begin(&rc.rtag)
	rc.rtag.Write(p[:have])
	for got, empty := have, 0; got < len(p); {
		m, err := rc.src.Read(p[got:])
		if m < 0 || m > len(p)-got {
			return fmt.Errorf("tcp: the socket returned an invalid count %d", m)
		}
		rc.rtag.Write(p[got : got+m])
		got += m
		switch {
		case got == len(p):
		case err == io.EOF:
			return io.ErrUnexpectedEOF
		case err != nil:
			return err
		case m == 0:
			if empty++; empty >= 100 {
				return io.ErrNoProgress
			}
		}
	}
	if err := rc.fill(wire.RecordTagSize); err != nil {
		return err
	}
	err := rc.open.Check(&rc.rtag, rc.raw[rc.rs:rc.rs+wire.RecordTagSize])
	rc.rs += wire.RecordTagSize
	return err
}

// fill makes at least n bytes available in raw[rs:re], reading as much
// as the socket offers; rc.plain is empty (it aliases raw).
func (rc *recordConn) fill(n int) error {
	if rc.re-rc.rs >= n {
		return nil
	}
	if len(rc.raw) < n {
		nb := make([]byte, max(n, 2*len(rc.raw), recordReadSize))
		rc.re = copy(nb, rc.raw[rc.rs:rc.re])
		rc.rs, rc.raw = 0, nb
	} else if len(rc.raw)-rc.rs < n {
		rc.re = copy(rc.raw, rc.raw[rc.rs:rc.re])
		rc.rs = 0
	}
	for empty := 0; rc.re-rc.rs < n; {
		m, err := rc.src.Read(rc.raw[rc.re:])
		if m < 0 || m > len(rc.raw)-rc.re {
			return fmt.Errorf("tcp: the socket returned an invalid count %d", m)
		}
		rc.re += m
		if rc.re-rc.rs >= n {
			return nil
		}
		switch {
		case err == io.EOF:
			return io.ErrUnexpectedEOF
		case err != nil:
			return err
		case m == 0:
			if empty++; empty >= 100 {
				return io.ErrNoProgress
			}
		}
	}
	return nil
}

// readFull reads len(p) bytes of r into p; an end of stream first is
// io.ErrUnexpectedEOF.
func readFull(r io.Reader, p []byte) error {
	_, err := io.ReadFull(r, p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// Write writes b as records (one, or two for a large b: see recordPeek).
func (rc *recordConn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	rc.wmu.Lock()
	err := rc.writeRecords(nil, b)
	rc.wmu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// writeVectored writes head then body as records, without copying body
// when it is large: SendDirect's write.
func (rc *recordConn) writeVectored(head, body []byte) error {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	return rc.writeRecords(head, body)
}

// recordExtra is how many bytes of records stand, in one write of head
// and a body of bodyLen bytes, between the start of the write and
// head's end, beyond head itself, counting what stands before the body's
// second record as if it stood before the body (PadFor's offset: the
// body's first bytes and the second record start at the same offset
// modulo 64 as they sit in memory).
func recordExtra(bodyLen int) int {
	if bodyLen > recordPeek && bodyLen >= recordSplit {
		return wire.RecordLengthSize + wire.RecordOverhead
	}
	return wire.RecordLengthSize
}

// writeRecords writes head and body (head may be empty) as one record,
// or, when body is large, as a record of head and body's first
// recordPeek bytes then one of the rest, in one vectored write; rc.wmu is
// held.
func (rc *recordConn) writeRecords(head, body []byte) error {
	first := body
	var rest []byte
	if len(body) > recordPeek && len(body) >= recordSplit {
		first, rest = body[:recordPeek], body[recordPeek:]
	}
	n := len(head) + len(first)
	w := wire.AppendRecordLength(rc.wbuf[:0], n)
	w = append(append(w, head...), first...)
	w = append(w, rc.seal.Seal(w[wire.RecordLengthSize:])...)
	if rest == nil {
		rc.wbuf = w
		_, err := rc.Conn.Write(w)
		return err
	}
	w = wire.AppendRecordLength(w, len(rest))
	rc.wbuf = w
	if wire.RecordsInPieces() {
		return rc.writeInPieces(w, rest)
	}
	copy(rc.tags[:], rc.seal.Seal(rest))
	return rc.writev(w, rest, rc.tags[:])
}

// writev writes bufs in one vectored write.
func (rc *recordConn) writev(bufs ...[]byte) error {
	rc.bufs = [3][]byte{}
	copy(rc.bufs[:], bufs)
	rc.wbs = rc.bufs[:len(bufs)]
	_, err := rc.wbs.WriteTo(rc.Conn)
	rc.bufs = [3][]byte{} // do not keep the caller's buffer
	rc.wbs = nil
	return err
}

// recordPiece is how much of a large record writeInPieces writes before
// it hashes it.
const recordPiece = 256 << 10

// writeInPieces writes w (what precedes the record) and the large record
// rest, then rest's tag: each piece of rest is hashed once written, while
// it is in the cache and while the peer reads it, so that the tag follows
// the last piece at once rather than the record waiting for its tag.
func (rc *recordConn) writeInPieces(w, rest []byte) error {
	rc.seal.Begin(&rc.wtag)
	for first := true; len(rest) > 0; first = false {
		piece := rest[:min(len(rest), recordPiece)]
		rest = rest[len(piece):]
		var err error
		if first {
			err = rc.writev(w, piece)
		} else {
			_, err = rc.Conn.Write(piece)
		}
		if err != nil {
			return err
		}
		rc.wtag.Write(piece)
	}
	_, err := rc.Conn.Write(rc.wtag.Sum())
	return err
}

// wantRecords reports whether our Hello on nc asks for records: a TCP
// connection without TLS whose peer is on another host (its address is
// neither loopback nor one of this host's), unless Config.Integrity says
// otherwise. Between processes of one host, whoever can alter their
// frames (root, or their own user through their memory) needs no network
// to do it.
func (t *Transport) wantRecords(nc net.Conn) bool {
	if t.cfg.TLS != nil || isUnix(nc) {
		return false
	}
	switch t.cfg.Integrity {
	case IntegrityOff:
		return false
	case IntegrityAlways:
		return true
	}
	ap, err := netip.ParseAddrPort(nc.RemoteAddr().String())
	if err != nil {
		return true
	}
	return !isLocalIP(ap.Addr().Unmap())
}

// IntegrityMode chooses the connections whose frames go in authenticated
// records (Config.Integrity).
type IntegrityMode int

// The values of IntegrityMode. Append only: configurations name them.
const (
	// IntegrityAuto, the default, protects the TCP connections whose
	// peer is on another host.
	IntegrityAuto IntegrityMode = iota
	// IntegrityAlways protects every TCP connection, loopback too (tests
	// and benchmarks measure the path between hosts on one host so).
	IntegrityAlways
	// IntegrityOff asks for no records. Unsafe between hosts: anyone on
	// the path can then alter, drop, replay or inject frames. A connection
	// still has records when the peer asks for them.
	IntegrityOff
)

// String names the mode as ParseIntegrity reads it.
func (m IntegrityMode) String() string {
	switch m {
	case IntegrityAuto:
		return "auto"
	case IntegrityAlways:
		return "on"
	case IntegrityOff:
		return "off"
	}
	return fmt.Sprintf("IntegrityMode(%d)", int(m))
}

// errIntegrityMode: ParseIntegrity was given another word.
var errIntegrityMode = errors.New("tcp: integrity mode: want auto, on or off")

// ParseIntegrity reads an IntegrityMode: "auto" (or ""), "on" or "off".
func ParseIntegrity(s string) (IntegrityMode, error) {
	switch s {
	case "", "auto":
		return IntegrityAuto, nil
	case "on":
		return IntegrityAlways, nil
	case "off":
		return IntegrityOff, nil
	}
	return 0, fmt.Errorf("%w, not %q", errIntegrityMode, s)
}

// countTampered counts in Stats.Tampered a handshake whose resume, the
// first record, failed its check.
func (t *Transport) countTampered(err error) {
	if errors.Is(err, wire.ErrRecordAuth) || errors.Is(err, wire.ErrRecordLength) {
		t.stats.tampered.Add(1)
	}
}

// recordsFrom returns rc, its handshake done, as the connection's socket:
// records up to the transport's frame limit.
func (t *Transport) recordsFrom(rc *recordConn) *recordConn {
	rc.raiseLimit(t.cfg.MaxFrameSize, t.cfg.WriteBufferSize)
	return rc
}
