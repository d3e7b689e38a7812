package workload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/internal/record"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/vsync"
)

// The multicast workload of a node: the stability detector (package
// stable) and the view-synchronous multicast (package vsync) run as one
// more layer of the node's stack, under a load generator that multicasts
// at a fixed rate and measures what it delivers. It backs `cohort bench
// multicast` and its test.
//
// The layer is an inner core.Stack (stability detector behind
// vsync.HideFailures, vsync, load generator) whose events stay inside:
// only vsync.ViewChanged (with the count and digest of what the node
// delivered in the view it left) and a periodic [record.MulticastReport] reach
// the node's event stream, so the stream costs nothing per message.

// MulticastEnv is the environment variable that turns a node's multicast
// workload on (see [MulticastOptions.String] for its format). The
// orchestrator sets it through JobConfig.Env, so `cohort node` needs no
// flag for it.
const MulticastEnv = "COHORT_MULTICAST"

// ErrMulticast is wrapped by the errors of [ParseMulticastOptions] and
// [MulticastOptions.Validate].
var ErrMulticast = errors.New("workload: bad multicast options")

// MulticastOptions configure a node's multicast workload.
type MulticastOptions struct {
	// Rate is how many messages per second this node multicasts (0: it
	// only receives). The generator offers them every millisecond or so;
	// while more than Window of its messages wait for the flow-control
	// window it skips its turn (counted in MulticastReport.Throttled)
	// rather than queue without bound.
	Rate float64
	// Size is the payload size in bytes (at least 16: a send time stamp
	// and a counter).
	Size int
	// Window is vsync's flow-control window (Config.Window), in messages.
	Window int
	// Period is the stability detector's round period and resend interval.
	Period time.Duration
	// Protocol is the stability-detection protocol.
	Protocol stable.Protocol
	// Report is the interval between two [record.MulticastReport] events.
	Report time.Duration
	// Raw replaces stability detection and vsync by plain sends (each
	// message sent once to every other member of the membership view and
	// delivered on arrival: no order, no retransmission, no buffer, no
	// flush): the baseline the benchmark compares vsync with.
	Raw bool
}

// DefaultMulticastOptions: 100 messages of 256 bytes per second and node,
// a window of 1,024 messages, CubeFullDist rounds every 50 ms, a report
// every second.
func DefaultMulticastOptions() MulticastOptions {
	return MulticastOptions{Rate: 100, Size: 256, Window: 1024, Period: 50 * time.Millisecond, Protocol: stable.CubeFullDist, Report: time.Second}
}

// Validate reports the first invalid field, wrapping [ErrMulticast].
func (o MulticastOptions) Validate() error {
	switch {
	case o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0):
		return fmt.Errorf("%w: rate %v", ErrMulticast, o.Rate)
	case o.Size < payloadHeader || o.Size > vsync.DefaultConfig().MaxPayload:
		return fmt.Errorf("%w: size %d, want %d to %d bytes", ErrMulticast, o.Size, payloadHeader, vsync.DefaultConfig().MaxPayload)
	case o.Window < 1:
		return fmt.Errorf("%w: window %d", ErrMulticast, o.Window)
	case o.Period <= 0:
		return fmt.Errorf("%w: period %v", ErrMulticast, o.Period)
	case !o.Protocol.Valid():
		return fmt.Errorf("%w: protocol %d", ErrMulticast, int(o.Protocol))
	case o.Report <= 0:
		return fmt.Errorf("%w: report interval %v", ErrMulticast, o.Report)
	}
	return nil
}

// String renders o as ParseMulticastOptions reads it:
// "rate=100,size=256,window=1024,period=50ms,protocol=cubefulldist,report=1s"
// (and ",raw=true" for the baseline).
func (o MulticastOptions) String() string {
	s := fmt.Sprintf("rate=%s,size=%d,window=%d,period=%v,protocol=%v,report=%v",
		strconv.FormatFloat(o.Rate, 'g', -1, 64), o.Size, o.Window, o.Period, o.Protocol, o.Report)
	if o.Raw {
		s += ",raw=true"
	}
	return s
}

// ParseMulticastOptions reads comma-separated key=value pairs (keys rate,
// size, window, period, protocol, report, raw) over the defaults.
func ParseMulticastOptions(s string) (MulticastOptions, error) {
	o := DefaultMulticastOptions()
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return o, fmt.Errorf("%w: %q is not key=value", ErrMulticast, kv)
		}
		var err error
		switch k {
		case "rate":
			o.Rate, err = strconv.ParseFloat(v, 64)
		case "size":
			o.Size, err = strconv.Atoi(v)
		case "window":
			o.Window, err = strconv.Atoi(v)
		case "period":
			o.Period, err = time.ParseDuration(v)
		case "protocol":
			o.Protocol, err = stable.ParseProtocol(v)
		case "report":
			o.Report, err = time.ParseDuration(v)
		case "raw":
			o.Raw, err = strconv.ParseBool(v)
		default:
			return o, fmt.Errorf("%w: unknown key %q", ErrMulticast, k)
		}
		if err != nil {
			return o, fmt.Errorf("%w: %s: %w", ErrMulticast, k, err)
		}
	}
	return o, o.Validate()
}

// MulticastFromEnv returns the options in [MulticastEnv], or nil if it is
// unset.
func MulticastFromEnv(getenv func(string) string) (*MulticastOptions, error) {
	s := getenv(MulticastEnv)
	if s == "" {
		return nil, nil
	}
	o, err := ParseMulticastOptions(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MulticastEnv, err)
	}
	return &o, nil
}

// payload layout: send time (Unix ns, 8 bytes) and counter (8 bytes),
// then zeros.
const payloadHeader = 16

// multicastLayer is the node's multicast layer: an inner stack of the
// stability detector, vsync and the load generator, whose events are
// kept inside except ViewChanged and MulticastReport.
type multicastLayer struct {
	inner *core.Stack
}

func NewMulticastLayer(o MulticastOptions, members []core.NodeID) (*multicastLayer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Raw {
		raw := &rawCast{}
		return &multicastLayer{inner: core.NewStack(raw, &loadGen{o: o, vs: raw})}, nil
	}
	scfg := stable.DefaultConfig()
	scfg.Protocol = o.Protocol
	scfg.Period = o.Period
	scfg.Resend = o.Period
	vcfg := vsync.DefaultConfig()
	vcfg.Window = o.Window
	vcfg.MaxQueued = 2 * o.Window
	vs, err := vsync.New(vcfg)
	if err != nil {
		return nil, err
	}
	det := stable.New(scfg, members)
	if err := det.Err(); err != nil {
		return nil, err
	}
	gen := &loadGen{o: o, vs: vs}
	return &multicastLayer{inner: core.NewStack(vsync.HideFailures(det), vs, gen)}, nil
}

func (m *multicastLayer) Start(env core.Env)                   { m.inner.Start(quietEnv{env}) }
func (m *multicastLayer) Receive(from core.NodeID, x core.Msg) { m.inner.Receive(from, x) }
func (m *multicastLayer) Fire(t core.Timer)                    { m.inner.Fire(t) }
func (m *multicastLayer) Handle(e core.Event)                  { m.inner.Handle(e) }
func (m *multicastLayer) Protos() []core.Proto                 { return m.inner.Protos() }

// quietEnv passes on only the multicast layer's summary events.
type quietEnv struct{ core.Env }

func (q quietEnv) Emit(e core.Event) {
	switch e.(type) {
	case vsync.ViewChanged, record.MulticastReport:
		q.Env.Emit(e)
	}
}

// loadGen multicasts at the configured rate and measures deliveries.
type loadGen struct {
	o   MulticastOptions
	vs  interface{ Stats() vsync.Stats }
	env core.Env

	last      time.Duration
	due       float64
	count     uint64
	throttled uint64
	refused   uint64
	delivered uint64
	bytes     uint64
	lat       [record.LatencyBuckets]uint64
	epoch     uint64
	members   int
}

type genTimer uint8

const (
	genTick genTimer = iota
	genReport
)

// genInterval is the generator's tick.
const genInterval = time.Millisecond

func (g *loadGen) Start(env core.Env) {
	g.env = env
	g.last = env.Now()
	if g.o.Rate > 0 {
		env.SetTimer(genInterval, genTick)
	}
	env.SetTimer(g.o.Report, genReport)
}

func (g *loadGen) Fire(t core.Timer) {
	switch t {
	case genTick:
		g.env.SetTimer(genInterval, genTick)
		now := g.env.Now()
		g.due += g.o.Rate * (now - g.last).Seconds()
		g.last = now
		for g.due >= 1 {
			if g.vs.Stats().Queued >= g.o.Window {
				g.throttled++
				g.due = 0
				break
			}
			g.due--
			g.count++
			p := make([]byte, g.o.Size)
			binary.LittleEndian.PutUint64(p, uint64(time.Now().UnixNano()))
			binary.LittleEndian.PutUint64(p[8:], g.count)
			g.env.Emit(vsync.Multicast{Payload: p})
		}
	case genReport:
		g.env.SetTimer(g.o.Report, genReport)
		g.report()
	}
}

func (g *loadGen) report() {
	st := g.vs.Stats()
	r := record.MulticastReport{
		Epoch: g.epoch, Members: g.members,
		Sent: st.Sent, Delivered: g.delivered, DeliveredBytes: g.bytes,
		Throttled: g.throttled, Refused: g.refused, Resent: st.Resent, Nacks: st.Nacks, Late: st.Late, Flushes: st.Flushes,
		Buffered: st.Buffered, BufferedBytes: st.BufferedBytes, PeakBuffered: st.PeakBuffered, PeakBytes: st.PeakBytes, Queued: st.Queued,
	}
	lo, hi := 0, record.LatencyBuckets
	for lo < hi && g.lat[lo] == 0 {
		lo++
	}
	for hi > lo && g.lat[hi-1] == 0 {
		hi--
	}
	r.LatFrom, r.Lat = lo, slices.Clone(g.lat[lo:hi])
	clear(g.lat[:])
	g.env.Emit(r)
}

func (g *loadGen) Handle(e core.Event) {
	switch x := e.(type) {
	case vsync.Delivered:
		g.delivered++
		g.bytes += uint64(len(x.Payload))
		if x.Sender != g.env.Self() && len(x.Payload) >= payloadHeader {
			sent := int64(binary.LittleEndian.Uint64(x.Payload))
			g.lat[record.LatencyBucket(time.Duration(time.Now().UnixNano()-sent))]++
		}
	case vsync.ViewChanged:
		g.epoch, g.members = x.Epoch, len(x.Members)
	case vsync.Refused:
		g.refused++
	}
}

func (g *loadGen) Receive(core.NodeID, core.Msg) {}

// rawCast is the baseline of the benchmark: a multicast is one plain send
// to every other member of the membership view, delivered on arrival.
type rawCast struct {
	env     core.Env
	epoch   uint64
	members []core.NodeID
	seq     uint64
	stats   vsync.Stats
}

func (r *rawCast) Start(env core.Env)   { r.env = env }
func (r *rawCast) Fire(core.Timer)      {}
func (r *rawCast) Protos() []core.Proto { return []core.Proto{core.ProtoVsync} }
func (r *rawCast) Stats() vsync.Stats   { return r.stats }

func (r *rawCast) Handle(e core.Event) {
	switch x := e.(type) {
	case core.MembersChanged:
		r.epoch, r.members = x.Epoch, x.Members
	case vsync.Multicast:
		r.seq++
		m := &vsync.Data{Epoch: r.epoch, Sender: r.env.Self(), Seq: r.seq, Payload: x.Payload}
		for _, q := range r.members {
			if q != r.env.Self() {
				r.env.Send(q, m)
			}
		}
		r.stats.Sent++
		r.stats.Delivered++
		r.env.Emit(vsync.Delivered{Epoch: m.Epoch, Sender: m.Sender, Seq: m.Seq, Payload: m.Payload})
	}
}

func (r *rawCast) Receive(from core.NodeID, m core.Msg) {
	if d, ok := m.(*vsync.Data); ok {
		r.stats.Received++
		r.stats.Delivered++
		r.env.Emit(vsync.Delivered{Epoch: d.Epoch, Sender: d.Sender, Seq: d.Seq, Payload: d.Payload})
	}
}
