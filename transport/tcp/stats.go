package tcp

import (
	"github.com/cohort-mp/cohort/transport/hotsync"
	"sync/atomic"
)

// Stats counts what a transport has done since it started.
type Stats struct {
	Dials            uint64 // dial attempts
	DialFailures     uint64 // dial attempts that failed (not counting tie-breaks)
	Accepted         uint64 // inbound connections authenticated
	Refused          uint64 // inbound connections refused by the handshake
	TieBreaks        uint64 // inbound connections refused because ours won
	Shed             uint64 // inbound connections closed at once, beyond Config.MaxHandshakes or MaxHandshakesPerSource
	Established      uint64 // connections put in use (both directions)
	Unix             uint64 // of Established, those over the same-host Unix socket
	Shm              uint64 // of Unix, those whose frames run over shared memory
	ShmRefused       uint64 // rings offered by peers and refused by our checks
	Lost             uint64 // connections that died not on purpose
	Retired          uint64 // connections closed for being idle, by either side (Config.IdleTimeout)
	Malformed        uint64 // connections closed for a malformed frame
	Misaddressed     uint64 // frames dropped: wrong source or destination
	FramesIn         uint64 // frames delivered to the handler
	FramesOut        uint64 // frames handed to a connection's writer
	Direct           uint64 // of FramesOut, those SendDirect wrote itself
	Now              uint64 // of FramesOut, those SendNow wrote itself (now.go)
	Lent             uint64 // of Direct, those whose body the resend log held by reference (TryLendDirect, TryLendDirectAny)
	Placed           uint64 // of FramesIn, those whose payload was read into the handler's memory (transport.Placer)
	Polled           uint64 // of FramesIn, those read and delivered by a caller's PollUntil
	Resent           uint64 // frames written again on a new connection (not in FramesOut)
	Duplicates       uint64 // frames read again after a reconnection and dropped (not in FramesIn)
	Acks             uint64 // acknowledgements written (wire.KindAck)
	Restarts         uint64 // peers seen with a new incarnation (a restarted process): their streams started afresh
	Integrity        uint64 // of Established, those whose frames go in authenticated records (Config.Integrity)
	Tampered         uint64 // connections closed for a record that failed its integrity check (altered, replayed or reordered on the way)
	Relayed          uint64 // frames of ours queued to a relay (wire.KindRelay), resent ones included
	Forwarded        uint64 // relayed frames of others forwarded to their destination
	RelayDropped     uint64 // relayed frames dropped for want of a direct link to their destination (or of room)
	RelayTagFailures uint64 // relayed frames for us dropped: their end-to-end tag did not verify
	RelayGaps        uint64 // relayed frames for us dropped: not the next of their pair's stream (after a loss, or a stream unknown to the origin)
	PathChanges      uint64 // pairs moved to a relay, another relay, or back to the direct link
	Conns            int    // connections in use now
	Writers          int    // peers with a writer goroutine and queues now
}

// stats are the transport's counters. A frame is counted once on the
// data path: framesIn counts the frames the reader goroutines delivered,
// polled those callers' progress did (Stats.FramesIn is their sum);
// framesOut counts the frames the writer goroutines wrote, direct those
// written on the caller's goroutine, now those SendNow wrote (Stats.FramesOut
// is their sum).
type stats struct {
	dials, dialFailures, accepted, refused, tieBreaks, established, unix, lost, retired, malformed,
	misaddressed, framesIn, framesOut, direct, now, placed, polled, shm, shmRefused, shed,
	resent, duplicates, acks, restarts, integrity, tampered atomic.Uint64
	relayed, forwarded, relayDropped, relayTagFailures, relayGaps, pathChanges atomic.Uint64
	lent                                                                       atomic.Uint64
}

// bump adds one to a counter that one goroutine at a time writes (under
// a lock it holds) and any may read: a load and an ordered store, a
// plain move on amd64 (store_tso.go), where Add is a locked instruction.
func bump(p *atomic.Uint64) { hotsync.StoreRelease64(p, p.Load()+1) }

// Stats returns the current counters.
func (t *Transport) Stats() Stats {
	s := Stats{
		Dials: t.stats.dials.Load(), DialFailures: t.stats.dialFailures.Load(),
		Accepted: t.stats.accepted.Load(), Refused: t.stats.refused.Load(),
		TieBreaks: t.stats.tieBreaks.Load(), Shed: t.stats.shed.Load(), Established: t.stats.established.Load(),
		Unix: t.stats.unix.Load(), Shm: t.stats.shm.Load(), ShmRefused: t.stats.shmRefused.Load(),
		Lost: t.stats.lost.Load(), Retired: t.stats.retired.Load(), Malformed: t.stats.malformed.Load(),
		Misaddressed: t.stats.misaddressed.Load(),
		FramesIn:     t.stats.framesIn.Load(),
		FramesOut:    t.stats.framesOut.Load() + t.stats.direct.Load() + t.stats.now.Load(),
		Direct:       t.stats.direct.Load(), Now: t.stats.now.Load(), Placed: t.stats.placed.Load(),
		Lent:   t.stats.lent.Load(),
		Resent: t.stats.resent.Load(), Duplicates: t.stats.duplicates.Load(),
		Acks: t.stats.acks.Load(), Restarts: t.stats.restarts.Load(),
		Integrity: t.stats.integrity.Load(), Tampered: t.stats.tampered.Load(),
		Relayed: t.stats.relayed.Load(), Forwarded: t.stats.forwarded.Load(),
		RelayDropped: t.stats.relayDropped.Load(), RelayTagFailures: t.stats.relayTagFailures.Load(),
		RelayGaps: t.stats.relayGaps.Load(), PathChanges: t.stats.pathChanges.Load(),
	}
	t.mu.Lock() // removeRing moves a connection's polled count under it
	s.Polled = t.stats.polled.Load()
	if rings := t.rings.Load(); rings != nil {
		for _, c := range *rings {
			s.Polled += c.polled.Load()
		}
	}
	s.FramesIn += s.Polled
	for _, p := range t.peers {
		n := p.directLines.Load()
		s.Direct += n
		s.FramesOut += n
		if p.cur != nil {
			s.Conns++
		}
		if p.active {
			s.Writers++
		}
	}
	t.mu.Unlock()
	return s
}
