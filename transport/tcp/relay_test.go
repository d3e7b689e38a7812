package tcp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/tcp/tcptest"
	"github.com/cohort-mp/cohort/wire"
)

// The tests in this file check relaying (relay.go): a pair whose direct
// link is cut exchanges its frames through a third node, once each and in
// order, across a relay's death, a tampering relay, the link's healing
// and a node nobody can dial.

// relayNode is a transport of a relay test and what its handler saw: the
// numbered frames of each sender, checked for order, and path changes.
type relayNode struct {
	tr *tcp.Transport

	mu      sync.Mutex
	next    map[core.NodeID]uint64 // the next number expected per sender
	bad     error
	paths   []core.Event
	control []uint64 // the data frames delivered before each control frame
	got     atomic.Uint64
	onData  func(n uint64)
}

var ctlKind = core.MakeKind(core.ProtoFD, 99)

func (n *relayNode) Deliver(f wire.Frame) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.Kind == ctlKind {
		n.control = append(n.control, n.next[f.Src])
		return
	}
	if len(f.Payload) < 8 {
		n.bad = fmt.Errorf("short frame %v", f)
		return
	}
	got, want := binary.LittleEndian.Uint64(f.Payload), n.next[f.Src]
	if got != want && n.bad == nil {
		n.bad = fmt.Errorf("from %v: got frame %d, want %d: lost, duplicated or reordered", f.Src, got, want)
	}
	n.next[f.Src] = got + 1
	n.got.Add(1)
	if n.onData != nil {
		n.onData(got)
	}
}

func (n *relayNode) Hint(core.PeerHint) {}

// Path records path changes (transport.PathReporter).
func (n *relayNode) Path(ev core.Event) {
	n.mu.Lock()
	n.paths = append(n.paths, ev)
	n.mu.Unlock()
}

func (n *relayNode) received(from core.NodeID) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.next[from]
}

func (n *relayNode) check(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.bad != nil {
		t.Fatalf("node %v: %v", n.tr.Self(), n.bad)
	}
}

func (n *relayNode) pathEvents() []core.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.paths)
}

// relayMesh starts transports with ids, each knowing every other's
// address; edit, if not nil, changes each configuration first.
func relayMesh(t *testing.T, ids []core.NodeID, edit func(cfg *tcp.Config)) map[core.NodeID]*relayNode {
	t.Helper()
	nodes := map[core.NodeID]*relayNode{}
	for _, id := range ids {
		cfg := config(id, nil)
		cfg.NoUnix = true
		if edit != nil {
			edit(&cfg)
		}
		n := &relayNode{tr: listen(t, cfg), next: map[core.NodeID]uint64{}}
		n.tr.SetHandler(n)
		nodes[id] = n
	}
	for _, a := range ids {
		for _, b := range ids {
			if a != b {
				nodes[a].tr.SetPeer(b, nodes[b].tr.Addr())
			}
		}
	}
	return nodes
}

// cut cuts the direct link between a and b both ways.
func cut(nodes map[core.NodeID]*relayNode, a, b core.NodeID, blocked bool) {
	nodes[a].tr.BlockPeer(b, blocked)
	nodes[b].tr.BlockPeer(a, blocked)
}

// keep has each node of from keep a connection to each of to, and waits
// for them.
func keep(t *testing.T, nodes map[core.NodeID]*relayNode, from []core.NodeID, to ...core.NodeID) {
	t.Helper()
	for _, a := range from {
		nodes[a].tr.Keep(to)
	}
	for _, a := range from {
		for _, b := range to {
			waitFor(t, fmt.Sprintf("%v connected to %v", a, b), func() bool { return nodes[a].tr.Connected(b) })
		}
	}
}

// stream sends n numbered frames of size bytes from a to b.
func stream(ctx context.Context, a *tcp.Transport, to core.NodeID, n, size int) error {
	buf := make([]byte, size)
	for i := range n {
		binary.LittleEndian.PutUint64(buf, uint64(i))
		if err := a.SendCopy(ctx, to, wire.Frame{Kind: seqKind, Payload: buf}); err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
	}
	return nil
}

// relayExchange streams n frames each way between a and b, concurrently, and
// waits until both have them all; during, if not nil, runs meanwhile.
func relayExchange(t *testing.T, nodes map[core.NodeID]*relayNode, a, b core.NodeID, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- stream(ctx, nodes[a].tr, b, n, size) }()
	go func() { errs <- stream(ctx, nodes[b].tr, a, n, size) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitDelivered(t, nodes, a, b, uint64(n))
	waitDelivered(t, nodes, b, a, uint64(n))
}

func waitDelivered(t *testing.T, nodes map[core.NodeID]*relayNode, from, to core.NodeID, n uint64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for nodes[to].received(from) < n {
		nodes[to].check(t)
		if time.Now().After(deadline) {
			t.Fatalf("%v has %d of %v's %d frames", to, nodes[to].received(from), from, n)
		}
		time.Sleep(time.Millisecond)
	}
	nodes[to].check(t)
	if got := nodes[to].received(from); got != n {
		t.Fatalf("%v has %d of %v's frames, want %d", to, got, from, n)
	}
}

func hasEvent(evs []core.Event, want core.Event) bool {
	return slices.Contains(evs, want)
}

// TestRelayLosesNothing cuts the direct link between 1 and 3 and streams
// 100,000 numbered frames each way between them: all go through 2, each
// delivered once and in order, and both ends report the pair relayed.
func TestRelayLosesNothing(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3}, nil)
	cut(nodes, 1, 3, true)
	keep(t, nodes, []core.NodeID{1, 3}, 2)
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	relayExchange(t, nodes, 1, 3, n, 64)
	a, b, c := nodes[1].tr.Stats(), nodes[2].tr.Stats(), nodes[3].tr.Stats()
	if a.Relayed < uint64(n) || c.Relayed < uint64(n) || b.Forwarded < 2*uint64(n) {
		t.Errorf("relayed %d and %d, forwarded %d: want at least %d each way through 2", a.Relayed, c.Relayed, b.Forwarded, n)
	}
	if nodes[1].tr.Connected(3) || nodes[3].tr.Connected(1) {
		t.Error("the cut pair has a direct connection")
	}
	if !hasEvent(nodes[1].pathEvents(), transport.PairRelayed{Peer: 3, Via: 2}) ||
		!hasEvent(nodes[3].pathEvents(), transport.PairRelayed{Peer: 1, Via: 2}) {
		t.Errorf("path events %v and %v: want each end relayed through 2", nodes[1].pathEvents(), nodes[3].pathEvents())
	}
	t.Logf("1: %+v", a)
}

// TestRelayLargeFrames relays frames large enough for the relay to read
// each into a buffer of its own, which it forwards without a copy, and
// for the origin to hold each in its log by reference (and, authenticated
// only, to write it from where it is), encrypted end to end or not.
func TestRelayLargeFrames(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			tc := tcptest.SelfSignedTLS(t)
			nodes := relayMesh(t, []core.NodeID{1, 2, 3}, func(cfg *tcp.Config) {
				if sealed {
					cfg.TLS = tc
				}
			})
			cut(nodes, 1, 3, true)
			keep(t, nodes, []core.NodeID{1, 3}, 2)
			relayExchange(t, nodes, 1, 3, 300, 100<<10)
			if f := nodes[2].tr.Stats().Forwarded; f < 600 {
				t.Errorf("2 forwarded %d frames, want 600 or more", f)
			}
		})
	}
}

// TestRelayOverRecords relays over connections whose frames go in
// authenticated records (as between hosts), the relayed frames' tags
// inside the records'.
func TestRelayOverRecords(t *testing.T) {
	for _, size := range []int{64, 100 << 10} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			nodes := relayMesh(t, []core.NodeID{1, 2, 3}, func(cfg *tcp.Config) { cfg.Integrity = tcp.IntegrityAlways })
			cut(nodes, 1, 3, true)
			keep(t, nodes, []core.NodeID{1, 3}, 2)
			relayExchange(t, nodes, 1, 3, 500, size)
			if s := nodes[2].tr.Stats(); s.Forwarded < 1000 || s.Integrity == 0 {
				t.Errorf("2 forwarded %d frames over %d connections in records; want 1,000 or more over some", s.Forwarded, s.Integrity)
			}
		})
	}
}

// TestRelayMovesOnRelayDeath closes the relay in the middle of a stream:
// the pair moves to the other relay, losing and duplicating nothing.
func TestRelayMovesOnRelayDeath(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3, 4}, nil)
	cut(nodes, 1, 3, true)
	keep(t, nodes, []core.NodeID{1, 3}, 2, 4)
	const n = 30_000
	var once sync.Once
	closed := make(chan struct{})
	nodes[3].onData = func(i uint64) {
		if i == n/3 {
			once.Do(func() { go func() { nodes[2].tr.Close(); close(closed) }() })
		}
	}
	relayExchange(t, nodes, 1, 3, n, 64)
	<-closed
	if !hasEvent(nodes[1].pathEvents(), transport.PairRelayed{Peer: 3, Via: 2}) ||
		!hasEvent(nodes[1].pathEvents(), transport.PairRelayed{Peer: 3, Via: 4}) {
		t.Errorf("path events of 1: %v; want relayed through 2, then 4", nodes[1].pathEvents())
	}
	if f := nodes[4].tr.Stats().Forwarded; f == 0 {
		t.Error("4 forwarded nothing")
	}
	if s := nodes[1].tr.Stats(); s.PathChanges < 2 {
		t.Errorf("1 counted %d path changes, want 2 or more", s.PathChanges)
	}
}

// TestRelayHealsToDirect restores the cut link in the middle of a stream:
// the pair goes back to a direct connection and reports it, and every
// frame arrives once, in order.
func TestRelayHealsToDirect(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3}, nil)
	cut(nodes, 1, 3, true)
	keep(t, nodes, []core.NodeID{1, 3}, 2)
	const n = 30_000
	var once sync.Once
	nodes[3].onData = func(i uint64) {
		if i == n/3 {
			once.Do(func() { go cut(nodes, 1, 3, false) })
		}
	}
	relayExchange(t, nodes, 1, 3, n, 64)
	for _, e := range [][2]core.NodeID{{1, 3}, {3, 1}} {
		waitFor(t, fmt.Sprintf("PairDirect at %v", e[0]), func() bool {
			return hasEvent(nodes[e[0]].pathEvents(), transport.PairDirect{Peer: e[1]})
		})
	}
	// Once direct, frames no longer go through a relay.
	relayed1, relayed3 := nodes[1].tr.Stats().Relayed, nodes[3].tr.Stats().Relayed
	ctx := context.Background()
	for i := range 1000 {
		body := binary.LittleEndian.AppendUint64(nil, uint64(n+i))
		if err := nodes[1].tr.Send(ctx, 3, wire.Frame{Kind: seqKind, Payload: body}); err != nil {
			t.Fatal(err)
		}
		if err := nodes[3].tr.Send(ctx, 1, wire.Frame{Kind: seqKind, Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	waitDelivered(t, nodes, 1, 3, n+1000)
	waitDelivered(t, nodes, 3, 1, n+1000)
	if r1, r3 := nodes[1].tr.Stats().Relayed, nodes[3].tr.Stats().Relayed; r1 != relayed1 || r3 != relayed3 {
		t.Errorf("1 and 3 relayed %d and %d frames after the pair went direct", r1-relayed1, r3-relayed3)
	}
	if !nodes[1].tr.Connected(3) {
		t.Error("1 has no connection to 3")
	}
	if s := nodes[1].tr.Stats(); s.PathChanges < 2 || s.Relayed == 0 {
		t.Errorf("1: %d path changes, %d relayed; want 2 or more, and some", s.PathChanges, s.Relayed)
	}
}

// TestRelayTamperingDropped has the relay alter one frame it forwards:
// the destination drops it on its end-to-end check and counts it, and
// the origin's retransmission delivers the genuine one in its place.
func TestRelayTamperingDropped(t *testing.T) {
	for _, c := range []struct {
		sealed bool
		size   int
	}{{false, 64}, {true, 64}, {false, 64 << 10}, {true, 64 << 10}} {
		sealed := c.sealed
		t.Run(fmt.Sprintf("sealed=%v/size=%d", sealed, c.size), func(t *testing.T) {
			tc := tcptest.SelfSignedTLS(t)
			nodes := relayMesh(t, []core.NodeID{1, 2, 3}, func(cfg *tcp.Config) {
				if sealed {
					cfg.TLS = tc
				}
			})
			cut(nodes, 1, 3, true)
			var altered atomic.Bool
			tcp.SetForwardHook(nodes[2].tr, func(p []byte) {
				// Frame 50 of 1's stream, the first time it passes for 3's
				// stream (before 1 learns it, 3 drops every frame anyway).
				h, _, _, _, err := wire.DecodeRelay(p)
				if err == nil && h.Origin == 1 && h.DstStream != 0 && h.Seq == 50 && !altered.Swap(true) {
					p[len(p)/2] ^= 1
				}
			})
			keep(t, nodes, []core.NodeID{1, 3}, 2)
			n := 1000
			if c.size > 4<<10 {
				n = 200
			}
			ctx := context.Background()
			if err := stream(ctx, nodes[1].tr, 3, n, c.size); err != nil {
				t.Fatal(err)
			}
			waitDelivered(t, nodes, 1, 3, uint64(n))
			s := nodes[3].tr.Stats()
			if !altered.Load() || s.RelayTagFailures != 1 {
				t.Errorf("3 counted %d tag failures, want 1 (altered: %v)", s.RelayTagFailures, altered.Load())
			}
			if s.RelayGaps == 0 {
				t.Error("3 counted no frame dropped after the altered one's gap")
			}
		})
	}
}

// TestRelayToDialOutOnly reaches a node that accepts no connection and
// cannot dial us either through the node it dialled.
func TestRelayToDialOutOnly(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3}, func(cfg *tcp.Config) {
		if cfg.Node == 3 {
			cfg.DialOutOnly = true
		}
	})
	cut(nodes, 1, 3, true)
	waitFor(t, "3 connected to 2", func() bool { return nodes[3].tr.Connected(2) })
	keep(t, nodes, []core.NodeID{1}, 2)
	relayExchange(t, nodes, 1, 3, 5000, 64)
	if nodes[2].tr.Stats().Forwarded < 10000 {
		t.Errorf("2 forwarded %d frames, want 10,000 or more", nodes[2].tr.Stats().Forwarded)
	}
}

// TestRelayControlAhead stalls the relay while a backlog of data frames
// waits at the origin, then sends a control frame: it is delivered before
// most of the backlog, as on a direct connection.
func TestRelayControlAhead(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3}, func(cfg *tcp.Config) {
		cfg.SocketBuffer = 64 << 10
	})
	cut(nodes, 1, 3, true)
	release := make(chan struct{})
	var held atomic.Bool
	tcp.SetForwardHook(nodes[2].tr, func([]byte) {
		if !held.Swap(true) {
			<-release
		}
	})
	keep(t, nodes, []core.NodeID{1, 3}, 2)
	const n = 6000
	ctx := context.Background()
	errs := make(chan error, 1)
	go func() { errs <- stream(ctx, nodes[1].tr, 3, n, 1024) }()
	// The queues to 2 and 3 fill (QueueLen each) while 2 holds a frame:
	// the data stream waits in Send.
	waitFor(t, "the relay holding a frame", held.Load)
	if err := nodes[1].tr.Send(ctx, 3, wire.Frame{Kind: ctlKind, Payload: []byte("ctl")}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, nodes, 1, 3, n)
	nodes[3].mu.Lock()
	before := slices.Clone(nodes[3].control)
	nodes[3].mu.Unlock()
	if len(before) != 1 || before[0] > n/2 {
		t.Fatalf("control frames delivered after %v data frames; want one, after fewer than %d of %d", before, n/2, n)
	}
}

// TestRelayFlappingLink cuts and restores the direct link of a pair 20
// times while it streams frames both ways, each time with a batch of
// frames in flight (of a size drawn from the seed): each change moves
// the pair between the direct and the relayed path, and every frame
// still arrives once and in order.
func TestRelayFlappingLink(t *testing.T) {
	t.Logf("seed %d (replay: go test -run TestRelayFlappingLink -seed %d)", *seed, *seed)
	rng := rand.New(rand.NewPCG(*seed, 47))
	nodes := relayMesh(t, []core.NodeID{1, 2, 3}, nil)
	keep(t, nodes, []core.NodeID{1, 3}, 2)
	// 1 keeps its connection to 3 as well: its writer relays and
	// redials whether or not frames wait.
	nodes[1].tr.Keep([]core.NodeID{2, 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const flips = 20
	sent := 0
	buf := make([]byte, 64)
	for i := range flips {
		batch := 500 + rng.IntN(2000)
		for range batch {
			binary.LittleEndian.PutUint64(buf, uint64(sent))
			for _, e := range [][2]core.NodeID{{1, 3}, {3, 1}} {
				if err := nodes[e[0]].tr.SendCopy(ctx, e[1], wire.Frame{Kind: seqKind, Payload: buf}); err != nil {
					t.Fatal(err)
				}
			}
			sent++
		}
		cutNow := i%2 == 0
		cut(nodes, 1, 3, cutNow) // with the batch in flight
		waitDelivered(t, nodes, 1, 3, uint64(sent))
		waitDelivered(t, nodes, 3, 1, uint64(sent))
		if !cutNow {
			waitFor(t, "the direct link back", func() bool { return nodes[1].tr.Connected(3) })
		}
	}
	// Each cut moved the pair to the relay, each repair back (a repair
	// and the next cut may fall between two looks of the writer, which
	// then reports neither: half of them at least).
	waitFor(t, fmt.Sprintf("%d path changes at 1", flips/2), func() bool { return nodes[1].tr.Stats().PathChanges >= flips/2 })
	if s := nodes[1].tr.Stats(); s.Relayed == 0 {
		t.Error("1 relayed nothing")
	}
}

// TestRelayOnStalledLink has the direct link between 1 and 3 stop
// delivering in the middle of a stream, without the connection dying:
// the link check breaks it and the pair goes through 2, long before the
// link timeout would have declared it dead, losing and duplicating
// nothing.
func TestRelayOnStalledLink(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3}, func(cfg *tcp.Config) { cfg.LinkTimeout = time.Hour })
	keep(t, nodes, []core.NodeID{1, 3}, 2)
	keep(t, nodes, []core.NodeID{1}, 3)
	const n = 20_000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	half := func(from, to core.NodeID, errs chan<- error) {
		errs <- stream(ctx, nodes[from].tr, to, n/2, 64)
	}
	errs := make(chan error, 4)
	go half(1, 3, errs)
	go half(3, 1, errs)
	tcp.StallLinks(nodes[1].tr, 3)
	tcp.StallLinks(nodes[3].tr, 1)
	waitFor(t, "a stalled link broken", func() bool {
		return tcp.LinkStalls(nodes[1].tr)+tcp.LinkStalls(nodes[3].tr) > 0
	})
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The second half numbers on from the first (seqKind frames carry
	// their index).
	for _, e := range [][2]core.NodeID{{1, 3}, {3, 1}} {
		go func() {
			buf := make([]byte, 64)
			for i := n / 2; i < n; i++ {
				binary.LittleEndian.PutUint64(buf, uint64(i))
				if err := nodes[e[0]].tr.SendCopy(ctx, e[1], wire.Frame{Kind: seqKind, Payload: buf}); err != nil {
					errs <- fmt.Errorf("frame %d: %w", i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitDelivered(t, nodes, 1, 3, n)
	waitDelivered(t, nodes, 3, 1, n)
	if !hasEvent(nodes[1].pathEvents(), transport.PairRelayed{Peer: 3, Via: 2}) ||
		!hasEvent(nodes[3].pathEvents(), transport.PairRelayed{Peer: 1, Via: 2}) {
		t.Errorf("path events %v and %v: want each end relayed through 2", nodes[1].pathEvents(), nodes[3].pathEvents())
	}
}

// TestRelayPrefersAnotherHost gives 1 two relays to 3, 2 beside it (a
// same-host Unix connection) and 4 away (TCP): 1 relays through 4,
// though 2 comes first in id order, since a peer beside it most likely
// lost the same links.
func TestRelayPrefersAnotherHost(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3, 4}, func(cfg *tcp.Config) { cfg.NoUnix = cfg.Node == 4 || cfg.Node == 3 })
	cut(nodes, 1, 3, true)
	keep(t, nodes, []core.NodeID{1, 3}, 2, 4)
	relayExchange(t, nodes, 1, 3, 1000, 64)
	if evs := nodes[1].pathEvents(); !hasEvent(evs, transport.PairRelayed{Peer: 3, Via: 4}) || hasEvent(evs, transport.PairRelayed{Peer: 3, Via: 2}) {
		t.Errorf("path events of 1: %v; want relayed through 4 only", evs)
	}
}
