package tcp

import (
	"errors"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// conn is one authenticated connection.
type conn struct {
	nc        net.Conn
	fr        *wire.FrameReader
	peer      core.NodeID
	initiator bool // we dialed it
	remote    string
	dead      chan struct{}
	deadSet   atomic.Bool // set as dead is closed: a load, for the write path's every frame
	// writeBroken: a write failed because the peer closed its end; c
	// takes no more frames, and its reader reads it to its end
	// (writeFailed).
	writeBroken atomic.Bool
	once        sync.Once
	byUs        bool  // closed on purpose (replaced, removed, closing); valid after dead
	cause       error // why it died; valid after dead
	readerDone  chan struct{}
	prev        *conn // the connection it replaced, whose reader must finish first
	unix        bool  // over the same-host Unix socket
	// linkHeld: TCP_USER_TIMEOUT is off while the peer's window is shut
	// (holdLinkTimeout); the link check's alone.
	linkHeld atomic.Bool
	proc     peerProc // the peer's process, on this host (peerProcOf)
	poll     pollState
	raw      syscall.RawConn // a plain socket's (TCP or Unix), for SendNow; else nil
	rw       rawWriter       // small direct frames' writes to raw (poll.go), under owner.wmu
	pr       *pollReader     // a plain socket's reader under fr; else nil

	// rd is held by whoever reads frames from fr and delivers them: the
	// reader goroutine or, on a shared-memory connection (shm, else nil),
	// a caller's progress (progress.go). warned and placer are its. Its
	// Unlock is a release store: a caller's progress that must fence the
	// ring's head it stored before it looks at the writer's flag does so
	// itself, and only when no locked instruction followed that store
	// (Transport.progress).
	rd     hotsync.Mutex
	shm    *shmConn
	warned bool
	// scratch holds the frame a caller's progress read straight from the
	// ring (shmConn.nextFrame), until the next; made at the first.
	scratch []byte
	// polled counts the frames callers' progress delivered from c: under
	// rd, one holder at a time, so an increment needs no locked
	// instruction (bump). removeRing moves it into the transport's count
	// and sets polledOut (both under rd), after which the rare frame a
	// late caller still delivers is counted there.
	polled    atomic.Uint64
	polledOut bool
	place     wire.PlaceFunc // placeWith's, made once
	placer    transport.Placer
	placedLen int // the payload length of the frame placer took
	// afterPlaced: the last frame the reader goroutine read was placed,
	// or one of the transport's own small frames after one (readFrame).
	afterPlaced bool
	// relayBuf is the buffer a large relayed frame to forward is read
	// into (placeRelayed), until readFrame takes it.
	relayBuf *[]byte
	// placeLock is the pair's delivery lock, held from placeWith's check
	// of a placed frame to its delivery (readFrame).
	placeLock *hotsync.Mutex

	// retiring is closed when the connection is retired for being idle
	// (by us or by the peer's goodbye): nothing more is written to it, its
	// reader goes on to the end of stream, and its end is no failure.
	retiring   chan struct{}
	retiredSet atomic.Bool // set as retiring is closed (see deadSet)
	// diedRetired says whether c was retired when it was closed (set by
	// close, read after it): a connection that failed first and was
	// retired after, when its peer redialled on seeing it closed, still
	// failed (connDied counts and logs it).
	diedRetired bool
	retireOnce  sync.Once
	shutOnce    sync.Once // our writing side is shut once (closeWrite)
	// active is set by a frame read or a batch written and cleared by
	// the idle sweeper at each look (idleTicks, the sweeper's own, counts
	// the looks that found it clear).
	active    atomic.Bool
	idleTicks int

	// The pair's stream (resend.go), set by install before c is used:
	// owner is c's peer state, rs the stream of the peer's (peerStream)
	// that c's frames belong to, resumeFrom the number of the
	// first frame the peer has not delivered (0: any we hold). resumed is
	// set once the writer has written the sequence mark and the frames to
	// resend: only then may SendNow and SendDirect write to c. next, the
	// number of the next counted frame read from c (0 before the mark),
	// is the reader's (under rd on a shared-memory connection).
	owner      *peer
	rs         *recvStream
	peerStream uint64
	resumeFrom uint64
	resumed    atomic.Bool
	next       uint64
	// resume and local are the peer's wire.Resume and ours, from the
	// handshake.
	resume, local wire.Resume
}

// markActive sets c.active. Once it is set, a frame pays a load, not a
// locked write: most frames find it set.
func (c *conn) markActive() {
	if !c.active.Load() {
		c.active.Store(true)
	}
}

// newConn makes the connection of a finished handshake, polling for the
// transport's polling time (poll.go).
func (t *Transport) newConn(nc net.Conn, fr *wire.FrameReader, id core.NodeID, initiator bool, remote string) *conn {
	c := &conn{nc: nc, fr: fr, peer: id, initiator: initiator, remote: remote, unix: isUnix(nc),
		dead: make(chan struct{}), readerDone: make(chan struct{}), retiring: make(chan struct{})}
	c.poll.spin = &t.spin
	c.place = c.placeWith(t)
	c.proc = peerProcOf(nc)
	if sc, ok := nc.(*shmConn); ok {
		sc.poll, sc.pollers, sc.working, c.shm = &c.poll, &t.pollers, &t.working, sc
		sc.lazy = &t.lazyReads
	} else if rc, ok := nc.(*recordConn); ok {
		c.raw = rc.setPoll(&c.poll) // below the records
	} else if pr := newPollReader(nc, &c.poll); pr != nil {
		fr.SetReader(pr)
		c.raw, c.pr = pr.raw, pr
	}
	return c
}

// stopped reports whether nothing more may be written to c: it is closed
// or retired.
func (c *conn) stopped() bool { return c.isDead() || c.isRetired() || c.writeBroken.Load() }

// writeFailed handles a failed write to c. A peer that closed its end
// (its process ended: a broken pipe, a shared-memory peer gone) may have
// sent frames that c's reader has not read yet: closing c now would drop
// them with the socket's buffer or the ring's mapping (a peer's last
// message before it exits, lost). So c is only stopped for writing, and
// its reader delivers what is left, meets the end of the stream and
// closes c (connDied). Any other failure closes c at once.
func (c *conn) writeFailed(err error) {
	if peerClosed(err) {
		c.writeBroken.Store(true)
		if c.shm != nil {
			c.shm.poke() // the reader looks at the ring and the peer's end
		}
		return
	}
	c.close(false, err)
}

// peerClosed reports whether a write failed because the peer closed its
// end of the connection.
func peerClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrClosedPipe)
}

// isRetired reports whether c was retired for being idle.
func (c *conn) isRetired() bool { return c.retiredSet.Load() }

// isClosed reports whether ch, a channel that is only ever closed, is.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closeFirst closes ch through once and reports whether this call did.
func closeFirst(once *sync.Once, ch chan struct{}) bool {
	first := false
	once.Do(func() {
		first = true
		close(ch)
	})
	return first
}

// retire marks c retired; it reports whether this call did.
func (c *conn) retire() bool {
	first := false
	c.retireOnce.Do(func() {
		first = true
		c.retiredSet.Store(true)
		close(c.retiring)
	})
	return first
}

// isDead reports whether c has been closed.
func (c *conn) isDead() bool { return c.deadSet.Load() }

// close closes c once, recording whether it was on purpose and why.
func (c *conn) close(byUs bool, cause error) {
	c.once.Do(func() {
		c.byUs, c.cause, c.diedRetired = byUs, cause, c.isRetired()
		c.deadSet.Store(true) // after byUs and cause: whoever sees it may read them
		close(c.dead)
		c.nc.Close()
	})
}
