package host_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/mem"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// The tests in this file check docs/DESIGN.md "Real host and transport" (one
// event loop per process driving the machines with real timers over a
// transport) and "Observability" (structured logs, a JSON-lines event
// stream).

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const timeout = 20 * time.Second // bound on a hung test, not a measurement

var (
	kindPing = core.MakeKind(core.ProtoTest, 1)
	kindPong = core.MakeKind(core.ProtoTest, 2)
)

type Ping struct{ Seq uint64 }
type Pong struct{ Seq uint64 }

func (Ping) Kind() core.Kind               { return kindPing }
func (Pong) Kind() core.Kind               { return kindPong }
func (p Ping) MarshalWire(e *wire.Encoder) { e.Uvarint(p.Seq) }
func (p Pong) MarshalWire(e *wire.Encoder) { e.Uvarint(p.Seq) }

func newCodec(t testing.TB) *wire.Codec {
	c := wire.NewCodec()
	for _, err := range []error{
		c.Register(kindPing, "test.Ping", func(d *wire.Decoder) (core.Msg, error) { return Ping{d.Uvarint()}, d.Err() }),
		c.Register(kindPong, "test.Pong", func(d *wire.Decoder) (core.Msg, error) { return Pong{d.Uvarint()}, d.Err() }),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// PongReceived is the pinger's event: a pong came back from From.
type PongReceived struct {
	From core.NodeID
	Seq  uint64
}

type tick struct{}

// pinger pings every peer each interval and answers pings with pongs.
type pinger struct {
	peers    []core.NodeID
	interval time.Duration
	env      core.Env
	seq      uint64
	hints    []core.PeerHint
}

func (p *pinger) Protos() []core.Proto { return []core.Proto{core.ProtoTest} }
func (p *pinger) Start(env core.Env) {
	p.env = env
	env.SetTimer(0, tick{})
}
func (p *pinger) Fire(core.Timer) {
	p.seq++
	for _, q := range p.peers {
		p.env.Send(q, Ping{p.seq})
	}
	p.env.SetTimer(p.interval, tick{})
}
func (p *pinger) Receive(from core.NodeID, m core.Msg) {
	switch m := m.(type) {
	case Ping:
		p.env.Send(from, Pong(m))
	case Pong:
		p.env.Emit(PongReceived{From: from, Seq: m.Seq})
	}
}
func (p *pinger) Handle(e core.Event) {
	if h, ok := e.(core.PeerHint); ok {
		p.hints = append(p.hints, h)
	}
}

// observer records the events of every host of a test.
type observer struct {
	mu      sync.Mutex
	events  map[core.NodeID][]core.Event
	changed chan struct{}
}

func newObserver() *observer {
	return &observer{events: map[core.NodeID][]core.Event{}, changed: make(chan struct{})}
}

func (o *observer) record(node core.NodeID) func(time.Duration, core.Event) {
	return func(_ time.Duration, e core.Event) {
		o.mu.Lock()
		o.events[node] = append(o.events[node], e)
		close(o.changed)
		o.changed = make(chan struct{})
		o.mu.Unlock()
	}
}

func (o *observer) wait(t *testing.T, what string, cond func(map[core.NodeID][]core.Event) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		ok := cond(o.events)
		ch := o.changed
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %s: not reached after %v", what, timeout)
		}
	}
}

// cluster runs one host per transport until the test ends.
type cluster struct {
	hosts []*host.Host
	obs   *observer
}

func startCluster(t *testing.T, trs []transport.Transport, mk func(i int) core.Machine, mod func(*host.Config)) *cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &cluster{obs: newObserver()}
	var wg sync.WaitGroup
	codec := newCodec(t)
	for i, tr := range trs {
		cfg := host.Config{Transport: tr, Codec: codec, Seed: uint64(i + 1), OnEvent: c.obs.record(tr.Self())}
		if mod != nil {
			mod(&cfg)
		}
		h, err := host.New(mk(i), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.hosts = append(c.hosts, h)
	}
	for _, h := range c.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Run(ctx); err != nil {
				t.Errorf("run: %v", err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, tr := range trs {
			tr.Close()
		}
	})
	return c
}

func memTransports(t *testing.T, n int, cfg mem.Config) []transport.Transport {
	hub, err := mem.NewHub(cfg)
	if err != nil {
		t.Fatal(err)
	}
	trs := make([]transport.Transport, n)
	for i := range trs {
		e, err := hub.Join(core.NodeID(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		trs[i] = e
	}
	connect(trs)
	return trs
}

func tcpTransports(t *testing.T, n int) []transport.Transport {
	trs := make([]transport.Transport, n)
	for i := range trs {
		cfg := tcp.DefaultConfig()
		cfg.Node, cfg.JobID, cfg.Secret = core.NodeID(i+1), "host-test", []byte("host test secret")
		tr, err := tcp.Listen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		trs[i] = tr
	}
	connect(trs)
	return trs
}

func connect(trs []transport.Transport) {
	for _, a := range trs {
		for _, b := range trs {
			if a != b {
				a.SetPeer(b.Self(), b.Addr())
			}
		}
	}
}

func ids(trs []transport.Transport) []core.NodeID {
	var out []core.NodeID
	for _, tr := range trs {
		out = append(out, tr.Self())
	}
	return out
}

// TestPing runs two and five hosts over each transport: every host pings
// every other each millisecond, and the test waits until each has had
// pongs from all the others (so messages, timers and events all flow
// through the loop).
func TestPing(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		mk   func(t *testing.T, n int) []transport.Transport
	}{
		{"mem/n=2", 2, func(t *testing.T, n int) []transport.Transport { return memTransports(t, n, mem.Config{}) }},
		{"mem/n=5", 5, func(t *testing.T, n int) []transport.Transport {
			return memTransports(t, n, mem.Config{Latency: 100 * time.Microsecond, Jitter: 100 * time.Microsecond})
		}},
		{"tcp/n=2", 2, tcpTransports},
		{"tcp/n=5", 5, tcpTransports},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trs := tc.mk(t, tc.n)
			all := ids(trs)
			c := startCluster(t, trs, func(i int) core.Machine {
				others := slices.DeleteFunc(slices.Clone(all), func(id core.NodeID) bool { return id == all[i] })
				return core.NewStack(&pinger{peers: others, interval: time.Millisecond})
			}, nil)
			const rounds = 3
			c.obs.wait(t, "pongs from every peer", func(ev map[core.NodeID][]core.Event) bool {
				for _, id := range all {
					got := map[core.NodeID]int{}
					for _, e := range ev[id] {
						if p, ok := e.(PongReceived); ok {
							got[p.From]++
						}
					}
					for _, other := range all {
						if other != id && got[other] < rounds {
							return false
						}
					}
				}
				return true
			})
			for _, h := range c.hosts {
				if s := h.Stats(); s.Received == 0 || s.Sent == 0 || s.Timers == 0 || s.Undecodable != 0 {
					t.Errorf("host %v stats %+v", h.Self(), s)
				}
			}
		})
	}
}

// timerMachine checks the timer semantics of core.Env on the real host.
type timerMachine struct {
	env    core.Env
	setAt  map[string]time.Duration
	after  map[string]time.Duration
	ids    map[string]core.TimerID
	fired  []string
	early  []string // fired before their time
	report func(fired []string, early []string)
}

func (m *timerMachine) set(name string, d time.Duration) {
	m.setAt[name], m.after[name] = m.env.Now(), d
	m.ids[name] = m.env.SetTimer(d, name)
}

func (m *timerMachine) Start(env core.Env) {
	m.env = env
	m.setAt, m.after, m.ids = map[string]time.Duration{}, map[string]time.Duration{}, map[string]core.TimerID{}
	m.set("a", 30*time.Millisecond)
	m.set("b", 10*time.Millisecond)
	m.set("c", 20*time.Millisecond)
	m.set("d", 15*time.Millisecond)
	env.CancelTimer(m.ids["d"])
	// Cancelled in the same call that set them: none may fire.
	for i := range 500 {
		env.CancelTimer(env.SetTimer(0, fmt.Sprintf("x%d", i)))
	}
	// e and f expire together; whichever fires first cancels the other,
	// whose id is then probably already posted to the loop.
	m.set("e", 5*time.Millisecond)
	m.set("f", 5*time.Millisecond)
	env.CancelTimer(0)    // the zero id names no timer
	env.CancelTimer(9999) // an unknown id is a no-op
}

func (m *timerMachine) Fire(t core.Timer) {
	name := t.(string)
	m.fired = append(m.fired, name)
	if m.env.Now() < m.setAt[name]+m.after[name] {
		m.early = append(m.early, name)
	}
	switch name {
	case "e":
		m.env.CancelTimer(m.ids["f"])
	case "f":
		m.env.CancelTimer(m.ids["e"])
	case "a":
		m.env.CancelTimer(m.ids["a"]) // cancelling a fired timer is a no-op
		m.report(slices.Clone(m.fired), slices.Clone(m.early))
	}
}

func (m *timerMachine) Receive(core.NodeID, core.Msg) {}
func (m *timerMachine) Handle(core.Event)             {}

// TestTimers checks that timers fire in deadline order, never early, and
// that a cancelled timer never fires, including one cancelled by a timer
// with the same deadline.
func TestTimers(t *testing.T) {
	type result struct {
		fired, early []string
		deadline     map[string]time.Duration
	}
	done := make(chan result, 1)
	trs := memTransports(t, 1, mem.Config{})
	startCluster(t, trs, func(int) core.Machine {
		m := &timerMachine{}
		m.report = func(f, e []string) {
			dl := map[string]time.Duration{}
			for k, at := range m.setAt {
				dl[k] = at + m.after[k]
			}
			done <- result{f, e, dl}
		}
		return m
	}, nil)
	var r result
	select {
	case r = <-done:
	case <-time.After(timeout):
		t.Fatal("timer a never fired")
	}
	if len(r.early) > 0 {
		t.Errorf("fired before their time: %v", r.early)
	}
	// One of e and f, and b, c, a, in deadline order. (The deadlines are
	// those Start set: on a loaded machine Start itself may take longer
	// than e's 5 ms, so e's deadline can fall after b's.)
	got := slices.Sorted(slices.Values(r.fired))
	if len(r.fired) != 4 || !(slices.Equal(got, []string{"a", "b", "c", "e"}) || slices.Equal(got, []string{"a", "b", "c", "f"})) {
		t.Fatalf("fired %v, want b, c, a and one of e and f", r.fired)
	}
	for i := 1; i < len(r.fired); i++ {
		if r.deadline[r.fired[i]] < r.deadline[r.fired[i-1]] {
			t.Fatalf("fired %v: %s (deadline %v) after %s (deadline %v)", r.fired,
				r.fired[i], r.deadline[r.fired[i]], r.fired[i-1], r.deadline[r.fired[i-1]])
		}
	}
}

// flooder sends bursts on request and records the hints it gets.
type flooder struct {
	env   core.Env
	hints []core.PeerHint
}

func (f *flooder) Start(env core.Env)            { f.env = env }
func (f *flooder) Fire(core.Timer)               {}
func (f *flooder) Receive(core.NodeID, core.Msg) {}
func (f *flooder) Handle(e core.Event) {
	if h, ok := e.(core.PeerHint); ok {
		f.hints = append(f.hints, h)
	}
}

// TestSendDropsWhenQueueFull checks the host's send policy (package doc,
// "Sending"): with the peer's queue full, Env.Send does not block the loop;
// it drops, counts, logs and gives the machine one hint per episode.
func TestSendDropsWhenQueueFull(t *testing.T) {
	hub, err := mem.NewHub(mem.Config{QueueLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	a, err := hub.Join(1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hub.Join(2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.SetPeer(2, b.Addr())
	rb := transporttest.NewRecorder()
	rb.Hold()
	b.SetHandler(rb)
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	fl := &flooder{}
	c := startCluster(t, []transport.Transport{a}, func(int) core.Machine { return fl }, func(cfg *host.Config) { cfg.Logger = logger })
	t.Cleanup(rb.Release) // before the cluster's cleanup closes the transports
	h := c.hosts[0]
	ctx := context.Background()
	send := func(n uint64) {
		if err := h.Do(ctx, func(_ core.Machine, env core.Env) {
			for i := range n {
				env.Send(2, Ping{i})
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	hints := func() []core.PeerHint {
		var hs []core.PeerHint
		if err := h.Do(ctx, func(core.Machine, core.Env) { hs = slices.Clone(fl.hints) }); err != nil {
			t.Fatal(err)
		}
		return hs
	}
	// One frame stalls in the receiver's handler, so the queue of 4 stays
	// put during the burst: exactly 4 of 100 get in.
	send(1)
	rb.WaitHeld(t, timeout, 1)
	send(100)
	if s := h.Stats(); s.Sent != 5 || s.SendDropped != 96 {
		t.Fatalf("stats after a burst of 100 into a queue of 4: %+v, want 5 sent and 96 dropped", s)
	}
	if hs := hints(); len(hs) != 1 || hs[0].Node != 2 || !strings.Contains(hs[0].Reason, "queue full") {
		t.Fatalf("hints %v, want one about node 2's full queue", hs)
	}
	logMu.Lock()
	if n := strings.Count(logs.String(), "dropping messages"); n != 1 {
		t.Errorf("%d drop log lines, want 1 per episode:\n%s", n, logs.String())
	}
	logMu.Unlock()
	rb.Release()
	rb.Wait(t, timeout, "the queued frames", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 5 })
	// The receiver drained: the next send succeeds and ends the episode;
	// a new burst starts a new one.
	rb.Hold()
	send(1)
	rb.WaitHeld(t, timeout, 1)
	send(100)
	if hs := hints(); len(hs) != 2 {
		t.Fatalf("hints %v, want a second one for the second episode", hs)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// custom is an application event with exported fields.
type custom struct {
	Name  string
	Count int
	Nodes []core.NodeID
	priv  int
}

type withChan struct{ C chan int }

// emitter emits a set of events, then sends one ping to node 2.
type emitter struct{ env core.Env }

func (m *emitter) Start(env core.Env) {
	m.env = env
	env.Emit(core.Suspected{Node: 3})
	env.Emit(core.Failed{Node: 3})
	env.Emit(core.Recovered{Node: 3})
	env.Emit(core.MembersChanged{Epoch: 2, Members: []core.NodeID{1, 2, 4}})
	env.Emit(custom{Name: "job", Count: 7, Nodes: []core.NodeID{5}, priv: 1})
	env.Emit(&custom{Name: "pointer"})
	env.Emit("a plain string")
	env.Emit(withChan{C: make(chan int)})
	env.Send(2, Ping{1})
}
func (m *emitter) Fire(core.Timer)               {}
func (m *emitter) Receive(core.NodeID, core.Msg) {}
func (m *emitter) Handle(core.Event)             {}

// TestEventStream checks docs/DESIGN.md "Observability": one valid JSON line per
// emitted event with time, node, type and fields; and that frames carry the
// epoch of the last view announced.
func TestEventStream(t *testing.T) {
	a, rb := recordedPeer(t)
	var buf bytes.Buffer
	startCluster(t, []transport.Transport{a}, func(int) core.Machine { return &emitter{} },
		func(cfg *host.Config) { cfg.Events = host.NewLockedWriter(&buf) })
	rb.Wait(t, timeout, "the ping", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	if ep := rb.Frames()[0].Epoch; ep != 2 {
		t.Errorf("frame epoch %d, want 2 (the last MembersChanged)", ep)
	}
	// The emits precede the send on the loop, so the stream is complete.
	want := []struct{ typ, fields string }{
		{"core.Suspected", `{"Node":3}`},
		{"core.Failed", `{"Node":3}`},
		{"core.Recovered", `{"Node":3}`},
		{"core.MembersChanged", `{"Epoch":2,"Members":[1,2,4]}`},
		{"host_test.custom", `{"Name":"job","Count":7,"Nodes":[5]}`},
		{"host_test.custom", `{"Name":"pointer","Count":0,"Nodes":null}`},
		{"string", `{"value":"a plain string"}`},
		{"host_test.withChan", `{"error":"json: unsupported type: chan int","value":"{`},
	}
	sc := bufio.NewScanner(bytes.NewReader(slices.Clone(buf.Bytes())))
	var lines []host.EventLine
	for sc.Scan() {
		var l host.EventLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d is not an event line: %v\n%s", len(lines)+1, err, sc.Text())
		}
		lines = append(lines, l)
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		if l.Node != 1 || l.Time.IsZero() || l.UptimeNs < 0 || l.Type != want[i].typ || !strings.HasPrefix(string(l.Fields), want[i].fields) {
			t.Errorf("line %d: node %v time %v uptime %d type %q fields %s; want node 1, type %q, fields %s",
				i+1, l.Node, l.Time, l.UptimeNs, l.Type, l.Fields, want[i].typ, want[i].fields)
		}
		if i > 0 && l.UptimeNs < lines[i-1].UptimeNs {
			t.Errorf("line %d: uptime went backwards", i+1)
		}
	}
}

// TestDataPathAndUndecodable checks that Config.DataPath consumes the
// frames it claims before the loop sees them, and that a frame of a kind
// the codec does not know is dropped and counted.
func TestDataPathAndUndecodable(t *testing.T) {
	hub, err := mem.NewHub(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := hub.Join(1)
	b, _ := hub.Join(2)
	defer b.Close()
	b.SetPeer(1, a.Addr())
	b.SetHandler(transporttest.NewRecorder())
	kindApp := core.MakeKind(core.ProtoApp, 1)
	var mu sync.Mutex
	var direct [][]byte
	c := startCluster(t, []transport.Transport{a}, func(int) core.Machine { return &pinger{} }, func(cfg *host.Config) {
		cfg.DataPath = host.DataPathFunc(func(f wire.Frame) bool {
			if f.Kind.Proto() != core.ProtoApp {
				return false
			}
			mu.Lock()
			direct = append(direct, slices.Clone(f.Payload))
			mu.Unlock()
			return true
		})
	})
	ctx := context.Background()
	send := func(k core.Kind, p []byte) {
		if err := b.Send(ctx, 1, wire.Frame{Kind: k, Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	send(kindApp, []byte("app data"))
	send(core.MakeKind(core.ProtoTest, 77), nil) // not in the codec
	var e wire.Encoder
	Pong{9}.MarshalWire(&e)
	send(kindPong, e.B)
	var first core.Event
	c.obs.wait(t, "the pong", func(ev map[core.NodeID][]core.Event) bool {
		if len(ev[1]) > 0 {
			first = ev[1][0]
		}
		return first != nil
	})
	if first != (PongReceived{From: 2, Seq: 9}) {
		t.Fatalf("event %v, want the pong", first)
	}
	s := c.hosts[0].Stats()
	mu.Lock()
	defer mu.Unlock()
	if len(direct) != 1 || string(direct[0]) != "app data" || s.Undecodable != 1 || s.Received != 1 {
		t.Fatalf("stats %+v, direct %q: want 1 frame on the data path, 1 undecodable, 1 received", s, direct)
	}
}

// TestShutdown checks that Run returns when its context is done while
// traffic, timers and requests are in flight, that every goroutine ends,
// and that requests afterwards fail with ErrStopped.
func TestShutdown(t *testing.T) {
	trs := tcpTransports(t, 3)
	codec := newCodec(t)
	all := ids(trs)
	ctx, cancel := context.WithCancel(context.Background())
	var hosts []*host.Host
	errs := make(chan error, len(trs))
	pongs := make(chan struct{}, 1)
	for i, tr := range trs {
		others := slices.DeleteFunc(slices.Clone(all), func(id core.NodeID) bool { return id == all[i] })
		h, err := host.New(&pinger{peers: others, interval: 100 * time.Microsecond}, host.Config{
			Transport: tr, Codec: codec,
			OnEvent: func(time.Duration, core.Event) {
				select {
				case pongs <- struct{}{}:
				default:
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
		go func() { errs <- h.Run(ctx) }()
	}
	select { // traffic is flowing
	case <-pongs:
	case <-time.After(timeout):
		t.Fatal("no pong")
	}
	// A request loop that is running when the context ends.
	reqDone := make(chan error, 1)
	go func() {
		for {
			err := hosts[0].Do(context.Background(), func(core.Machine, core.Env) {})
			if err != nil {
				reqDone <- err
				return
			}
		}
	}()
	cancel()
	for range hosts {
		if err := <-errs; err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	}
	if err := <-reqDone; !errors.Is(err, host.ErrStopped) {
		t.Errorf("Do during shutdown: %v, want ErrStopped", err)
	}
	if err := hosts[1].Handle(context.Background(), core.Suspected{Node: 1}); !errors.Is(err, host.ErrStopped) {
		t.Errorf("Handle after shutdown: %v, want ErrStopped", err)
	}
	if err := hosts[1].Run(context.Background()); !errors.Is(err, host.ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	for _, tr := range trs {
		tr.Close()
	}
	goleak.VerifyNone(t)
}

// TestSeed checks that the random source is seeded from the config (same
// seed and node, same draws), that seed 0 draws a seed, and that the seed
// is logged.
func TestSeed(t *testing.T) {
	draw := func(seed uint64) (uint64, uint64, string) {
		var logs bytes.Buffer
		trs := memTransports(t, 1, mem.Config{})
		var logMu sync.Mutex
		c := startCluster(t, trs, func(int) core.Machine { return &flooder{} }, func(cfg *host.Config) {
			cfg.Seed = seed
			cfg.Logger = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
				logMu.Lock()
				defer logMu.Unlock()
				return logs.Write(p)
			}), nil))
		})
		var x uint64
		if err := c.hosts[0].Do(context.Background(), func(_ core.Machine, env core.Env) { x = env.Rand().Uint64() }); err != nil {
			t.Fatal(err)
		}
		logMu.Lock()
		defer logMu.Unlock()
		return x, c.hosts[0].Seed(), logs.String()
	}
	x1, _, log1 := draw(42)
	x2, _, _ := draw(42)
	if x1 != x2 {
		t.Errorf("seed 42 drew %d then %d", x1, x2)
	}
	if !strings.Contains(log1, "seed=42") {
		t.Errorf("the seed is not logged:\n%s", log1)
	}
	_, s, log0 := draw(0)
	if s == 0 || !strings.Contains(log0, fmt.Sprintf("seed=%d", s)) {
		t.Errorf("seed 0 gave seed %d; log:\n%s", s, log0)
	}
}

func TestNewValidates(t *testing.T) {
	trs := memTransports(t, 1, mem.Config{})
	defer trs[0].Close()
	for name, cfg := range map[string]host.Config{
		"no transport": {Codec: wire.NewCodec()},
		"no codec":     {Transport: trs[0]},
		"negative":     {Transport: trs[0], Codec: wire.NewCodec(), SendWait: -1},
	} {
		if _, err := host.New(&flooder{}, cfg); !errors.Is(err, host.ErrBadConfig) {
			t.Errorf("%s: got %v, want ErrBadConfig", name, err)
		}
	}
}

// nowTransport is a transport with SendNow (as transport/tcp has): it
// records the frames offered to it and takes those that accept says it
// may, passing them on with Send (which copies: mem's Send copies the
// payload).
type nowTransport struct {
	transport.Transport
	accept func(wire.Frame) bool
	mu     sync.Mutex
	offers []wire.Frame
}

func (n *nowTransport) SendNow(to core.NodeID, f wire.Frame) bool {
	n.mu.Lock()
	f.Dst = to // as the transport stamps it
	// SendNow is done with the payload when it returns (the host reuses
	// its encoding buffer): a record of it is a copy.
	f.Payload = bytes.Clone(f.Payload)
	n.offers = append(n.offers, f)
	n.mu.Unlock()
	if !n.accept(f) {
		return false
	}
	if err := n.Send(context.Background(), to, f); err != nil {
		panic(err)
	}
	return true
}

func (n *nowTransport) offered() []wire.Frame {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.offers)
}

// TestSendNowFirstOfTurn checks the package doc's "Sending": a transport
// that can write on the loop is offered the first frame of a loop turn to
// each peer, the later frames of the turn to that peer are queued, a
// frame it declines is queued too, and every frame arrives in order.
func TestSendNowFirstOfTurn(t *testing.T) {
	trs := memTransports(t, 3, mem.Config{})
	recs := []*transporttest.Recorder{transporttest.NewRecorder(), transporttest.NewRecorder()}
	trs[1].SetHandler(recs[0])
	trs[2].SetHandler(recs[1])
	nt := &nowTransport{Transport: trs[0], accept: func(f wire.Frame) bool {
		return f.Payload[0]%2 == 0 // even sequence numbers (one-byte varints)
	}}
	fl := &flooder{}
	c := startCluster(t, []transport.Transport{nt}, func(int) core.Machine { return fl }, nil)
	h := c.hosts[0]
	turn := func(sends ...[2]uint64) {
		if err := h.Do(context.Background(), func(_ core.Machine, env core.Env) {
			for _, s := range sends {
				env.Send(core.NodeID(s[0]), Ping{s[1]})
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	turn([2]uint64{2, 0}, [2]uint64{2, 1}, [2]uint64{3, 2}, [2]uint64{2, 3})
	turn([2]uint64{2, 5}, [2]uint64{3, 6})
	var got []string
	for _, f := range nt.offered() {
		got = append(got, fmt.Sprintf("%v:%d", f.Dst, f.Payload[0]))
	}
	if want := []string{"n2:0", "n3:2", "n2:5", "n3:6"}; !slices.Equal(got, want) {
		t.Errorf("offered to SendNow %v, want %v (the first frame of each turn to each peer)", got, want)
	}
	seqs := func(fs []wire.Frame) []byte {
		var b []byte
		for _, f := range fs {
			b = append(b, f.Payload[0])
		}
		return b
	}
	recs[0].Wait(t, timeout, "node 2's frames", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 4 })
	recs[1].Wait(t, timeout, "node 3's frames", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 2 })
	recs[0].Wait(t, timeout, "node 2's frames in order", func(fs []wire.Frame, _ []core.PeerHint) bool {
		return bytes.Equal(seqs(fs), []byte{0, 1, 3, 5})
	})
	if s := h.Stats(); s.Sent != 6 || s.SendDropped != 0 {
		t.Errorf("stats %+v, want 6 sent, none dropped", s)
	}
}

// suspectTransport is a transport that watches the detector's suspects
// (transport.SuspectWatcher): it records what it is told.
type suspectTransport struct {
	transport.Transport
	mu   sync.Mutex
	told []string
}

func (s *suspectTransport) Suspect(id core.NodeID, suspected bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told = append(s.told, fmt.Sprintf("%v:%v", id, suspected))
}

// TestSuspectWatcher checks the transport.SuspectWatcher contract: a
// transport that implements it is told of each suspicion the machine
// emits, and of its end (a withdrawal, a verdict, a recovery), in order,
// and of nothing else.
func TestSuspectWatcher(t *testing.T) {
	a, rb := recordedPeer(t)
	st := &suspectTransport{Transport: a}
	startCluster(t, []transport.Transport{st}, func(int) core.Machine { return &emitter{} }, nil)
	// The emits precede the send on the loop.
	rb.Wait(t, timeout, "the ping", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	st.mu.Lock()
	got := slices.Clone(st.told)
	st.mu.Unlock()
	if want := []string{"n3:true", "n3:false", "n3:false"}; !slices.Equal(got, want) {
		t.Errorf("told %v, want %v (Suspected, Failed, Recovered)", got, want)
	}
}

// recordedPeer returns endpoint 1 of a new in-memory hub, for the host
// under test, and the recorder of endpoint 2, its peer (closed when the
// test ends), which it can send to.
func recordedPeer(t *testing.T) (*mem.Endpoint, *transporttest.Recorder) {
	t.Helper()
	hub, err := mem.NewHub(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := hub.Join(1)
	b, _ := hub.Join(2)
	t.Cleanup(func() { b.Close() })
	a.SetPeer(2, b.Addr())
	rb := transporttest.NewRecorder()
	b.SetHandler(rb)
	return a, rb
}
