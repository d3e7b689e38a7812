package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// Relayed measures transport/tcp's relayed path against its direct one:
// four transports of this process over loopback TCP, nodes 1 to 4, the
// direct link between 1 and 3 cut (tcp.Transport.BlockPeer), so that
// their frames go through 2, while 1 and 4 talk directly. The two pairs
// are measured in turn, Rounds times, a short stretch of each at a time,
// and each figure is the median of its rounds: on a machine whose load
// moves from one second to the next, both paths see the same load. Both
// use Send on each side (no SendNow or SendDirect, which a relayed pair
// cannot take), so the ratio is the relay's cost alone.
type Relayed struct {
	// Rounds is how many times each path is measured, in turn (0, 1:
	// once).
	Rounds int
	// Iters round trips of an 8-byte frame are timed on each path, over
	// the rounds, after Iters/10.
	Iters int
	// Windows windows of 64 frames of 1 MiB are timed on each path, over
	// the rounds (at least one a round), after 2, each answered by a
	// 4-byte frame.
	Windows int
}

// DefaultRelayed returns the benchmark's default loops.
func DefaultRelayed() *Relayed { return &Relayed{Rounds: 10, Iters: 10000, Windows: 20} }

// RelayedResult is one path's figures.
type RelayedResult struct {
	LatencyMicros float64 // one-way latency of an 8-byte frame (half the mean round trip)
	BandwidthMBs  float64 // 1 MiB frames, 10^6 bytes per second
}

// Goals of the relayed path, as ratios to the direct one.
const (
	RelayedLatencyGoal   = 2.2  // relayed 8 B latency at most this times the direct one
	RelayedBandwidthGoal = 0.45 // relayed 1 MiB bandwidth at least this times the direct one
)

var (
	relayPing = core.MakeKind(core.ProtoTest, 60)
	relayData = core.MakeKind(core.ProtoTest, 61)
	relayAck  = core.MakeKind(core.ProtoTest, 62)
)

// relayEnd is a measured node's handler: it echoes pings (a far end) or
// signals them (the near end), counts data frames and answers a window.
type relayEnd struct {
	tr     *tcp.Transport
	echo   bool
	got    chan struct{}
	frames atomic.Int64
	window int64
}

func (e *relayEnd) Deliver(f wire.Frame) {
	switch f.Kind {
	case relayPing:
		if e.echo {
			e.tr.SendCopy(context.Background(), f.Src, wire.Frame{Kind: relayPing, Payload: f.Payload})
			return
		}
		e.got <- struct{}{}
	case relayData:
		if e.frames.Add(1)%e.window == 0 {
			e.tr.SendCopy(context.Background(), f.Src, wire.Frame{Kind: relayAck, Payload: []byte{0, 0, 0, 0}})
		}
	case relayAck:
		e.got <- struct{}{}
	}
}

func (e *relayEnd) Hint(core.PeerHint) {}

// relayWindow is the frames of 1 MiB sent before an answer is awaited.
const relayWindow = 64

// Measure returns the direct figures, then the relayed ones.
func (b *Relayed) Measure(ctx context.Context) (direct, relayed RelayedResult, err error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	var trs [4]*tcp.Transport
	for i := range trs {
		cfg := tcp.DefaultConfig()
		cfg.Node, cfg.JobID, cfg.Secret = core.NodeID(i+1), "bench-relayed", secret
		cfg.NoUnix = true
		if trs[i], err = tcp.Listen(cfg); err != nil {
			return direct, relayed, err
		}
		defer trs[i].Close()
	}
	for i, a := range trs {
		for j, c := range trs {
			if i != j {
				a.SetPeer(core.NodeID(j+1), c.Addr())
			}
		}
	}
	near := &relayEnd{tr: trs[0], got: make(chan struct{}, 1), window: relayWindow}
	trs[0].SetHandler(near)
	trs[1].SetHandler(transport.HandlerFuncs{})
	for _, i := range []int{2, 3} {
		trs[i].SetHandler(&relayEnd{tr: trs[i], echo: true, got: make(chan struct{}, 1), window: relayWindow})
	}
	trs[0].BlockPeer(3, true)
	trs[2].BlockPeer(1, true)
	trs[0].Keep([]core.NodeID{2, 4})
	trs[2].Keep([]core.NodeID{2})
	paths := []*relayPath{{near: near, to: 4}, {near: near, to: 3}}
	rounds := max(1, b.Rounds)
	for _, p := range paths {
		p.iters, p.windows = max(1, b.Iters/rounds), max(1, b.Windows/rounds)
		if err := p.warm(ctx, b.Iters/10); err != nil {
			return direct, relayed, err
		}
	}
	if !trs[0].Connected(4) || trs[0].Connected(3) || trs[1].Stats().Forwarded == 0 {
		return direct, relayed, fmt.Errorf("the paths are not as set: 1 connected to 4 %v, to 3 %v; node 2 forwarded %d frames",
			trs[0].Connected(4), trs[0].Connected(3), trs[1].Stats().Forwarded)
	}
	var rs [2][]RelayedResult
	for range rounds {
		for i, p := range paths {
			r, err := p.measure(ctx)
			if err != nil {
				return direct, relayed, fmt.Errorf("%s path: %w", [2]string{"direct", "relayed"}[i], err)
			}
			rs[i] = append(rs[i], r)
		}
	}
	return medianRelayed(rs[0]), medianRelayed(rs[1]), nil
}

// relayPath is the measurement of one pair, from near to node to.
type relayPath struct {
	near           *relayEnd
	to             core.NodeID
	iters, windows int
	data           []byte
}

// roundTrip sends a ping to the far end and waits for its echo.
func (p *relayPath) roundTrip(ctx context.Context) error {
	var ping [8]byte
	if err := p.near.tr.Send(ctx, p.to, wire.Frame{Kind: relayPing, Payload: ping[:]}); err != nil {
		return err
	}
	select {
	case <-p.near.got:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendWindow sends a window of 1 MiB frames and waits for its answer.
func (p *relayPath) sendWindow(ctx context.Context) error {
	if p.data == nil {
		p.data = make([]byte, 1<<20)
	}
	for range relayWindow {
		if err := p.near.tr.Send(ctx, p.to, wire.Frame{Kind: relayData, Payload: p.data}); err != nil {
			return err
		}
	}
	select {
	case <-p.near.got:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// warm runs iters round trips and two windows, untimed.
func (p *relayPath) warm(ctx context.Context, iters int) error {
	for range max(1, iters) {
		if err := p.roundTrip(ctx); err != nil {
			return err
		}
	}
	for range 2 {
		if err := p.sendWindow(ctx); err != nil {
			return err
		}
	}
	return nil
}

// measure times p.iters round trips, then p.windows windows.
func (p *relayPath) measure(ctx context.Context) (RelayedResult, error) {
	var r RelayedResult
	start := time.Now()
	for range p.iters {
		if err := p.roundTrip(ctx); err != nil {
			return r, err
		}
	}
	r.LatencyMicros = float64(time.Since(start).Microseconds()) / float64(2*p.iters)
	start = time.Now()
	for range p.windows {
		if err := p.sendWindow(ctx); err != nil {
			return r, err
		}
	}
	r.BandwidthMBs = float64(p.windows*relayWindow*len(p.data)) / time.Since(start).Seconds() / 1e6
	return r, nil
}

// medianRelayed returns the median of each figure of rs.
func medianRelayed(rs []RelayedResult) RelayedResult {
	lat := make([]float64, len(rs))
	bw := make([]float64, len(rs))
	for i, r := range rs {
		lat[i], bw[i] = r.LatencyMicros, r.BandwidthMBs
	}
	slices.Sort(lat)
	slices.Sort(bw)
	return RelayedResult{LatencyMicros: lat[len(lat)/2], BandwidthMBs: bw[len(bw)/2]}
}

// WriteRelayed writes the relayed path's table: both paths' figures,
// their ratios and the goals.
func WriteRelayed(w io.Writer, direct, relayed RelayedResult) {
	lr, br := relayed.LatencyMicros/direct.LatencyMicros, relayed.BandwidthMBs/direct.BandwidthMBs
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintln(w, "relayed path: node 1 of this process to node 4 over loopback TCP (direct) and to node 3 through node 2, their link cut (relayed), in turn (medians of the rounds)")
	fmt.Fprintf(w, "%-24s %12s %12s %10s   %s\n", "", "direct", "relayed", "relayed/direct", "goal")
	fmt.Fprintf(w, "%-24s %12.2f %12.2f %10.2f       ≤ %.2f %s\n", "8 B latency (µs)", direct.LatencyMicros, relayed.LatencyMicros, lr, RelayedLatencyGoal, verdict(lr <= RelayedLatencyGoal))
	fmt.Fprintf(w, "%-24s %12.0f %12.0f %10.2f       ≥ %.2f %s\n", "1 MiB bandwidth (MB/s)", direct.BandwidthMBs, relayed.BandwidthMBs, br, RelayedBandwidthGoal, verdict(br >= RelayedBandwidthGoal))
}
