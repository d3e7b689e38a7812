package fd

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/core/coretest/scripttest"
)

// TestHeartbeatScripts replays the data-driven tests of the heartbeat
// detector (Phoenix §4): the scenarios of testdata/heartbeat/*.txt, each a
// script run by the driver core/coretest/scripttest, each citing the section of
// the paper it checks. Regenerate the expected output with
//
//	go test ./fd -run TestHeartbeatScripts -rewrite
//
// and review the diff of testdata: it is the test.
//
// A script drives one detector, the process under test, on a manual
// clock; the script plays its peers, which are not detectors: it delivers
// what they send, when they send it. Times are Go durations (5s, 100ms);
// node ids are integers, written n7 or 7.
//
// Commands:
//
//	init n=100 [self=0] [preset=default|aggressive|lan|wan|sim] [seed=1]
//	     [at=1s] [clock=37ms] [config keys]
//	    Starts a detector as node self of members 0…n−1, with the preset
//	    (default: DefaultHeartbeatConfig) changed by the config keys
//	    below, its random source seeded by seed. at starts it at that
//	    time of its clock; clock gives it a SharedClock that reads the
//	    detector's clock plus that offset. Prints the monitors it chose.
//	    Its ring neighbours (every member, with full mesh) send it
//	    insurance every T_insurance from half a period on, as they owe
//	    it, until crash or stop.
//	config [config keys]
//	    SetConfig with the current configuration changed by the keys;
//	    prints the error, if any, and the configuration in use.
//	    Keys: k (Monitors), interval, timeout, insurance, broken,
//	    mesh (FullMeshMax), ring (RingNeighbors), fanout (NoticeFanout),
//	    health (LocalHealthMax), probes (IndirectProbes), probe
//	    (ProbeTimeout). A script runs without indirect probes
//	    (probes=0, the paper's detector) unless it sets probes.
//	advance d=5s | to=16s [count] [events] [only=(ids)]
//	    Moves the clock, firing the detector's timers and the peers'
//	    periodic sends (see every) in time order; a timer due at the
//	    time of a send fires first.
//	recv from=p heartbeat [next=5s] [monitor] | ping | pong
//	     | notice subject=s [inc=0] [alive] | ack subject=s [inc=0] [alive]
//	     | probe-req subject=s [inc=0] [recheck] [hops=0] | probe-ack subject=s [inc=0]
//	     [bare] [every=100ms | every=(102ms,98ms)]
//	    Delivers a message of the detector's protocol from p as a Stack
//	    does: ObserveReceive, then Receive (bare: Receive alone). With
//	    every, p sends it again after each period (the list cycles)
//	    until crash or stop.
//	traffic from=p | to=p [every=1s]
//	    A message of another layer received from p (ObserveReceive) or
//	    sent to p (ObserveSend); with every, again after each period.
//	    p may be a list of ids and ranges: to=(20..35,37..79).
//	drop from=p [n=1]
//	    The next n periodic sends of p are lost.
//	crash node=p
//	    p sends nothing more: its periodic sends stop.
//	stop from=p | to=p
//	    Periodic sends from p, or our periodic traffic to p, stop.
//	hint node=p [refused]
//	    A core.PeerHint about p (refused: its connection was refused).
//	members n=50 [drop=(ids)] [add=(ids)] [renew=(ids)] [epoch=2]
//	    A core.MembersChanged with members 0…n−1 less drop plus add.
//	stall d=1s
//	    The process's loop stalls: the clock moves and no timer fires.
//	monitors | state ids=(…) | stats | health | incarnation
//	| connections | peers | unreachable
//	    Print the monitors, what the detector believes of the peers,
//	    its non-zero counters, its local health, its incarnation, how
//	    many peer records it keeps and how many are connections, and the
//	    records themselves.
//
// Every command that drives the detector prints what it did, in order:
//
//	16s n0→n50 notice suspect n50 inc=0   a message sent
//	16s n0 suspected n50                   an event reported upward
//
// With count, messages are summed per destination and content instead
// ("n3 heartbeat next=5s monitor ×12 5s…60s": twelve, the first at 5 s,
// the last at 60 s); with events, only events are printed; with
// only=(…), only the messages to those peers (events always). Every
// command that drives the detector takes these options.
func TestHeartbeatScripts(t *testing.T) {
	scripttest.Walk(t, "testdata/heartbeat", func(t *testing.T, path string) {
		s := &hbScript{}
		scripttest.Run(t, path, s.do)
	})
}

// hbScript is the state of one script: the detector under test and the
// peers' periodic sends.
type hbScript struct {
	h       *HeartbeatDetector
	env     *hbScriptEnv
	sources []*hbSource
}

// hbScriptEnv is a manual Env that records what the detector sends and
// emits, with the time.
type hbScriptEnv struct {
	*coretest.Env
	out []hbOut
}

type hbOut struct {
	at time.Duration
	to core.NodeID // a message's destination; core.None for an event
	m  core.Msg
	ev core.Event
}

func (e *hbScriptEnv) Send(to core.NodeID, m core.Msg) {
	e.out = append(e.out, hbOut{at: e.T, to: to, m: m})
}

func (e *hbScriptEnv) Emit(ev core.Event) {
	e.out = append(e.out, hbOut{at: e.T, to: core.None, ev: ev})
}

// hbSource is a periodic send of a peer (or our traffic to one).
type hbSource struct {
	peer    core.NodeID
	out     bool // our traffic to peer, not peer's to us
	m       core.Msg
	bare    bool
	periods []time.Duration
	i       int
	next    time.Duration
	drop    int
}

func (s *hbScript) do(t *testing.T, c *scripttest.Cmd) string {
	if c.Name != "init" && s.h == nil {
		t.Fatalf("%s: %s before init", c.Pos, c.Name)
	}
	switch c.Name {
	case "init":
		return s.init(t, c)
	case "config":
		cfg := s.h.Config()
		hbScriptConfig(t, c, &cfg)
		var b strings.Builder
		if err := s.h.SetConfig(cfg); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		b.WriteString(hbConfigString(s.h.Config()))
		return b.String() + s.flush(t, c)
	case "advance":
		to := s.env.T + hbDuration(t, c, "d", 0)
		if !c.Has("d") {
			to = hbDuration(t, c, "to", 0)
		}
		s.advance(to)
		return s.flush(t, c)
	case "recv":
		m := hbScriptMsg(t, c)
		from := core.NodeID(c.Int(t, "from"))
		s.recv(from, m, c.Has("bare"))
		if c.Has("every") {
			s.periodic(t, c, &hbSource{peer: from, m: m, bare: c.Has("bare")})
		}
		return s.flush(t, c)
	case "traffic":
		out := c.Has("to")
		key := "from"
		if out {
			key = "to"
		}
		for _, p := range hbNodes(t, c, key) {
			if out {
				s.h.ObserveSend(p)
			} else {
				s.h.ObserveReceive(p)
			}
			if c.Has("every") {
				s.periodic(t, c, &hbSource{peer: p, out: out})
			}
		}
		return s.flush(t, c)
	case "drop":
		from := core.NodeID(c.Int(t, "from"))
		for _, src := range s.sources {
			if src.peer == from && !src.out {
				src.drop += c.IntOr(t, "n", 1)
			}
		}
		return ""
	case "crash":
		ps := hbNodes(t, c, "node")
		s.sources = slices.DeleteFunc(s.sources, func(src *hbSource) bool { return slices.Contains(ps, src.peer) && !src.out })
		return ""
	case "stop":
		out := c.Has("to")
		key := "from"
		if out {
			key = "to"
		}
		ps := hbNodes(t, c, key)
		s.sources = slices.DeleteFunc(s.sources, func(src *hbSource) bool { return slices.Contains(ps, src.peer) && src.out == out })
		return ""
	case "hint":
		p := core.NodeID(c.Int(t, "node"))
		reason := "connection reset"
		if c.Has("refused") {
			reason = "dial: connection refused"
		}
		s.h.Handle(core.PeerHint{Node: p, Reason: reason, Refused: c.Has("refused")})
		return s.flush(t, c)
	case "members":
		members := ids(c.Int(t, "n"))
		if c.Has("drop") {
			drop := c.Ints(t, "drop")
			members = slices.DeleteFunc(members, func(id core.NodeID) bool { return slices.Contains(drop, int(id)) })
		}
		if c.Has("add") {
			for _, id := range c.Ints(t, "add") {
				members = append(members, core.NodeID(id))
			}
		}
		var renewed []core.NodeID
		if c.Has("renew") {
			for _, id := range c.Ints(t, "renew") {
				renewed = append(renewed, core.NodeID(id))
			}
		}
		s.h.Handle(core.MembersChanged{Epoch: uint64(c.IntOr(t, "epoch", 2)), Members: members, Renewed: renewed})
		return s.flush(t, c)
	case "stall":
		s.env.T += hbDuration(t, c, "d", 0)
		return ""
	case "monitors":
		return "monitors " + hbIDs(s.h.Monitors())
	case "state":
		var b strings.Builder
		for _, id := range c.Ints(t, "ids") {
			fmt.Fprintf(&b, "n%d %v\n", id, s.h.State(core.NodeID(id)))
		}
		return b.String()
	case "stats":
		return hbNonZero(s.h.Stats())
	case "health":
		return hbNonZero(s.h.Health())
	case "peers":
		return s.peers()
	case "connections":
		return fmt.Sprintf("tracked %d connections %d", s.h.Tracked(), s.h.Connections())
	case "incarnation":
		return fmt.Sprintf("incarnation %d", s.h.Incarnation())
	case "unreachable":
		return "unreachable " + hbIDs(s.h.Unreachable())
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Name)
	return ""
}

func (s *hbScript) init(t *testing.T, c *scripttest.Cmd) string {
	var cfg HeartbeatConfig
	switch p := c.StringOr(t, "preset", "default"); p {
	case "default":
		cfg = DefaultHeartbeatConfig()
	case "aggressive":
		cfg = AggressiveHeartbeatConfig()
	case "lan":
		cfg = LANHeartbeatConfig()
	case "wan":
		cfg = WANHeartbeatConfig()
	case "sim":
		cfg = SimHeartbeatConfig()
	default:
		t.Fatalf("%s: unknown preset %q", c.Pos, p)
	}
	cfg.IndirectProbes = 0
	hbScriptConfig(t, c, &cfg)
	self := core.NodeID(c.IntOr(t, "self", 0))
	s.env = &hbScriptEnv{Env: coretest.NewEnv(self, uint64(c.IntOr(t, "seed", 1)))}
	s.sources = nil
	if c.Has("clock") {
		cfg.SharedClock = hbOffsetClock{s.env.Env, hbDuration(t, c, "clock", 0)}
	}
	h, err := NewHeartbeat(cfg, ids(c.Int(t, "n")))
	if err != nil {
		t.Fatalf("%s: %v", c.Pos, err)
	}
	s.h = h
	s.env.T = hbDuration(t, c, "at", 0)
	h.Start(s.env)
	// The structural connections owe us insurance (and we wait for it
	// from the start): play it, half an insurance period from now and
	// every period after, until crash or stop.
	for _, id := range ids(c.Int(t, "n")) {
		if id != self && h.structural(id) {
			s.sources = append(s.sources, &hbSource{peer: id, m: HeartbeatMsg{Next: cfg.Insurance},
				periods: []time.Duration{cfg.Insurance}, next: s.env.T + cfg.Insurance/2})
		}
	}
	return "monitors " + hbIDs(h.Monitors()) + "\n" + s.flush(t, c)
}

// hbOffsetClock is a shared clock that reads the detector's clock plus an
// offset: processes started at different moments of it share it.
type hbOffsetClock struct {
	env    *coretest.Env
	offset time.Duration
}

func (c hbOffsetClock) Now() time.Duration { return c.env.T + c.offset }

// recv delivers m from peer as a Stack does, or bare.
func (s *hbScript) recv(from core.NodeID, m core.Msg, bare bool) {
	if m == nil {
		s.h.ObserveReceive(from)
		return
	}
	if !bare {
		s.h.ObserveReceive(from)
	}
	s.h.Receive(from, m)
}

// periodic registers src, whose first send was made now.
func (s *hbScript) periodic(t *testing.T, c *scripttest.Cmd, src *hbSource) {
	for _, v := range c.Strings(t, "every") {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s: every: %q is not a positive duration", c.Pos, v)
		}
		src.periods = append(src.periods, d)
	}
	src.next = s.env.T + src.periods[0]
	s.sources = append(s.sources, src)
}

// advance moves the clock to the time to, firing timers and periodic
// sends in time order.
func (s *hbScript) advance(to time.Duration) {
	for {
		next := time.Duration(-1)
		for _, src := range s.sources {
			if next < 0 || src.next < next {
				next = src.next
			}
		}
		if next < 0 || next > to {
			s.env.AdvanceTo(to, s.h)
			return
		}
		s.env.AdvanceTo(next, s.h)
		for _, src := range slices.Clone(s.sources) {
			if src.next != next {
				continue
			}
			src.i = (src.i + 1) % len(src.periods)
			src.next += src.periods[src.i]
			switch {
			case src.out:
				s.h.ObserveSend(src.peer)
			case src.drop > 0:
				src.drop--
			default:
				s.recv(src.peer, src.m, src.bare)
			}
		}
	}
}

// flush renders and forgets what the detector did since the last command.
func (s *hbScript) flush(t *testing.T, c *scripttest.Cmd) string {
	out := s.env.out
	s.env.out = nil
	var only []int
	if c.Has("only") {
		only = c.Ints(t, "only")
	}
	self := s.h.self
	var b strings.Builder
	type key struct {
		to core.NodeID
		m  string
	}
	type agg struct {
		n           int
		first, last time.Duration
	}
	counts := map[key]*agg{}
	for _, o := range out {
		if o.ev != nil {
			fmt.Fprintf(&b, "%v %v %s\n", o.at, self, hbEventString(o.ev))
			continue
		}
		if c.Has("events") || only != nil && !slices.Contains(only, int(o.to)) {
			continue
		}
		if c.Has("count") {
			k := key{o.to, hbMsgString(o.m)}
			if a := counts[k]; a != nil {
				a.n++
				a.last = o.at
			} else {
				counts[k] = &agg{1, o.at, o.at}
			}
			continue
		}
		fmt.Fprintf(&b, "%v %v→%v %s\n", o.at, self, o.to, hbMsgString(o.m))
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.to != b.to {
			return int(a.to) - int(b.to)
		}
		return strings.Compare(a.m, b.m)
	})
	for _, k := range keys {
		a := counts[k]
		fmt.Fprintf(&b, "%v %s ×%d %v…%v\n", k.to, k.m, a.n, a.first, a.last)
	}
	return b.String()
}

func hbMsgString(m core.Msg) string {
	switch m := m.(type) {
	case HeartbeatMsg:
		s := "heartbeat next=" + m.Next.String()
		if m.Monitor {
			s += " monitor"
		}
		return s
	case HeartbeatPing:
		return "ping"
	case HeartbeatPong:
		return "pong"
	case HeartbeatNotice:
		return "notice " + hbNoticeString(m)
	case HeartbeatNoticeAck:
		return "ack " + hbNoticeString(HeartbeatNotice(m))
	case HeartbeatProbeReq:
		out := fmt.Sprintf("probe-req %v inc=%d", m.Subject, m.Inc)
		if m.Recheck {
			out += " recheck"
		}
		if m.Hops > 0 {
			out += fmt.Sprintf(" hops=%d", m.Hops)
		}
		return out
	case HeartbeatProbeAck:
		return fmt.Sprintf("probe-ack %v inc=%d", m.Subject, m.Inc)
	}
	return fmt.Sprintf("%T %v", m, m)
}

func hbNoticeString(n HeartbeatNotice) string {
	what := "suspect"
	if n.Alive {
		what = "alive"
	}
	return fmt.Sprintf("%s %v inc=%d", what, n.Subject, n.Inc)
}

func hbEventString(ev core.Event) string {
	switch e := ev.(type) {
	case core.Suspected:
		return "suspected " + e.Node.String()
	case core.Unsuspected:
		return "unsuspected " + e.Node.String()
	case core.Failed:
		return "failed " + e.Node.String()
	case core.Recovered:
		return "recovered " + e.Node.String()
	}
	return fmt.Sprintf("%T %v", ev, ev)
}

// hbScriptMsg builds the message of a recv command.
func hbScriptMsg(t *testing.T, c *scripttest.Cmd) core.Msg {
	notice := func() HeartbeatNotice {
		return HeartbeatNotice{Subject: core.NodeID(c.Int(t, "subject")), Inc: uint64(c.IntOr(t, "inc", 0)), Alive: c.Has("alive")}
	}
	switch {
	case c.Has("heartbeat"):
		return HeartbeatMsg{Next: hbDuration(t, c, "next", 0), Monitor: c.Has("monitor")}
	case c.Has("ping"):
		return HeartbeatPing{}
	case c.Has("pong"):
		return HeartbeatPong{}
	case c.Has("notice"):
		return notice()
	case c.Has("ack"):
		return HeartbeatNoticeAck(notice())
	case c.Has("probe-req"):
		return HeartbeatProbeReq{Subject: core.NodeID(c.Int(t, "subject")), Inc: uint64(c.IntOr(t, "inc", 0)), Recheck: c.Has("recheck"), Hops: uint8(c.IntOr(t, "hops", 0))}
	case c.Has("probe-ack"):
		return HeartbeatProbeAck{Subject: core.NodeID(c.Int(t, "subject")), Inc: uint64(c.IntOr(t, "inc", 0))}
	}
	t.Fatalf("%s: recv: no message (heartbeat, ping, pong, notice, ack, probe-req, probe-ack)", c.Pos)
	return nil
}

// hbScriptConfig changes cfg by the config keys of c.
func hbScriptConfig(t *testing.T, c *scripttest.Cmd, cfg *HeartbeatConfig) {
	cfg.Monitors = c.IntOr(t, "k", cfg.Monitors)
	cfg.Interval = hbDuration(t, c, "interval", cfg.Interval)
	cfg.Timeout = hbDuration(t, c, "timeout", cfg.Timeout)
	cfg.Insurance = hbDuration(t, c, "insurance", cfg.Insurance)
	cfg.Broken = hbDuration(t, c, "broken", cfg.Broken)
	cfg.FullMeshMax = c.IntOr(t, "mesh", cfg.FullMeshMax)
	cfg.RingNeighbors = c.IntOr(t, "ring", cfg.RingNeighbors)
	cfg.NoticeFanout = c.IntOr(t, "fanout", cfg.NoticeFanout)
	cfg.LocalHealthMax = c.IntOr(t, "health", cfg.LocalHealthMax)
	cfg.IndirectProbes = c.IntOr(t, "probes", cfg.IndirectProbes)
	cfg.ProbeTimeout = hbDuration(t, c, "probe", cfg.ProbeTimeout)
	cfg.SettleIntervals = c.IntOr(t, "settle", cfg.SettleIntervals)
}

func hbConfigString(c HeartbeatConfig) string {
	return fmt.Sprintf("config k=%d interval=%v timeout=%v insurance=%v broken=%v mesh=%d ring=%d fanout=%d health=%d",
		c.Monitors, c.Interval, c.Timeout, c.Insurance, c.Broken, c.FullMeshMax, c.RingNeighbors, c.NoticeFanout, c.LocalHealthMax) + "\n"
}

func hbDuration(t *testing.T, c *scripttest.Cmd, key string, def time.Duration) time.Duration {
	if !c.Has(key) {
		return def
	}
	v := c.StringOr(t, key, "")
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %s: %v", c.Pos, key, err)
	}
	return d
}

// hbNodes returns the node ids of argument key: a list of ids and
// inclusive ranges ("20..79").
func hbNodes(t *testing.T, c *scripttest.Cmd, key string) []core.NodeID {
	var out []core.NodeID
	for _, v := range c.Strings(t, key) {
		lo, hi, isRange := strings.Cut(v, "..")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(strings.TrimPrefix(lo, "n"))
		b, errB := strconv.Atoi(strings.TrimPrefix(hi, "n"))
		if errA != nil || errB != nil || a > b {
			t.Fatalf("%s: %s: %q is not a node id or a range of them", c.Pos, key, v)
		}
		for id := a; id <= b; id++ {
			out = append(out, core.NodeID(id))
		}
	}
	return out
}

func hbIDs(ids []core.NodeID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, " ")
}

// hbNonZero renders the non-zero fields of a struct of counters.
func hbNonZero(v any) string {
	rv := reflect.ValueOf(v)
	var parts []string
	for i := range rv.NumField() {
		if f := rv.Field(i); !f.IsZero() {
			parts = append(parts, fmt.Sprintf("%s=%v", rv.Type().Field(i).Name, f.Interface()))
		}
	}
	return strings.Join(parts, " ")
}

// peers renders the detector's peer records.
func (s *hbScript) peers() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tracked %d connections %d\n", s.h.Tracked(), s.h.Connections())
	names := []string{"conn", "monitor", "monitoree", "probing", "gossip-suspect", "tell", "accused", "refused"}
	for _, r := range s.h.peers {
		fmt.Fprintf(&b, "%v %v", r.id, r.state)
		for i, name := range names {
			if r.flags&(1<<i) != 0 {
				b.WriteString(" " + name)
			}
		}
		if r.expect > 0 {
			fmt.Fprintf(&b, " expect=%v", r.expect)
		}
		b.WriteString("\n")
	}
	return b.String()
}
