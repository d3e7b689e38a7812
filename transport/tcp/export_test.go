package tcp

import (
	"context"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// WriterRuns returns how many times t's writers started a run over a
// connection.
func WriterRuns(t *Transport) uint64 { return t.writerRuns.Load() }

// FlushWritten is Flush that waits only until the frames are written, not
// delivered: for a test that holds its peer's reader.
func FlushWritten(ctx context.Context, t *Transport) error { return t.flush(ctx, false) }

// ShmInProcess lets transports of this process use shared memory between
// them (by default they keep to the Unix socket).
func ShmInProcess(c *Config) { c.ShmInProcess = true }

// ShmSupported reports whether this system has the shared-memory path.
const ShmSupported = shmSupported

// ShmInboundFull reports whether t's connection in use to id runs over
// shared memory and the ring from id is full.
func ShmInboundFull(t *Transport, id core.NodeID) bool {
	t.mu.Lock()
	var c *conn
	if p := t.peers[id]; p != nil {
		c = p.cur
	}
	t.mu.Unlock()
	if c == nil {
		return false
	}
	sc, ok := c.nc.(*shmConn)
	if !ok {
		return false
	}
	sc.use.RLock()
	defer sc.use.RUnlock()
	if sc.isClosed() {
		return false
	}
	// The writer waits once no room for a record's header, a byte and its
	// padding is left.
	return sc.in.size-(sc.in.u64(offTail).Load()-sc.in.u64(offHead).Load()) < recHead+recAlign
}

// WriterActive reports whether t has a writer goroutine (and queues) for
// node id.
func WriterActive(t *Transport, id core.NodeID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	return p != nil && p.active
}

// NowPartial returns how many frames SendNow wrote in part, leaving the
// rest to the writer.
func NowPartial(t *Transport) uint64 { return t.nowPartial.Load() }

// ConnStopped reports whether t's connection in use to id takes no more
// frames (closed, retired, or its writes failed) while still in use.
func ConnStopped(t *Transport, id core.NodeID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	return p != nil && p.cur != nil && p.cur.stopped()
}

// ExpireRead sets the read deadline of t's connection in use to id to now
// (as the replacement of a connection does, after a while, to one whose
// peer does not end its stream) and returns a report of whether that
// connection ended (another may have replaced it meanwhile); nil if
// there is none.
func ExpireRead(t *Transport, id core.NodeID) (ended func() bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	if p == nil || p.cur == nil {
		return nil
	}
	c := p.cur
	c.nc.SetReadDeadline(time.Now())
	return c.isDead
}

// SocketBuffers returns the kernel's receive and send buffer sizes of
// t's connection in use to id, as getsockopt reports them (Linux reports
// twice what was set); ok is false without a connection over a plain
// socket.
func SocketBuffers(t *Transport, id core.NodeID) (rcv, snd int, ok bool) {
	t.mu.Lock()
	var c *conn
	if p := t.peers[id]; p != nil {
		c = p.cur
	}
	t.mu.Unlock()
	if c == nil || c.raw == nil {
		return 0, 0, false
	}
	var rerr, serr error
	err := c.raw.Control(func(fd uintptr) {
		rcv, rerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		snd, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	})
	return rcv, snd, err == nil && rerr == nil && serr == nil
}

// LockFree reports whether a send to id finds its peer and connection
// without the transport's lock (current's copy of the peer table).
func LockFree(t *Transport, id core.NodeID) bool {
	m := t.byID.Load()
	if m == nil {
		return false
	}
	p := (*m)[id]
	t.mu.Lock()
	defer t.mu.Unlock()
	return p != nil && p == t.peers[id] && p.live.Load() != nil
}

// RefusalBurst is how many connections a listener refuses at once before
// its budget paces it.
const RefusalBurst = refusalBurst

// SetForwardHook makes t call hook with each relayed payload it forwards,
// before it queues it; hook may alter it (a relay that tampers) or block
// (a relay that stalls). Set it before t forwards anything.
func SetForwardHook(t *Transport, hook func(payload []byte)) { t.rt.forwardHook = hook }

// StallLinks makes t's links to the nodes of ids look stalled to
// checkLinks from now on, and fails t's dials to them as a cut would,
// without breaking the connections in use (BlockPeer does): the link's
// failure is for checkLinks to find.
func StallLinks(t *Transport, ids ...core.NodeID) {
	t.rt.mu.Lock()
	defer t.rt.mu.Unlock()
	if t.rt.stalled == nil {
		t.rt.stalled = map[core.NodeID]bool{}
	}
	for _, id := range ids {
		t.rt.blocked[id] = true
		t.rt.stalled[id] = true
	}
}

// LinkStalls returns how many connections t broke for a stalled link.
func LinkStalls(t *Transport) uint64 { return t.rt.linkStalls.Load() }
