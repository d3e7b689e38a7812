// Both sides of the rendezvous (a rank's Register, the launcher's
// Rendezvous) and their messages are in this file: they are one protocol
// and change together.

package launch

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// LauncherNode is the node id the launcher's side of a rendezvous
// connection presents in its handshake Hello (ranks present their rank).
const LauncherNode = core.None - 1

// ErrRendezvous wraps every failure of a rendezvous: on a rank's side
// ([Bootstrap.Register]) and on the launcher's ([Rendezvous.Wait]). The
// message says why: the handshake failed (wrong job or secret), the
// launcher aborted the rendezvous (another rank died before registering,
// or it timed out), the connection was lost.
var ErrRendezvous = errors.New("launch: rendezvous failed")

// The messages of a rendezvous connection. They travel in wire frames
// after the wire handshake, on a connection that carries nothing else, so
// their kinds are private to it; they are numbered in protocol core far
// above the handshake's kinds so that a frame that strays onto a host
// connection is refused as unknown. Append only: the numbers are on the
// wire.
var (
	kindRegister = core.MakeKind(core.ProtoCore, 0x40) // rank → launcher: Size, listen address
	kindTable    = core.MakeKind(core.ProtoCore, 0x41) // launcher → rank: every rank's address
	kindAbort    = core.MakeKind(core.ProtoCore, 0x42) // launcher → rank: the rendezvous failed, and why
	// 0x43 to 0x45: kindJoined, kindJoinedAck, kindNewcomerTable (rejoin.go)
	kindExcluded = core.MakeKind(core.ProtoCore, 0x46) // rank → launcher: processes the membership excluded (excluded.go)
)

// maxAddrLen bounds a registered address (a host name is at most 253
// bytes, a port 5 and the colon 1).
const maxAddrLen = 260

// maxReasonLen bounds an abort's reason.
const maxReasonLen = 4096

type registerMsg struct {
	Size int
	Addr string
}

func (registerMsg) Kind() core.Kind { return kindRegister }
func (m registerMsg) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(m.Size))
	e.String(m.Addr)
}

type tableMsg struct{ Addrs []string }

func (tableMsg) Kind() core.Kind { return kindTable }
func (m tableMsg) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(len(m.Addrs)))
	for _, a := range m.Addrs {
		e.String(a)
	}
}

type abortMsg struct{ Reason string }

func (abortMsg) Kind() core.Kind               { return kindAbort }
func (m abortMsg) MarshalWire(e *wire.Encoder) { e.String(m.Reason) }

func decodeRegister(p []byte) (registerMsg, error) {
	d := wire.NewDecoder(p)
	m := registerMsg{Size: int(min(d.Uvarint(), MaxSize+1)), Addr: d.StringMax(maxAddrLen)}
	return m, d.Finish()
}

func decodeTable(p []byte, size int) (tableMsg, error) {
	d := wire.NewDecoder(p)
	n := d.Uvarint()
	if d.Err() == nil && n != uint64(size) {
		return tableMsg{}, fmt.Errorf("the table lists %d ranks, the job has %d", n, size)
	}
	m := tableMsg{Addrs: make([]string, 0, size)}
	for i := 0; i < size && d.Err() == nil; i++ {
		m.Addrs = append(m.Addrs, d.StringMax(maxAddrLen))
	}
	return m, d.Finish()
}

func decodeAbort(p []byte) (abortMsg, error) {
	d := wire.NewDecoder(p)
	m := abortMsg{Reason: d.StringMax(maxReasonLen)}
	return m, d.Finish()
}

// handshake runs the wire handshake (package wire: Hello, then Proof, both
// ways) on a fresh connection; initiator says whether we dialed. It
// returns the peer's Hello.
func handshake(fr *wire.FrameReader, fw *wire.FrameWriter, jobID string, self core.NodeID, secret []byte, initiator bool) (wire.Hello, error) {
	local := wire.Hello{Version: wire.Version, JobID: jobID, Node: self}
	rand.Read(local.Nonce[:])
	if err := send(fw, self, core.None, local); err != nil {
		return wire.Hello{}, err
	}
	f, err := fr.ReadFrame()
	if err != nil {
		return wire.Hello{}, fmt.Errorf("reading the hello: %w", err)
	}
	if f.Kind != wire.KindHello {
		return wire.Hello{}, fmt.Errorf("the first frame is %v, not a hello", f.Kind)
	}
	remote, err := wire.DecodeHello(f.Payload)
	if err == nil {
		err = wire.CheckHello(local, remote)
	}
	if err != nil {
		return wire.Hello{}, err
	}
	proof := wire.Proof{MAC: wire.ComputeProof(secret, local, remote, initiator)}
	if err := send(fw, self, remote.Node, proof); err != nil {
		return wire.Hello{}, err
	}
	if f, err = fr.ReadFrame(); err != nil {
		return wire.Hello{}, fmt.Errorf("reading the proof: %w", err)
	}
	if f.Kind != wire.KindProof {
		return wire.Hello{}, fmt.Errorf("expected a proof, got %v", f.Kind)
	}
	p, err := wire.DecodeProof(f.Payload)
	if err == nil {
		err = wire.CheckProof(secret, local, remote, initiator, p)
	}
	return remote, err
}

func send(fw *wire.FrameWriter, src, dst core.NodeID, m wire.Message) error {
	if err := fw.WriteMessage(wire.Frame{Src: src, Dst: dst}, m); err != nil {
		return err
	}
	return fw.Flush()
}

// Registration is a rank's place in a job whose rendezvous completed: the
// address of every rank, and the open connection to the launcher through
// which the launcher sees this process die. Close it when the process
// leaves the job.
type Registration struct {
	// Addrs holds every rank's listen address, indexed by rank (Addrs[r]
	// is rank r's, this rank's included; "" for a rank the job started
	// without, see [Rendezvous.Excuse]). The caller owns it. At a
	// newcomer (Bootstrap.Newcomer), the addresses of the processes up
	// to its own.
	Addrs []string
	// Gone lists, at a newcomer, the processes before it that had left
	// the launcher (failed or finished) when it registered, in order:
	// not contacts to ask for admission.
	Gone []int

	nc       net.Conn  // nil when the addresses came from an Exchanger
	ex       Exchanger // closed by Close; nil with a launcher
	stopCtx  func() bool
	lost     chan struct{}
	reason   error // why the connection ended; set before lost is closed
	closeMu  sync.Mutex
	closed   bool
	readDone chan struct{}

	// The launcher's news of processes that join the job (rejoin.go).
	self   core.NodeID
	wmu    sync.Mutex // guards fw
	fw     *wire.FrameWriter
	joinMu sync.Mutex // held while a join is handed to onJoin
	onJoin func(process int, addr string)
	early  []joinedMsg // joins that came before SetOnJoin
}

// Register joins the rendezvous of b's job: it dials b.Rendezvous, proves
// knowledge of the job secret (the wire handshake: HMAC-SHA256 bound to
// both Hellos), tells the launcher this rank's listenAddr (host:port) and
// waits until every rank has registered; it returns every rank's address.
// It blocks until then, ctx ends, or the launcher aborts the rendezvous
// (another rank died first, or it timed out): errors wrap
// [ErrRendezvous] and say why, or are ctx's error.
//
// The connection stays open after Register returns, until ctx ends or
// [Registration.Close]: the launcher takes its closing for the end of
// this process. [Registration.Lost] reports the launcher's end.
func (b Bootstrap) Register(ctx context.Context, listenAddr string) (*Registration, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if b.Exchange != nil {
		return b.exchange(ctx, listenAddr)
	}
	if len(listenAddr) > maxAddrLen {
		return nil, fmt.Errorf("%w: listen address of %d bytes, limit %d", ErrRendezvous, len(listenAddr), maxAddrLen)
	}
	if err := checkAddr(listenAddr); err != nil {
		return nil, fmt.Errorf("%w: listen address %q: %v", ErrRendezvous, listenAddr, err)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", b.Rendezvous)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: rank %d cannot reach the launcher at %s: %w", ErrRendezvous, b.Rank, b.Rendezvous, err)
	}
	r := &Registration{nc: nc, lost: make(chan struct{}), readDone: make(chan struct{}), self: core.NodeID(b.Rank)}
	// ctx's end closes the connection, which fails a blocked read.
	r.stopCtx = context.AfterFunc(ctx, func() { r.shut() })
	fail := func(format string, args ...any) (*Registration, error) {
		r.stopCtx()
		nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: rank %d: %s", ErrRendezvous, b.Rank, fmt.Sprintf(format, args...))
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	fr := wire.NewFrameReader(nc)
	fr.SetMaxFrameSize(wire.MaxHandshakeFrameSize)
	fw := wire.NewFrameWriter(nc, 512)
	self := core.NodeID(b.Rank)
	if _, err := handshake(fr, fw, b.JobID, self, b.Secret, true); err != nil {
		return fail("handshake with the launcher at %s: %v", b.Rendezvous, err)
	}
	if err := send(fw, self, LauncherNode, registerMsg{Size: b.Size, Addr: listenAddr}); err != nil {
		return fail("sending the registration: %v", err)
	}
	entries := b.Size
	if b.Newcomer {
		entries = b.Rank + 1 // the processes up to this one (rejoin.go)
	}
	fr.SetMaxFrameSize(16 + entries*(maxAddrLen+2+binary.MaxVarintLen64) + maxReasonLen)
	f, err := fr.ReadFrame()
	if err != nil {
		return fail("the launcher closed the connection before every rank registered: %v", err)
	}
	switch {
	case f.Kind == kindNewcomerTable && b.Newcomer:
		t, err := decodeNewcomerTable(f.Payload, b.Rank)
		if err != nil {
			return fail("bad table from the launcher: %v", err)
		}
		r.Addrs, r.Gone = t.Addrs, t.Gone
	case f.Kind == kindTable && !b.Newcomer:
		t, err := decodeTable(f.Payload, entries)
		if err != nil {
			return fail("bad table from the launcher: %v", err)
		}
		r.Addrs = t.Addrs
	case f.Kind == kindAbort:
		a, err := decodeAbort(f.Payload)
		if err != nil {
			return fail("bad abort message from the launcher: %v", err)
		}
		return fail("the launcher aborted the rendezvous: %s", a.Reason)
	default:
		return fail("unexpected %v frame from the launcher", f.Kind)
	}
	r.fw = fw
	go r.watch(fr)
	return r, nil
}

// watch reads the launcher's connection until it ends: nothing is sent
// after the table but an abort, so any end is the launcher's end (or ours).
func (r *Registration) watch(fr *wire.FrameReader) {
	defer close(r.readDone)
	var reason error
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			reason = fmt.Errorf("%w: the connection to the launcher ended: %w", ErrRendezvous, err)
			break
		}
		if f.Kind == kindAbort {
			a, _ := decodeAbort(f.Payload)
			reason = fmt.Errorf("%w: the launcher stopped the job: %s", ErrRendezvous, a.Reason)
			break
		}
		if f.Kind == kindJoined {
			if m, err := decodeJoined(f.Payload); err == nil {
				r.joined(m)
			}
		}
	}
	r.closeMu.Lock()
	if r.closed {
		reason = nil
	}
	r.reason = reason
	r.closeMu.Unlock()
	r.nc.Close()
	close(r.lost)
}

// shut closes the connection once, marking the end as ours.
func (r *Registration) shut() {
	r.closeMu.Lock()
	first := !r.closed
	r.closed = true
	r.closeMu.Unlock()
	if r.nc != nil {
		r.nc.Close()
	}
	if first && r.ex != nil {
		r.ex.Close()
	}
}

// Lost is closed when the connection to the launcher ends: by Close, by
// the end of Register's context, or because the launcher is gone or
// stopped the job. [Registration.Err] then says which. Under SLURM (an
// [Exchanger], no launcher of ours) it is never closed.
func (r *Registration) Lost() <-chan struct{} { return r.lost }

// Err returns nil while the connection is open or if this process ended
// it (Close, ctx), and otherwise why the launcher's end came
// (wrapping [ErrRendezvous]).
func (r *Registration) Err() error {
	select {
	case <-r.lost:
		return r.reason
	default:
		return nil
	}
}

// Close closes the connection to the launcher, which then knows that this
// rank left, and waits for the goroutine that watched it. It is
// idempotent and safe for concurrent use.
func (r *Registration) Close() error {
	r.stopCtx()
	r.shut()
	<-r.readDone
	return nil
}

// RendezvousConfig configures a launcher's [Rendezvous].
type RendezvousConfig struct {
	JobID  string // the job's name (at most wire.MaxJobIDLen bytes)
	Secret []byte // the job secret (at least MinSecretLen bytes)
	Size   int    // the number of ranks, 1 to MaxSize
	// Addr is where to listen; default "127.0.0.1:0" (a free port on the
	// loopback interface).
	Addr string
	// HandshakeTimeout bounds a connection's handshake and registration,
	// from its accept; default 10 s. A connection that takes longer is
	// closed (it may be a stray client; the rank, if it is one, fails).
	HandshakeTimeout time.Duration
}

// Rendezvous is the launcher's side of the rendezvous: it accepts each
// rank's authenticated connection, records the rank's address, and when
// every rank of the job has registered sends all of them the table of
// addresses. It then keeps the connections open until Close, so that the
// ranks can tell when the launcher is gone. Its methods are safe for
// concurrent use.
type Rendezvous struct {
	cfg RendezvousConfig
	ln  net.Listener

	mu       sync.Mutex
	conns    map[net.Conn]bool
	ranks    map[int]*rankConn // the registered ranks
	excused  map[int]bool      // ranks gone before they registered (Excuse)
	addrs    []string          // by rank, "" until registered (and for an excused one)
	first    time.Time         // when the first rank registered
	complete bool              // every rank registered: the table is being (or was) sent
	done     chan struct{}     // closed when the table went out or the rendezvous failed
	err      error             // why it failed
	notify   chan struct{}     // signalled (never blocking) when a rank registers or leaves before the table
	closed   bool
	late     lateJoins  // processes that join after the table (rejoin.go)
	excl     exclusions // what the ranks report the membership excluded (excluded.go)
	wg       sync.WaitGroup
}

// rankConn is one registered rank's connection.
type rankConn struct {
	rank int
	nc   net.Conn
	wmu  sync.Mutex
	fw   *wire.FrameWriter
}

func (c *rankConn) send(m wire.Message, timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(timeout))
	return send(c.fw, LauncherNode, core.NodeID(c.rank), m)
}

// NewRendezvous checks cfg, listens and starts accepting ranks.
func NewRendezvous(cfg RendezvousConfig) (*Rendezvous, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	// Validate through a bootstrap of rank 0 (the listen address stands in
	// for the rendezvous address, which is not known yet).
	probe := Bootstrap{JobID: cfg.JobID, Size: cfg.Size, Secret: cfg.Secret, Rendezvous: "127.0.0.1:1"}
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot listen: %w", ErrRendezvous, err)
	}
	r := &Rendezvous{
		cfg:     cfg,
		ln:      ln,
		conns:   map[net.Conn]bool{},
		ranks:   map[int]*rankConn{},
		excused: map[int]bool{},
		addrs:   make([]string, cfg.Size),
		done:    make(chan struct{}),
		notify:  make(chan struct{}, 1),
		excl:    exclusions{by: map[int][]int{}, news: make(chan struct{}, 1)},
	}
	r.wg.Add(1)
	go r.acceptLoop()
	return r, nil
}

// Addr returns the address the rendezvous listens on (host:port), for
// the ranks' COHORT_RENDEZVOUS.
func (r *Rendezvous) Addr() string { return r.ln.Addr().String() }

func (r *Rendezvous) acceptLoop() {
	defer r.wg.Done()
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			nc.Close()
			return
		}
		r.conns[nc] = true
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(nc)
	}
}

// serve runs one connection: handshake, registration, then reading until
// it ends.
func (r *Rendezvous) serve(nc net.Conn) {
	defer r.wg.Done()
	defer func() {
		nc.Close()
		r.mu.Lock()
		delete(r.conns, nc)
		r.mu.Unlock()
	}()
	nc.SetDeadline(time.Now().Add(r.cfg.HandshakeTimeout))
	fr := wire.NewFrameReader(nc)
	fr.SetMaxFrameSize(wire.MaxHandshakeFrameSize)
	fw := wire.NewFrameWriter(nc, 512)
	hello, err := handshake(fr, fw, r.cfg.JobID, LauncherNode, r.cfg.Secret, false)
	if err != nil {
		return // not a rank of this job: nothing to tell it
	}
	c := &rankConn{rank: int(hello.Node), nc: nc, fw: fw}
	refuse := func(format string, args ...any) {
		c.send(abortMsg{Reason: fmt.Sprintf(format, args...)}, r.cfg.HandshakeTimeout)
	}
	newcomer := hello.Node >= core.NodeID(r.cfg.Size)
	if newcomer && !r.expected(c.rank) {
		refuse("rank %d is out of range for a job of %d ranks", hello.Node, r.cfg.Size)
		return
	}
	f, err := fr.ReadFrame()
	if err != nil || f.Kind != kindRegister {
		return
	}
	reg, err := decodeRegister(f.Payload)
	if err != nil {
		refuse("bad registration: %v", err)
		return
	}
	if reg.Size != r.cfg.Size {
		refuse("rank %d believes the job has %d ranks; it has %d", c.rank, reg.Size, r.cfg.Size)
		return
	}
	if err := checkAddr(reg.Addr); err != nil {
		refuse("rank %d registered a bad address %q: %v", c.rank, reg.Addr, err)
		return
	}
	nc.SetDeadline(time.Time{})
	if newcomer {
		// Its table goes out once every member knows its address; the
		// reader must run meanwhile, for the members' acknowledgements.
		r.wg.Add(1)
		go r.registerLate(c, reg.Addr)
	} else if !r.register(c, reg.Addr) {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		switch f.Kind {
		case kindJoinedAck:
			r.acked(c.rank, f.Payload)
		case kindExcluded:
			r.reported(c.rank, f.Payload)
		}
	}
	r.mu.Lock()
	if r.ranks[c.rank] == c && !r.complete {
		// Gone before the table: its place is free again.
		delete(r.ranks, c.rank)
		r.addrs[c.rank] = ""
		r.signal()
	} else if r.ranks[c.rank] == c {
		r.goneLocked(c.rank)
	}
	r.mu.Unlock()
}

// register records c; the last rank to register sends everyone the table.
// It returns false if c was refused.
func (r *Rendezvous) register(c *rankConn, addr string) bool {
	r.mu.Lock()
	if r.complete || r.err != nil {
		err := r.err
		r.mu.Unlock()
		if err != nil {
			c.send(abortMsg{Reason: err.Error()}, r.cfg.HandshakeTimeout)
		} else {
			c.send(abortMsg{Reason: fmt.Sprintf("rank %d registered after the rendezvous completed", c.rank)}, r.cfg.HandshakeTimeout)
		}
		return false
	}
	if r.ranks[c.rank] != nil {
		r.mu.Unlock()
		c.send(abortMsg{Reason: fmt.Sprintf("rank %d is already registered", c.rank)}, r.cfg.HandshakeTimeout)
		return false
	}
	if r.excused[c.rank] {
		r.mu.Unlock()
		c.send(abortMsg{Reason: fmt.Sprintf("rank %d was taken for gone before it registered: the job started without it", c.rank)}, r.cfg.HandshakeTimeout)
		return false
	}
	if len(r.ranks) == 0 && r.first.IsZero() {
		r.first = time.Now()
	}
	r.ranks[c.rank] = c
	r.addrs[c.rank] = addr
	r.signal()
	r.completeIfAllLocked()
	return true
}

// Excuse tells the rendezvous that rank ended before it registered (the
// launcher saw its process end) and that the job starts without it: the
// table goes out once every other rank registered, with "" for rank's
// address, and the ranks find it failed from their first view (their
// detectors get no answer from it), as if it died just after the
// rendezvous. A job whose program replaces a failed rank (spares) uses
// it; others abort. Excusing a registered rank, or after the
// rendezvous completed or failed, does nothing: it reports whether rank
// was excused.
func (r *Rendezvous) Excuse(rank int) bool {
	r.mu.Lock()
	if rank < 0 || rank >= r.cfg.Size || r.complete || r.err != nil || r.ranks[rank] != nil || r.excused[rank] {
		r.mu.Unlock()
		return false
	}
	r.excused[rank] = true
	r.signal()
	r.completeIfAllLocked()
	return true
}

// completeIfAllLocked sends the table to every registered rank when every
// rank registered or was excused (but not all excused), and unlocks r.mu.
func (r *Rendezvous) completeIfAllLocked() {
	if len(r.ranks) == 0 || len(r.ranks)+len(r.excused) < r.cfg.Size {
		r.mu.Unlock()
		return
	}
	// Every rank gets the table before anything else the launcher may
	// send (an Abort waits for each connection's lock): the locks are
	// taken before r.mu is released.
	table := tableMsg{Addrs: slices.Clone(r.addrs)}
	conns := r.rankConnsLocked()
	for _, rc := range conns {
		rc.wmu.Lock()
	}
	r.complete = true
	r.mu.Unlock()
	for _, rc := range conns {
		rc.nc.SetWriteDeadline(time.Now().Add(r.cfg.HandshakeTimeout))
		if err := send(rc.fw, LauncherNode, core.NodeID(rc.rank), table); err == nil {
			rc.nc.SetWriteDeadline(time.Time{})
		} else {
			rc.nc.Close() // its rank sees the end of the connection
		}
		rc.wmu.Unlock()
	}
	r.mu.Lock()
	if r.err == nil {
		close(r.done)
	}
	r.mu.Unlock()
}

// Excused lists the ranks excused (Excuse), in order.
func (r *Rendezvous) Excused() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for rank := range r.excused {
		out = append(out, rank)
	}
	slices.Sort(out)
	return out
}

// signal wakes whoever watches registrations (the job's monitor).
func (r *Rendezvous) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *Rendezvous) rankConnsLocked() []*rankConn {
	conns := make([]*rankConn, 0, len(r.ranks))
	for _, rc := range r.ranks {
		conns = append(conns, rc)
	}
	slices.SortFunc(conns, func(a, b *rankConn) int { return a.rank - b.rank })
	return conns
}

// failLocked fails a rendezvous that has not completed.
func (r *Rendezvous) failLocked(err error) {
	if r.complete || r.err != nil {
		return
	}
	r.err = err
	close(r.done)
}

// Done is closed when the rendezvous is over: every rank has been sent
// the table (or its connection closed if it could not take it), or the
// rendezvous failed (Abort, Close).
func (r *Rendezvous) Done() <-chan struct{} { return r.done }

// Wait blocks until every rank has registered and returns the table of
// addresses (indexed by rank), or until the rendezvous fails (Abort,
// Close: an error wrapping ErrRendezvous) or ctx ends (ctx's error).
func (r *Rendezvous) Wait(ctx context.Context) ([]string, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return slices.Clone(r.addrs), nil
}

// completed reports whether every rank had registered: from then on each
// is being sent the table, so a rank may have it, run and end before
// Done is closed (the table's sends to the others still under way).
func (r *Rendezvous) completed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.complete
}

// Registered reports which ranks have registered, in order, and when the
// first of them did (zero if none).
func (r *Rendezvous) Registered() (ranks []int, first time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for rank := range r.ranks {
		ranks = append(ranks, rank)
	}
	slices.Sort(ranks)
	return ranks, r.first
}

// Missing lists the ranks that have not registered (and were not
// excused), in order.
func (r *Rendezvous) Missing() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for rank := 0; rank < r.cfg.Size; rank++ {
		if r.ranks[rank] == nil && !r.excused[rank] {
			out = append(out, rank)
		}
	}
	return out
}

// Abort fails a rendezvous that has not completed: every registered rank
// is told reason (its Register returns an error wrapping ErrRendezvous
// that quotes it) and Wait returns the same. After completion it tells
// the ranks that the job is stopping (their [Registration.Lost] closes).
func (r *Rendezvous) Abort(reason string) {
	r.mu.Lock()
	conns := r.rankConnsLocked()
	r.failLocked(fmt.Errorf("%w: %s", ErrRendezvous, reason))
	r.mu.Unlock()
	for _, rc := range conns {
		if rc.send(abortMsg{Reason: reason}, r.cfg.HandshakeTimeout) != nil {
			rc.nc.Close()
		}
	}
}

// Close stops listening, closes every connection (ranks see the launcher
// gone), fails a pending Wait and waits for the rendezvous's goroutines.
func (r *Rendezvous) Close() error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		r.failLocked(fmt.Errorf("%w: the launcher closed the rendezvous", ErrRendezvous))
	}
	r.ln.Close()
	for nc := range r.conns {
		nc.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// formatRanks renders ranks as "1, 4, 7".
func formatRanks(ranks []int) string {
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = fmt.Sprint(r)
	}
	return strings.Join(parts, ", ")
}
