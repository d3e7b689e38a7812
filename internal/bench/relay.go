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
// three transports of this process over loopback TCP, nodes 1, 2 and 3;
// the pair 1–3 is measured first over its direct connection, then with
// its direct link cut (tcp.Transport.BlockPeer), through 2, Rounds times
// in turn (the link healed between rounds); each figure is the median of
// its rounds, so that a machine whose load moves favours neither path.
// Both use Send on each side (no SendNow or SendDirect, which a relayed
// pair cannot take), so the ratio is the relay's cost alone.
type Relayed struct {
	// Rounds is how many times each path is measured (0, 1: once).
	Rounds int
	// Iters round trips of an 8-byte frame are timed, after Iters/10.
	Iters int
	// Windows windows of 64 frames of 1 MiB are timed, after 2, each
	// answered by a 4-byte frame.
	Windows int
}

// DefaultRelayed returns the benchmark's default loops.
func DefaultRelayed() *Relayed { return &Relayed{Rounds: 3, Iters: 10000, Windows: 10} }

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

// relayEnd is a measured node's handler: it echoes pings (the far end)
// or signals them (the near end), counts data frames and answers a window.
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

// Measure returns the direct figures, then the relayed ones.
func (b *Relayed) Measure(ctx context.Context) (direct, relayed RelayedResult, err error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	var trs [3]*tcp.Transport
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
	const window = 64
	near := &relayEnd{tr: trs[0], got: make(chan struct{}, 1), window: window}
	far := &relayEnd{tr: trs[2], echo: true, got: make(chan struct{}, 1), window: window}
	trs[0].SetHandler(near)
	trs[2].SetHandler(far)
	trs[1].SetHandler(transport.HandlerFuncs{})
	trs[0].Keep([]core.NodeID{2})
	trs[2].Keep([]core.NodeID{2})
	var ds, rs []RelayedResult
	for range max(1, b.Rounds) {
		trs[0].BlockPeer(3, false)
		trs[2].BlockPeer(1, false)
		// The direct link is back once 1 has a connection to 3 again
		// (its writer redials with back-off).
		for !trs[0].Connected(3) {
			if err := near.tr.Send(ctx, 3, wire.Frame{Kind: relayPing, Payload: []byte{0}}); err != nil {
				return direct, relayed, err
			}
			select {
			case <-near.got:
			case <-ctx.Done():
				return direct, relayed, ctx.Err()
			}
			time.Sleep(10 * time.Millisecond)
		}
		d, err := b.measurePath(ctx, near, far)
		if err != nil {
			return direct, relayed, fmt.Errorf("direct path: %w", err)
		}
		forwarded := trs[1].Stats().Forwarded
		trs[0].BlockPeer(3, true)
		trs[2].BlockPeer(1, true)
		r, err := b.measurePath(ctx, near, far)
		if err != nil {
			return direct, relayed, fmt.Errorf("relayed path: %w", err)
		}
		if trs[1].Stats().Forwarded == forwarded {
			return direct, relayed, fmt.Errorf("relayed path: node 2 forwarded nothing")
		}
		ds, rs = append(ds, d), append(rs, r)
	}
	return medianRelayed(ds), medianRelayed(rs), nil
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

// measurePath times round trips, then windows, between near and far.
func (b *Relayed) measurePath(ctx context.Context, near, far *relayEnd) (RelayedResult, error) {
	var r RelayedResult
	ping := make([]byte, 8)
	roundTrip := func() error {
		if err := near.tr.Send(ctx, 3, wire.Frame{Kind: relayPing, Payload: ping}); err != nil {
			return err
		}
		select {
		case <-near.got:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range max(1, b.Iters/10) {
		if err := roundTrip(); err != nil {
			return r, err
		}
	}
	start := time.Now()
	for range b.Iters {
		if err := roundTrip(); err != nil {
			return r, err
		}
	}
	r.LatencyMicros = float64(time.Since(start).Microseconds()) / float64(2*b.Iters)

	const window = 64
	data := make([]byte, 1<<20)
	sendWindow := func() error {
		for range window {
			if err := near.tr.Send(ctx, 3, wire.Frame{Kind: relayData, Payload: data}); err != nil {
				return err
			}
		}
		select {
		case <-near.got:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range 2 {
		if err := sendWindow(); err != nil {
			return r, err
		}
	}
	start = time.Now()
	for range b.Windows {
		if err := sendWindow(); err != nil {
			return r, err
		}
	}
	r.BandwidthMBs = float64(b.Windows*window*len(data)) / time.Since(start).Seconds() / 1e6
	return r, nil
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
	fmt.Fprintln(w, "relayed path: nodes 1 and 3 of this process over loopback TCP, direct, then through node 2 with their link cut (medians of the rounds)")
	fmt.Fprintf(w, "%-24s %12s %12s %10s   %s\n", "", "direct", "relayed", "relayed/direct", "goal")
	fmt.Fprintf(w, "%-24s %12.2f %12.2f %10.2f       ≤ %.2f %s\n", "8 B latency (µs)", direct.LatencyMicros, relayed.LatencyMicros, lr, RelayedLatencyGoal, verdict(lr <= RelayedLatencyGoal))
	fmt.Fprintf(w, "%-24s %12.0f %12.0f %10.2f       ≥ %.2f %s\n", "1 MiB bandwidth (MB/s)", direct.BandwidthMBs, relayed.BandwidthMBs, br, RelayedBandwidthGoal, verdict(br >= RelayedBandwidthGoal))
}
