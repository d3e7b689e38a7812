package tcp

import (
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// Idle connections (Config.IdleTimeout).
//
// A connection on which nothing was read or written for IdleTimeout is
// retired, without loss and without a hint to the failure detector:
//
//  1. The side that notices (the sweeper) takes the peer's write lock when
//     nothing is queued or being written, stops using the connection (new
//     frames go to a new one, dialled as usual), writes a goodbye frame
//     (wire.KindGoodbye) and shuts its writing side.
//  2. The peer's reader, on the goodbye, stops using the connection the
//     same way: it waits for its writer to finish the batch in hand (those
//     frames are still read by the first side), then shuts its own writing
//     side.
//  3. Both readers go on to the end of stream, delivering every frame
//     written before it, and the connection closes quietly. A new
//     connection's reader waits for the retired one's (peer.draining), so
//     frames of one sender stay in order across the change.
//
// Both sides may retire the same connection at once; each then reads the
// other's goodbye and end of stream. A first side whose peer never shuts
// its side (a peer that hangs) closes the connection HandshakeTimeout +
// IdleTimeout after the goodbye.

// sweepIdle retires the connections idle for Config.IdleTimeout. It looks
// every quarter of it, so a connection is retired between IdleTimeout and
// 1.25·IdleTimeout after its last frame.
func (t *Transport) sweepIdle() {
	defer t.wg.Done()
	const looks = 4
	tick := time.NewTicker(max(t.cfg.IdleTimeout/looks, time.Millisecond))
	defer tick.Stop()
	type active struct {
		p *peer
		c *conn
	}
	var conns []active
	for {
		select {
		case <-tick.C:
		case <-t.closing:
			return
		}
		conns = conns[:0]
		t.mu.Lock()
		for _, p := range t.peers {
			if p.cur != nil && !p.kept && !p.dialOutOnly {
				conns = append(conns, active{p, p.cur})
			}
		}
		t.mu.Unlock()
		for _, a := range conns {
			c := a.c
			if c.active.Swap(false) {
				c.idleTicks = 0
				continue
			}
			if c.idleTicks++; c.idleTicks >= looks {
				t.retireIdle(a.p, c)
			}
		}
	}
}

// retireIdle retires c, p's connection in use, if nothing is queued for p
// or being written to it (step 1 above).
func (t *Transport) retireIdle(p *peer, c *conn) {
	if !p.wmu.TryLock() {
		return // a writer is busy: not idle after all
	}
	defer p.wmu.Unlock()
	t.mu.Lock()
	ok := !t.closed && t.peers[p.id] == p && p.cur == c && !c.isDead() &&
		p.flushed.Load() == p.accepted.Load() && len(p.q) == 0 && len(p.hq) == 0 && p.log.empty()
	if ok {
		p.setCur(nil)
		p.draining = c
	}
	t.mu.Unlock()
	if !ok {
		return
	}
	// The goodbye goes out before c is marked retired, which is what lets
	// our writer go on to dial a new connection: the peer reads it on c
	// before our next connection's hello.
	t.log.Debug("tcp: retiring an idle connection", "peer", uint32(p.id), "remote", c.remote)
	var goodbye []byte
	if r := c.rs; r != nil && r.unacked() {
		// What we delivered is acknowledged first: the peer then has
		// nothing left to resend, and no reason to dial again.
		n := r.recvd.Load()
		goodbye = wire.AppendFrame(goodbye, wire.Frame{Kind: wire.KindAck, Src: t.self, Dst: p.id, Payload: wire.AppendCount(nil, n)})
		r.ackedN.Store(n)
		t.stats.acks.Add(1)
	}
	goodbye = wire.AppendFrame(goodbye, wire.Frame{Kind: wire.KindGoodbye, Src: t.self, Dst: p.id})
	_, err := c.nc.Write(goodbye)
	if c.retire() {
		t.stats.retired.Add(1)
	}
	if err != nil {
		c.close(true, err)
	} else {
		t.closeWrite(c)
		c.nc.SetReadDeadline(time.Now().Add(t.cfg.HandshakeTimeout + t.cfg.IdleTimeout))
	}
	p.signal()
}

// retireReplaced retires old, the connection that c, a new connection
// from the same peer, replaces. The peer dials again when it retired old
// itself (its goodbye may still be on its way to our reader) or when it
// restarted: either way old is written no more and is shut on our side
// once the writer's batch in hand is out, and its reader goes on to the
// end of stream (c's reader waits for it) within HandshakeTimeout, which
// bounds a connection to a process that vanished with its host.
func (t *Transport) retireReplaced(p *peer, old *conn) {
	if !old.retire() {
		return // retired already (by us or by the peer's goodbye)
	}
	t.log.Debug("tcp: connection replaced", "peer", uint32(p.id), "remote", old.remote)
	old.nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		p.wmu.Lock()
		if p.restConn == old {
			t.writeRest(p)
		}
		t.closeWrite(old)
		p.wmu.Unlock()
	}()
}

// peerRetired handles the peer's goodbye on c (step 2 above).
func (t *Transport) peerRetired(c *conn) {
	t.mu.Lock()
	p := t.peers[c.peer]
	if p != nil && p.cur == c {
		p.setCur(nil)
		p.draining = c
	}
	first := c.retire()
	t.mu.Unlock()
	t.log.Debug("tcp: goodbye from the peer", "peer", uint32(c.peer), "remote", c.remote, "first", first)
	if !first {
		return // we retired it too, and shut our side already
	}
	t.stats.retired.Add(1)
	if p == nil {
		c.close(true, nil) // the peer was removed meanwhile
		return
	}
	p.wmu.Lock() // the writer's batch in hand is flushed before our end of stream
	if p.restConn == c {
		t.writeRest(p)
	}
	t.closeWrite(c)
	p.wmu.Unlock()
	p.signal()
}

// closeWrite shuts c's writing side (TCP: FIN; TLS: close_notify), once,
// so the peer reads to the end of stream. A connection that cannot be
// half-closed is closed.
func (t *Transport) closeWrite(c *conn) {
	c.shutOnce.Do(func() {
		if hc, ok := c.nc.(interface{ CloseWrite() error }); ok {
			if err := hc.CloseWrite(); err == nil {
				return
			}
		}
		c.close(true, nil)
	})
}
