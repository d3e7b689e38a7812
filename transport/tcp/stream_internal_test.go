package tcp

import (
	"crypto/rand"
	"net"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// fakeInbound is a peer's dial of tr over its Unix socket, driven by hand:
// it runs the initiator's handshake as node peer up to the transport's
// resume, which it returns, and leaves the ring step to finishRings.
type fakeInbound struct {
	rc *rightsConn
	fr *wire.FrameReader
}

func dialFake(t *testing.T, tr *Transport, peer core.NodeID) (*fakeInbound, wire.Resume) {
	t.Helper()
	nc, err := net.Dial("unix", tr.UnixAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(transporttest.Timeout))
	rc := newRightsConn(nc.(*net.UnixConn))
	t.Cleanup(rc.stopCollecting)
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
	self := remote.Node
	if err := writeFlush(fw, wire.Frame{Src: peer, Dst: self}, wire.Proof{MAC: wire.ComputeProof(shmTestSecret, local, remote, true)}); err != nil {
		t.Fatal(err)
	}
	if err := writeFlush(fw, wire.Frame{Src: peer, Dst: self}, wire.Resume{Stream: uint64(peer)}); err != nil {
		t.Fatal(err)
	}
	if err := readProof(fr, shmTestSecret, local, remote, true); err != nil {
		t.Fatal(err)
	}
	theirs, err := readResume(fr)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeInbound{rc: rc, fr: fr}, theirs
}

// finishRings ends the handshake's ring step, offering no ring: the
// transport then installs the connection (on its socket).
func (f *fakeInbound) finishRings(t *testing.T, peer, self core.NodeID) {
	t.Helper()
	if _, err := f.rc.Write(ringFrame(peer, self, wire.Ring{})); err != nil {
		t.Fatal(err)
	}
	if _, err := readRing(f.fr, self, peer, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rc.Write(ringFrame(peer, self, wire.Ring{Answer: true})); err != nil {
		t.Fatal(err)
	}
	if _, err := readRing(f.fr, self, peer, true); err != nil {
		t.Fatal(err)
	}
}

// A transport announces one stream to a peer in every handshake, also
// when the peer's state is made while a handshake with it runs: on one
// host under load, a rank's first connection from a peer may be accepted
// before the rank has taken the job's address table, and its SetPeer (or
// a Send) then comes while the handshake ends. A second handshake that
// announced another stream would make the peer take the rank for a new
// incarnation: it would start the pair's streams afresh, dropping the
// frames it had written and not yet seen acknowledged, and the rank would
// then drop its next ones as duplicates; the peer waiting for one of
// those waits for good (a job of three ranks hung in its first
// Allreduce that way, every rank alive).
func TestOneStreamAnnouncedPerPeer(t *testing.T) {
	if !unixSupported {
		t.Skip("no abstract Unix sockets here")
	}
	const self, peer = core.NodeID(1), core.NodeID(2)
	cfg := DefaultConfig()
	cfg.Node, cfg.JobID, cfg.Secret = self, shmTestJob, shmTestSecret
	tr, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	first, announced := dialFake(t, tr, peer)
	// The handshake waits for the ring step; the job's address table
	// comes meanwhile.
	tr.SetPeer(peer, "127.0.0.1:1")
	first.finishRings(t, peer, self)

	second, again := dialFake(t, tr, peer)
	defer second.rc.Close()
	if again.Stream != announced.Stream {
		t.Fatalf("the second handshake announced stream %#x, the first %#x: the peer would take us for a restarted process", again.Stream, announced.Stream)
	}
	if st := tr.Stats(); st.Restarts != 0 {
		t.Fatalf("stats %+v: the transport saw the peer restart", st)
	}
}
