package fd

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// Scripted tests of the heartbeat detector (Phoenix §4) on a manual Env.

func ids(n int) []core.NodeID {
	out := make([]core.NodeID, n)
	for i := range out {
		out[i] = core.NodeID(i)
	}
	return out
}

// startHB starts a detector as node self of members on a fresh Env.
func startHB(t *testing.T, cfg HeartbeatConfig, self core.NodeID, members []core.NodeID, seed uint64) (*HeartbeatDetector, *coretest.Env) {
	t.Helper()
	h, err := NewHeartbeat(cfg, members)
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(self, seed)
	h.Start(env)
	return h, env
}

// beats returns the heartbeats among sent, by destination.
func beats(sent []coretest.Sent) map[core.NodeID][]HeartbeatMsg {
	out := map[core.NodeID][]HeartbeatMsg{}
	for _, s := range sent {
		if m, ok := s.Msg.(HeartbeatMsg); ok {
			out[s.To] = append(out[s.To], m)
		}
	}
	return out
}

func sentOf[M core.Msg](sent []coretest.Sent) []coretest.Sent {
	var out []coretest.Sent
	for _, s := range sent {
		if _, ok := s.Msg.(M); ok {
			out = append(out, s)
		}
	}
	return out
}

func eventsOf[E core.Event](evs []core.Event) []E {
	var out []E
	for _, e := range evs {
		if x, ok := e.(E); ok {
			out = append(out, x)
		}
	}
	return out
}

// bigCfg is the default without full mesh, so that only monitors, ring
// neighbours and talkers are connections.
func bigCfg() HeartbeatConfig {
	c := DefaultHeartbeatConfig()
	c.FullMeshMax = 0
	return c
}

// §4.2.1: each process sends heartbeats to k distinct monitors chosen at
// random, every T_interval, each announcing the interval.
func TestHeartbeatKDistinctMonitors(t *testing.T) {
	cfg := bigCfg()
	cfg.Monitors = 3
	cfg.RingNeighbors = 0
	chosen := map[core.NodeID]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		h, env := startHB(t, cfg, 5, ids(20), seed)
		ms := h.Monitors()
		if len(ms) != 3 {
			t.Fatalf("seed %d: %d monitors, want 3", seed, len(ms))
		}
		sorted := slices.Clone(ms)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != 3 || slices.Contains(ms, 5) {
			t.Fatalf("seed %d: monitors %v not 3 distinct peers", seed, ms)
		}
		for _, m := range ms {
			chosen[m]++
		}
		// Over 10 intervals each monitor gets a heartbeat at least every
		// interval, the first within one, and nobody else gets any; one
		// of them may get one more, sent early to fall due with another
		// monitor's (beatAlong).
		env.AdvanceTo(10*cfg.Interval-1, h)
		sent := env.TakeSent()
		b := beats(sent)
		if len(b) != 3 {
			t.Fatalf("seed %d: heartbeats to %d peers, want the 3 monitors %v", seed, len(b), ms)
		}
		at := map[core.NodeID][]time.Duration{}
		for _, s := range sentOf[HeartbeatMsg](sent) {
			at[s.To] = append(at[s.To], s.At)
		}
		for _, m := range ms {
			if n := len(b[m]); n < 10 || n > 11 {
				t.Errorf("seed %d: monitor %v got %d heartbeats in 10 intervals, want 10 (11 with one sent early)", seed, m, n)
			}
			for _, hb := range b[m] {
				if hb != (HeartbeatMsg{Next: cfg.Interval, Monitor: true}) {
					t.Errorf("seed %d: heartbeat %v, want next %v monitor true", seed, hb, cfg.Interval)
				}
			}
			prev := time.Duration(0)
			for _, a := range at[m] {
				if a-prev > cfg.Interval {
					t.Errorf("seed %d: heartbeats to %v at %v: a gap over %v", seed, m, at[m], cfg.Interval)
					break
				}
				prev = a
			}
		}
		// Then exactly one per interval, to all three at the same times:
		// the process wakes once per interval for them.
		env.AdvanceTo(20*cfg.Interval-1, h)
		at = map[core.NodeID][]time.Duration{}
		for _, s := range sentOf[HeartbeatMsg](env.TakeSent()) {
			at[s.To] = append(at[s.To], s.At)
		}
		for _, m := range ms {
			if len(at[m]) != 10 || !slices.Equal(at[m], at[ms[0]]) {
				t.Errorf("seed %d: heartbeats at %v to %v and at %v to %v: want 10 each, together", seed, at[m], m, at[ms[0]], ms[0])
			}
			for i := 1; i < len(at[m]); i++ {
				if at[m][i]-at[m][i-1] != cfg.Interval {
					t.Errorf("seed %d: heartbeats to %v at %v: want every %v", seed, m, at[m], cfg.Interval)
					break
				}
			}
		}
	}
	// Random choice: every one of the 19 peers is chosen by some seed.
	if len(chosen) != 19 {
		t.Errorf("over 200 seeds only %d of 19 peers were ever chosen: %v", len(chosen), chosen)
	}
}

// §4.2.1: a monitor that received a heartbeat announcing I suspects the
// sender when nothing more arrives within I + T_timeout; the announced
// interval, not the monitor's own, counts; any message refreshes it.
func TestHeartbeatTimeoutArithmetic(t *testing.T) {
	cfg := bigCfg()
	cfg.LocalHealthMax = 0 // the paper's fixed timeouts (p's 7 s gap would otherwise lengthen its own)
	h, env := startHB(t, cfg, 0, ids(100), 1)
	const p, q = core.NodeID(50), core.NodeID(60)
	announced := 3 * time.Second
	env.AdvanceTo(time.Second, h)
	h.Receive(p, HeartbeatMsg{Next: announced, Monitor: true})
	h.Receive(q, HeartbeatMsg{Next: announced, Monitor: true})
	// An application message from p at 8 s (seen by the Stack) moves its
	// deadline to 8 s + 3 s + 5 s = 16 s; q's stays at 1 + 3 + 5 = 9 s.
	env.AdvanceTo(8*time.Second, h)
	h.ObserveReceive(p)
	deadline := time.Second + announced + cfg.Timeout
	env.AdvanceTo(deadline-1, h)
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 0 {
		t.Fatalf("suspected %v before the deadline %v", s, deadline)
	}
	env.AdvanceTo(deadline, h)
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 1 || s[0].Node != q {
		t.Fatalf("at %v got suspicions %v, want exactly %v", deadline, s, q)
	}
	env.TakeSent()
	env.AdvanceTo(16*time.Second-1, h)
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 0 {
		t.Fatalf("suspected %v at %v despite traffic at 8 s", s, env.Now())
	}
	env.AdvanceTo(16*time.Second, h)
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 1 || s[0].Node != p {
		t.Fatalf("at 16 s got suspicions %v, want exactly %v", s, p)
	}
	if st := h.State(p); st != HeartbeatSuspected {
		t.Errorf("state %v, want suspected", st)
	}
	// The suspicion is broadcast (§4.2: one process noticing suffices) and
	// sent to the suspect.
	notices := slices.DeleteFunc(sentOf[HeartbeatNotice](env.TakeSent()), func(s coretest.Sent) bool {
		return s.Msg.(HeartbeatNotice).Subject == q // q's, retransmitted (nobody acknowledges here)
	})
	var toP bool
	for _, s := range notices {
		if s.Msg.(HeartbeatNotice) != (HeartbeatNotice{Subject: p}) {
			t.Errorf("notice %v, want a suspicion of %v at incarnation 0", s.Msg, p)
		}
		toP = toP || s.To == p
	}
	if !toP || len(notices) != 1+7 { // the suspect, and distances 1..64 of 100
		t.Errorf("notice sent to %d peers (suspect told: %v), want the suspect and 7 fingers", len(notices), toP)
	}
}

// §4.2.2: insurance heartbeats go to every other connection every
// T_insurance; in a small job that is every non-monitor member.
func TestHeartbeatInsuranceFullMesh(t *testing.T) {
	cfg := DefaultHeartbeatConfig() // FullMeshMax 64
	const n = 10
	h, env := startHB(t, cfg, 3, ids(n), 7)
	mons := h.Monitors()
	env.AdvanceTo(cfg.Insurance*3-1, h)
	b := beats(env.TakeSent())
	for _, p := range ids(n) {
		if p == 3 {
			continue
		}
		got := b[p]
		if slices.Contains(mons, p) {
			if len(got) != int(3*cfg.Insurance/cfg.Interval) {
				t.Errorf("monitor %v: %d heartbeats in 3 T_insurance, want %d", p, len(got), 3*cfg.Insurance/cfg.Interval)
			}
			continue
		}
		if len(got) != 3 {
			t.Errorf("peer %v: %d insurance heartbeats in 3 T_insurance, want 3", p, len(got))
		}
		for _, hb := range got {
			if hb != (HeartbeatMsg{Next: cfg.Insurance}) {
				t.Errorf("peer %v: %v, want an insurance heartbeat announcing %v", p, hb, cfg.Insurance)
			}
		}
	}
	if st := h.Stats(); st.InsuranceSent != 3*(n-1-2) {
		t.Errorf("InsuranceSent = %d, want %d", st.InsuranceSent, 3*(n-1-2))
	}
}

// Above FullMeshMax, insurance goes only to the connections a process has:
// its ring neighbours, the processes that chose it, and its talkers; the
// memory stays O(k + connections) with 100,000 members.
func TestHeartbeatInsuranceConnectionsAtScale(t *testing.T) {
	cfg := DefaultHeartbeatConfig()
	members := ids(100_000)
	h, env := startHB(t, cfg, 500, members, 3)
	if got := h.Tracked(); got > cfg.Monitors+2*cfg.RingNeighbors {
		t.Fatalf("tracks %d peers at start, want ≤ k + 2 ring neighbours = %d", got, cfg.Monitors+2)
	}
	// A process that chose us (and then sends only application messages,
	// which the Stack shows us), and an application peer.
	h.Receive(77_000, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	h.ObserveSend(12_345)
	// A notice passing through from a stranger creates no connection.
	h.ObserveReceive(99_999)
	h.Receive(99_999, HeartbeatNotice{Subject: 42_000, Inc: 0, Alive: true})
	for at := time.Second; at < 2*cfg.Insurance; at += time.Second {
		env.AdvanceTo(at, h)
		h.ObserveReceive(77_000)
	}
	env.AdvanceTo(2*cfg.Insurance, h)
	b := beats(env.TakeSent())
	want := []core.NodeID{499, 501, 12_345, 77_000}
	want = append(want, h.Monitors()...)
	slices.Sort(want)
	var got []core.NodeID
	for p := range b {
		got = append(got, p)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("heartbeats went to %v, want %v (ring, talkers, monitors)", got, want)
	}
	if len(b[77_000]) != 2 || len(b[499]) != 2 {
		t.Errorf("insurance over 2 T_insurance: %d to the monitoree, %d to the ring neighbour; want 2 each", len(b[77_000]), len(b[499]))
	}
	// The application peer talked once, at the start: its connection
	// fell idle and closed, with a heartbeat announcing nothing.
	if tb := b[12_345]; len(tb) == 0 || tb[len(tb)-1] != (HeartbeatMsg{}) {
		t.Errorf("heartbeats to the peer talked to once: %v, want the last to announce nothing", tb)
	}
	if h.State(99_999) != HeartbeatAlive || h.Connections() != len(want)-1 || h.Stats().Closed != 1 {
		t.Errorf("%d connections, %d closed; want %d, 1", h.Connections(), h.Stats().Closed, len(want)-1)
	}
}

// A connection made by traffic closes when it falls idle: a process that
// talked once to many peers (a membership's tree changes with every view)
// owes them nothing after T_insurance of silence, tells each once to stop
// waiting, and opens the connection again when they talk again. Its ring
// neighbours, its monitors and the process that chose it keep theirs.
func TestHeartbeatIdleConnectionsClose(t *testing.T) {
	cfg := AggressiveHeartbeatConfig() // T_insurance = 4 s
	cfg.FullMeshMax = 0
	const n = 200
	h, env := startHB(t, cfg, 100, ids(n), 11)
	h.Receive(7, HeartbeatMsg{Next: cfg.Interval, Monitor: true}) // 7 chose us
	var talked []core.NodeID
	for p := core.NodeID(20); p < 80; p++ {
		if !slices.Contains(h.Monitors(), p) {
			h.ObserveSend(p)
			talked = append(talked, p)
		}
	}
	for at := time.Duration(0); at <= 5*cfg.Insurance; at += cfg.Interval {
		env.AdvanceTo(at, h)
		h.ObserveReceive(7)
		h.Receive(7, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	}
	late := 2 * cfg.Insurance
	b := map[core.NodeID][]HeartbeatMsg{}
	for _, s := range env.TakeSent() {
		if hb, ok := s.Msg.(HeartbeatMsg); ok && s.At > late {
			b[s.To] = append(b[s.To], hb)
		}
	}
	for _, p := range talked {
		if len(b[p]) != 0 {
			t.Errorf("peer %v, talked to once at 0: heartbeats %v after %v, want none", p, b[p], late)
		}
	}
	for _, p := range []core.NodeID{7, 99, 101} {
		if len(b[p]) == 0 {
			t.Errorf("%v (chose us, or ring neighbour): no insurance after %v", p, late)
		}
	}
	if c := h.Connections(); c != cfg.Monitors+3 || h.Stats().Closed != uint64(len(talked)) {
		t.Errorf("%d connections, %d closed; want k + 3 = %d, %d", c, h.Stats().Closed, cfg.Monitors+3, len(talked))
	}
	// The peer's side: a heartbeat announcing nothing ends its wait, and
	// makes no connection (it would reopen the one just closed).
	h.Receive(150, HeartbeatMsg{Next: cfg.Insurance})
	h.Receive(150, HeartbeatMsg{})
	env.Advance(3*cfg.Insurance, h)
	if got := h.State(150); got != HeartbeatAlive {
		t.Errorf("peer that stopped its insurance is %v, want alive", got)
	}
	for _, s := range env.TakeSent() {
		if s.To == 150 {
			t.Errorf("sent %v to a peer whose only messages were insurance", s.Msg)
		}
	}
	// Talking again reopens the connection.
	h.ObserveSend(talked[0])
	if c := h.Connections(); c != cfg.Monitors+4 {
		t.Errorf("%d connections after talking again, want %d", c, cfg.Monitors+4)
	}
}

// §4.2.3: every message counts as a heartbeat: a link busy with
// application traffic carries no heartbeat once the monitor was told the
// interval (the first heartbeat, which announces it, is never skipped),
// and the skipped ones are counted.
func TestHeartbeatTrafficSuppresses(t *testing.T) {
	cfg := bigCfg()
	h, env := startHB(t, cfg, 0, ids(1000), 5)
	mons := h.Monitors()
	busy, idle := mons[0], mons[1]
	for t0 := time.Duration(0); t0 < 60*time.Second; t0 += time.Second {
		env.AdvanceTo(t0, h)
		h.ObserveSend(busy)
	}
	env.AdvanceTo(60*time.Second, h)
	sent := env.TakeSent()
	b := beats(sent)
	if len(b[busy]) != 1 || b[busy][0] != (HeartbeatMsg{Next: cfg.Interval, Monitor: true}) {
		t.Errorf("heartbeats %v to a monitor that got a message every second, want only the first, announcing %v", b[busy], cfg.Interval)
	}
	for _, s := range sent {
		if s.To == busy && s.At >= cfg.Interval {
			t.Errorf("heartbeat to the busy monitor at %v, want only the first, within T_interval", s.At)
		}
	}
	if len(b[idle]) != 12 {
		t.Errorf("%d heartbeats to the idle monitor in 60 s, want 12", len(b[idle]))
	}
	if s := h.Stats().Suppressed; s < 10 || s > 11 {
		t.Errorf("Suppressed = %d, want 10 or 11 (one per interval of the busy link after the first)", s)
	}
	// When the traffic stops, heartbeats resume T_interval after the last
	// message.
	env.AdvanceTo(59*time.Second+cfg.Interval, h)
	if b := beats(env.TakeSent()); len(b[busy]) != 1 {
		t.Errorf("%d heartbeats to the busy monitor T_interval after its last message, want 1", len(b[busy]))
	}
}

// §4.3: a suspected peer is declared failed only after T_broken without a
// message; once; a message before that clears the suspicion; a failed peer
// heard again is recovered.
func TestHeartbeatBrokenAndRecovery(t *testing.T) {
	cfg := bigCfg()
	h, env := startHB(t, cfg, 0, ids(100), 1)
	const p = core.NodeID(30)
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	suspectAt := cfg.Interval + cfg.Timeout
	env.AdvanceTo(suspectAt, h)
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 1 {
		t.Fatalf("suspicions %v at %v, want one", s, suspectAt)
	}
	// A message within T_broken: no failure.
	env.AdvanceTo(suspectAt+cfg.Broken-1, h)
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	env.AdvanceTo(suspectAt+cfg.Broken+time.Second, h)
	evs := env.TakeEmitted()
	if u := eventsOf[core.Unsuspected](evs); len(u) != 1 || len(eventsOf[core.Failed](evs)) != 0 {
		t.Fatalf("events %v: want Unsuspected and no Failed", evs)
	}
	// Since we suspected it, p is told (so that it can refute elsewhere).
	if n := sentOf[HeartbeatNotice](env.TakeSent()); !slices.ContainsFunc(n, func(s coretest.Sent) bool { return s.To == p }) {
		t.Errorf("cleared suspect not told of the suspicion")
	}
	// Silence again: suspected at last+10 s, failed once, (1 + H)·T_broken
	// later: the link has just been silent past its deadline (lossy).
	last := suspectAt + cfg.Broken - 1
	broken := cfg.Broken * time.Duration(1+cfg.LocalHealthMax)
	env.AdvanceTo(last+cfg.Interval+cfg.Timeout+broken-1, h)
	evs = env.TakeEmitted()
	if len(eventsOf[core.Suspected](evs)) != 1 || len(eventsOf[core.Failed](evs)) != 0 {
		t.Fatalf("events %v: want one Suspected and no Failed yet", evs)
	}
	env.AdvanceTo(last+cfg.Interval+cfg.Timeout+broken, h)
	if f := eventsOf[core.Failed](env.TakeEmitted()); len(f) != 1 || f[0].Node != p {
		t.Fatalf("want Failed{%v} exactly (1 + H)·T_broken after the suspicion, got %v", p, f)
	}
	env.AdvanceTo(10*time.Minute, h)
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Errorf("events after the failure: %v, want none (Failed once)", evs)
	}
	// A failed connection (a member the view keeps) gets a heartbeat every
	// Interval (so that a partitioned peer hears from us when the
	// partition heals), no more.
	failAt := last + cfg.Interval + cfg.Timeout + broken
	want := int((10*time.Minute - failAt) / cfg.Interval)
	if b := beats(env.TakeSent()); len(b[p]) < want-1 || len(b[p]) > want+1 {
		t.Errorf("%d heartbeats to a failed peer in the %v after its failure, want one per Interval (%d)", len(b[p]), 10*time.Minute-failAt, want)
	}
	// Heard again: recovered, and insurance resumes.
	h.ObserveReceive(p)
	h.Receive(p, HeartbeatMsg{Next: cfg.Insurance})
	if r := eventsOf[core.Recovered](env.TakeEmitted()); len(r) != 1 || r[0].Node != p {
		t.Fatalf("want Recovered{%v}, got %v", p, r)
	}
	// It is told it was suspected (and acknowledges).
	told := sentOf[HeartbeatNotice](env.TakeSent())
	if len(told) != 1 || told[0].To != p {
		t.Fatalf("recovered peer told %v, want one notice to %v", told, p)
	}
	h.Receive(p, HeartbeatNoticeAck(told[0].Msg.(HeartbeatNotice)))
	env.Advance(cfg.Insurance, h)
	if b := beats(env.TakeSent()); len(b[p]) != 1 {
		t.Errorf("%d insurance heartbeats to the recovered peer in T_insurance, want 1", len(b[p]))
	}
}

// §4.2.1, §5.1: parameters change while running; timers follow.
func TestHeartbeatSetConfig(t *testing.T) {
	cfg := bigCfg()
	cfg.RingNeighbors = 0
	h, env := startHB(t, cfg, 0, ids(1000), 9)
	env.AdvanceTo(20*time.Second, h)
	mon := h.Monitors()[0]
	env.TakeSent()

	bad := cfg
	bad.Interval = 0
	if err := h.SetConfig(bad); !errors.Is(err, ErrHeartbeatConfig) {
		t.Fatalf("SetConfig(Interval 0) = %v, want ErrHeartbeatConfig", err)
	}
	if h.Config() != cfg {
		t.Fatalf("a rejected config changed the detector")
	}

	// Longer interval: the next heartbeat still comes within the old
	// announced interval and announces the new one; then every 20 s.
	longer := cfg
	longer.Interval = 20 * time.Second
	longer.Insurance = 400 * time.Second
	if err := h.SetConfig(longer); err != nil {
		t.Fatal(err)
	}
	env.AdvanceTo(20*time.Second+cfg.Interval, h)
	sent := env.TakeSent()
	b := beats(sent)
	if len(b[mon]) != 1 || b[mon][0].Next != longer.Interval {
		t.Fatalf("after raising T_interval: %v to the monitor within the old interval, want one heartbeat announcing %v", b[mon], longer.Interval)
	}
	i := slices.IndexFunc(sent, func(s coretest.Sent) bool { return s.To == mon })
	env.AdvanceTo(sent[i].At+longer.Interval-1, h)
	if b := beats(env.TakeSent()); len(b[mon]) != 0 {
		t.Fatalf("heartbeat %v before the new interval elapsed", b[mon])
	}
	env.Advance(1, h)
	if b := beats(env.TakeSent()); len(b[mon]) != 1 {
		t.Fatalf("no heartbeat one new interval later")
	}

	// Shorter timeout: a pending deadline moves earlier.
	const p = core.NodeID(700)
	const pNext = 10 * time.Second
	h.Receive(p, HeartbeatMsg{Next: pNext, Monitor: true})
	at := env.Now()
	shorter := longer
	shorter.Timeout = time.Second
	if err := h.SetConfig(shorter); err != nil {
		t.Fatal(err)
	}
	env.AdvanceTo(at+11*time.Second, h)
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 1 || s[0].Node != p {
		t.Fatalf("with T_timeout 1 s, want %v suspected 11 s after its heartbeat, got %v", p, s)
	}
	// Longer T_broken re-arms the pending failure.
	slow := shorter
	slow.Broken = time.Minute
	if err := h.SetConfig(slow); err != nil {
		t.Fatal(err)
	}
	// (A monitor's own suspicion waits a quarter of the peer's interval
	// more: see monitorBroken.)
	env.Advance(time.Minute+pNext/4-1, h)
	if f := eventsOf[core.Failed](env.TakeEmitted()); len(f) != 0 {
		t.Fatalf("failed %v before the new T_broken", f)
	}
	env.Advance(1, h)
	if f := eventsOf[core.Failed](env.TakeEmitted()); len(f) != 1 {
		t.Fatalf("not failed at the new T_broken")
	}

	// k = 2 → 3: a new monitor is told at once; 3 → 1: the demoted ones
	// are told to expect insurance only.
	env.TakeSent()
	more := slow
	more.Monitors = 3
	if err := h.SetConfig(more); err != nil {
		t.Fatal(err)
	}
	ms := h.Monitors()
	b = beats(env.TakeSent())
	if len(ms) != 3 || len(b[ms[2]]) != 1 || !b[ms[2]][0].Monitor {
		t.Fatalf("after k=3: monitors %v, heartbeats %v; want a third monitor told at once", ms, b)
	}
	fewer := more
	fewer.Monitors = 1
	if err := h.SetConfig(fewer); err != nil {
		t.Fatal(err)
	}
	b = beats(env.TakeSent())
	if got := h.Monitors(); len(got) != 1 || got[0] != ms[0] {
		t.Fatalf("after k=1 monitors %v, want [%v]", got, ms[0])
	}
	for _, d := range ms[1:] {
		if len(b[d]) != 1 || b[d][0] != (HeartbeatMsg{Next: fewer.Insurance}) {
			t.Errorf("demoted monitor %v got %v, want one heartbeat announcing insurance %v", d, b[d], fewer.Insurance)
		}
	}
}

// The detector follows the member list: a monitor that leaves is replaced
// (the new one told at once), the departed peer told to stop expecting us.
func TestHeartbeatMembershipChanges(t *testing.T) {
	cfg := bigCfg()
	members := ids(50)
	h, env := startHB(t, cfg, 10, members, 4)
	env.AdvanceTo(cfg.Interval, h) // every monitor got its first heartbeat
	env.TakeSent()
	old := h.Monitors()
	gone := old[0]
	next := slices.DeleteFunc(slices.Clone(members), func(id core.NodeID) bool { return id == gone })
	h.Handle(core.MembersChanged{Epoch: 2, Members: next})
	ms := h.Monitors()
	if len(ms) != 2 || slices.Contains(ms, gone) || ms[0] != old[1] {
		t.Fatalf("monitors %v after %v left (were %v)", ms, gone, old)
	}
	b := beats(env.TakeSent())
	if len(b[ms[1]]) != 1 || !b[ms[1]][0].Monitor {
		t.Errorf("new monitor %v got %v, want an immediate heartbeat", ms[1], b[ms[1]])
	}
	if len(b[gone]) != 1 || b[gone][0].Next != 0 {
		t.Errorf("departed monitor got %v, want one heartbeat announcing 0 (stop expecting)", b[gone])
	}
	if h.State(gone) != HeartbeatAlive || slices.ContainsFunc(h.peers, func(r *hbPeer) bool { return r.id == gone }) {
		t.Errorf("record of the departed peer kept")
	}
	env.Advance(time.Hour, h)
	if b := beats(env.TakeSent()); len(b[gone]) != 0 {
		t.Errorf("heartbeats to a departed peer")
	}
	// A joiner appended to the list is a candidate, and growing the list
	// from 2 members tops the monitors up.
	h2, env2 := startHB(t, cfg, 0, ids(2), 4)
	if len(h2.Monitors()) != 1 {
		t.Fatalf("with one peer, %d monitors, want 1", len(h2.Monitors()))
	}
	h2.Handle(core.MembersChanged{Epoch: 2, Members: ids(3)})
	if ms := h2.Monitors(); len(ms) != 2 || !slices.Contains(ms, 2) {
		t.Errorf("after a join monitors %v, want the joiner 2 added", ms)
	}
	_ = env2
}

// A suspected monitor is replaced, and is told to expect only insurance.
func TestHeartbeatSuspectedMonitorReplaced(t *testing.T) {
	cfg := bigCfg()
	h, env := startHB(t, cfg, 0, ids(100), 8)
	mon := h.Monitors()[0]
	h.Receive(99, HeartbeatNotice{Subject: mon})
	if slices.Contains(h.Monitors(), mon) || len(h.Monitors()) != 2 {
		t.Fatalf("monitors %v still contain the suspect %v", h.Monitors(), mon)
	}
	b := beats(env.TakeSent())
	if len(b[mon]) != 1 || b[mon][0].Monitor {
		t.Errorf("suspected monitor got %v, want one demoting heartbeat", b[mon])
	}
}

// core.PeerHint triggers a ping; only silence for T_timeout after it makes
// the peer suspected; a pong clears the probe.
func TestHeartbeatPeerHint(t *testing.T) {
	cfg := bigCfg()
	h, env := startHB(t, cfg, 0, ids(100), 2)
	h.Handle(core.PeerHint{Node: 40, Reason: "connection reset"})
	h.Handle(core.PeerHint{Node: 41, Reason: "connection reset"})
	pings := sentOf[HeartbeatPing](env.TakeSent())
	if len(pings) != 2 {
		t.Fatalf("%d pings for two hints, want 2", len(pings))
	}
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("a hint produced %v: a hint is not a verdict", evs)
	}
	env.Advance(time.Millisecond, h)
	h.Receive(41, HeartbeatPong{})
	env.Advance(cfg.Timeout, h)
	s := eventsOf[core.Suspected](env.TakeEmitted())
	if len(s) != 1 || s[0].Node != 40 {
		t.Fatalf("suspicions %v, want only the silent 40", s)
	}
	// A ping is answered.
	h.Receive(41, HeartbeatPing{})
	if p := sentOf[HeartbeatPong](env.TakeSent()); len(p) != 1 || p[0].To != 41 {
		t.Errorf("ping answered with %v", p)
	}
}

// A hint that the peer's connection was refused (nothing listens at its
// address) makes it suspected at once, with the suspicion broadcast; it is
// declared failed only after T_broken, and a live peer's message clears it
// before that. A refusal of a non-member is ignored.
func TestHeartbeatRefusedHint(t *testing.T) {
	cfg := bigCfg()
	h, env := startHB(t, cfg, 0, ids(100), 2)
	env.TakeSent()
	h.Handle(core.PeerHint{Node: 40, Reason: "dial: connection refused", Refused: true})
	h.Handle(core.PeerHint{Node: 41, Reason: "dial: connection refused", Refused: true})
	h.Handle(core.PeerHint{Node: 500, Reason: "dial: connection refused", Refused: true})
	s := eventsOf[core.Suspected](env.TakeEmitted())
	if len(s) != 2 || s[0].Node != 40 || s[1].Node != 41 {
		t.Fatalf("suspicions %v on refusals, want 40 and 41 at once", s)
	}
	if n := sentOf[HeartbeatNotice](env.TakeSent()); len(n) == 0 {
		t.Fatal("the suspicion was not broadcast")
	}
	env.Advance(cfg.Broken/2, h)
	h.Receive(41, HeartbeatMsg{Next: cfg.Interval}) // alive after all
	if u := eventsOf[core.Unsuspected](env.TakeEmitted()); len(u) != 1 || u[0].Node != 41 {
		t.Fatalf("a message from 41 gave %v, want it unsuspected", u)
	}
	env.Advance(cfg.Broken, h)
	f := eventsOf[core.Failed](env.TakeEmitted())
	if len(f) != 1 || f[0].Node != 40 {
		t.Fatalf("failures %v, want 40 only, after T_broken", f)
	}
}

// §4.2 (the routing-table propagation): a suspicion notice is applied and
// forwarded once to distances 1, 2, 4, …; the suspect refutes with a
// higher incarnation, which clears the suspicion everywhere.
func TestHeartbeatNotices(t *testing.T) {
	cfg := bigCfg()
	members := ids(16)
	h, env := startHB(t, cfg, 3, members, 6)
	env.TakeSent()
	h.Receive(1, HeartbeatNotice{Subject: 9})
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 1 || s[0].Node != 9 {
		t.Fatalf("notice did not make 9 suspected: %v", s)
	}
	var to []core.NodeID
	for _, s := range sentOf[HeartbeatNotice](env.TakeSent()) {
		to = append(to, s.To)
	}
	slices.Sort(to)
	if want := []core.NodeID{4, 5, 7, 11}; !slices.Equal(to, want) { // 3+1, 3+2, 3+4, 3+8
		t.Fatalf("forwarded to %v, want %v", to, want)
	}
	// A duplicate is not forwarded again.
	h.Receive(2, HeartbeatNotice{Subject: 9})
	if n := sentOf[HeartbeatNotice](env.TakeSent()); len(n) != 0 {
		t.Errorf("duplicate forwarded to %d peers", len(n))
	}
	// The refutation (incarnation 1) clears it before T_broken and is
	// forwarded; a stale suspicion of incarnation 0 is then ignored.
	env.Advance(cfg.Broken/2, h)
	h.Receive(9, HeartbeatNotice{Subject: 9, Inc: 1, Alive: true})
	if u := eventsOf[core.Unsuspected](env.TakeEmitted()); len(u) != 1 {
		t.Fatalf("refutation did not clear the suspicion")
	}
	if n := sentOf[HeartbeatNotice](env.TakeSent()); len(n) == 0 {
		t.Errorf("refutation not forwarded")
	}
	h.Receive(2, HeartbeatNotice{Subject: 9, Inc: 0})
	env.Advance(time.Minute, h)
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Errorf("stale suspicion produced %v", evs)
	}

	// The subject itself refutes a suspicion of its incarnation.
	h.Receive(5, HeartbeatNotice{Subject: 3, Inc: 0})
	if h.Incarnation() != 1 {
		t.Fatalf("incarnation %d after a suspicion of itself, want 1", h.Incarnation())
	}
	refutations := 0
	for _, s := range sentOf[HeartbeatNotice](env.TakeSent()) {
		if n := s.Msg.(HeartbeatNotice); n.Subject == 3 {
			refutations++
			if n != (HeartbeatNotice{Subject: 3, Inc: 1, Alive: true}) {
				t.Errorf("refutation %v", s.Msg)
			}
		}
	}
	if refutations != 4 {
		t.Errorf("refutation sent to %d fingers, want 4", refutations)
	}
	h.Receive(6, HeartbeatNotice{Subject: 3, Inc: 0})
	if h.Incarnation() != 1 || slices.ContainsFunc(env.TakeSent(), func(s coretest.Sent) bool {
		n, ok := s.Msg.(HeartbeatNotice)
		return ok && n.Subject == 3
	}) {
		t.Errorf("a stale suspicion of itself was refuted again within T_broken of its refutation")
	}
	// Later, a suspicion of the older incarnation is refuted again, at the
	// current one: its sender (a process that saw this one leave the view
	// and come back forgets its incarnation) and those it told would
	// otherwise declare this live process failed.
	env.Advance(cfg.Broken, h)
	env.TakeSent()
	h.Receive(6, HeartbeatNotice{Subject: 3, Inc: 0})
	refutations = 0
	for _, s := range sentOf[HeartbeatNotice](env.TakeSent()) {
		if n := s.Msg.(HeartbeatNotice); n.Subject == 3 {
			refutations++
			if n != (HeartbeatNotice{Subject: 3, Inc: 1, Alive: true}) {
				t.Errorf("second refutation %v, want incarnation 1 kept", s.Msg)
			}
		}
	}
	if refutations != 4 || h.Incarnation() != 1 {
		t.Errorf("a stale suspicion of itself after T_broken: refutation sent to %d fingers (want 4), incarnation %d (want 1)", refutations, h.Incarnation())
	}
}

// Notices are retransmitted, with back-off, to the peers that did not
// acknowledge them, until the peer is declared failed or the notice is
// superseded; every notice received is acknowledged.
func TestHeartbeatNoticeRetransmission(t *testing.T) {
	cfg := bigCfg()
	h, env := startHB(t, cfg, 0, ids(16), 6)
	env.TakeSent()
	h.Receive(15, HeartbeatNotice{Subject: 9})
	sent := env.TakeSent()
	if a := sentOf[HeartbeatNoticeAck](sent); len(a) != 1 || a[0].To != 15 || a[0].Msg != (HeartbeatNoticeAck{Subject: 9}) {
		t.Fatalf("acknowledgements %v, want one to the sender", a)
	}
	fwd := sentOf[HeartbeatNotice](sent) // to 1, 2, 4, 8
	if len(fwd) != 4 {
		t.Fatalf("forwarded to %d, want 4", len(fwd))
	}
	h.Receive(1, HeartbeatNoticeAck{Subject: 9})
	h.Receive(2, HeartbeatNoticeAck{Subject: 9})
	resentTo := func() []core.NodeID {
		var to []core.NodeID
		for _, s := range sentOf[HeartbeatNotice](env.TakeSent()) {
			to = append(to, s.To)
		}
		slices.Sort(to)
		return to
	}
	env.Advance(cfg.Timeout, h)
	if got := resentTo(); !slices.Equal(got, []core.NodeID{4, 8}) {
		t.Fatalf("after T_timeout resent to %v, want the silent 4 and 8", got)
	}
	env.Advance(2*cfg.Timeout-1, h)
	if got := resentTo(); len(got) != 0 {
		t.Fatalf("resent to %v before the doubled back-off", got)
	}
	env.Advance(1, h)
	if got := resentTo(); !slices.Equal(got, []core.NodeID{4, 8}) {
		t.Fatalf("after 2·T_timeout more resent to %v, want 4 and 8", got)
	}
	// 8 acknowledges; 9 refutes, which supersedes the suspicion: nothing
	// more about incarnation 0 is sent.
	h.Receive(8, HeartbeatNoticeAck{Subject: 9})
	h.Receive(9, HeartbeatNotice{Subject: 9, Inc: 1, Alive: true})
	env.Advance(time.Hour, h)
	for _, s := range sentOf[HeartbeatNotice](env.TakeSent()) {
		if n := s.Msg.(HeartbeatNotice); n.Inc == 0 {
			t.Fatalf("superseded suspicion resent to %v", s.To)
		}
	}
	if st := h.Stats(); st.NoticesResent < 4 || st.AcksSent != 2 {
		t.Errorf("stats %+v: want ≥ 4 retransmissions and 2 acknowledgements", st)
	}
}

func TestHeartbeatConfigValidate(t *testing.T) {
	for _, c := range []HeartbeatConfig{DefaultHeartbeatConfig(), LANHeartbeatConfig(), WANHeartbeatConfig(), SimHeartbeatConfig(), AggressiveHeartbeatConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("preset %+v: %v", c, err)
		}
	}
	d := DefaultHeartbeatConfig()
	if d.Monitors != 2 || d.Interval != 5*time.Second || d.Timeout != 5*time.Second || d.Insurance != 200*time.Second || d.Broken != 5*time.Second {
		t.Errorf("default %+v is not the paper's Table 1", d)
	}
	if a := AggressiveHeartbeatConfig(); a.Interval != 100*time.Millisecond {
		t.Errorf("aggressive interval %v, want 100ms", a.Interval)
	}
	for name, mut := range map[string]func(*HeartbeatConfig){
		"Monitors":      func(c *HeartbeatConfig) { c.Monitors = 0 },
		"Interval":      func(c *HeartbeatConfig) { c.Interval = -1 },
		"Timeout":       func(c *HeartbeatConfig) { c.Timeout = 0 },
		"Insurance":     func(c *HeartbeatConfig) { c.Insurance = c.Interval - 1 },
		"Broken":        func(c *HeartbeatConfig) { c.Broken = -1 },
		"FullMeshMax":   func(c *HeartbeatConfig) { c.FullMeshMax = -1 },
		"RingNeighbors": func(c *HeartbeatConfig) { c.RingNeighbors = -1 },
		"NoticeFanout":  func(c *HeartbeatConfig) { c.NoticeFanout = 33 },
	} {
		c := DefaultHeartbeatConfig()
		mut(&c)
		err := c.Validate()
		if !errors.Is(err, ErrHeartbeatConfig) {
			t.Errorf("%s: Validate = %v, want ErrHeartbeatConfig", name, err)
		}
		if _, err := NewHeartbeat(c, nil); !errors.Is(err, ErrHeartbeatConfig) {
			t.Errorf("%s: NewHeartbeat accepted an invalid config", name)
		}
	}
}

// An idle link's closing heartbeat can be lost. The peer that waited for
// the insurance does not suspect the silence of a link idle on its own
// side too (no traffic either way for T_insurance, neither side a monitor
// of the other, no ring neighbour); it stops waiting. On a link that is
// not idle (a ring neighbour) the silence is suspected as before.
func TestHeartbeatLostCloseNoSuspicion(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.FullMeshMax = 0
	h, env := startHB(t, cfg, 100, ids(200), 13)
	const far, ring = core.NodeID(150), core.NodeID(101)
	h.ObserveReceive(far) // it talked to us once, then announced insurance
	h.Receive(far, HeartbeatMsg{Next: cfg.Insurance})
	h.Receive(ring, HeartbeatMsg{Next: cfg.Insurance})
	env.Advance(3*cfg.Insurance, h)
	if got := h.State(far); got != HeartbeatAlive {
		t.Errorf("peer whose closing heartbeat was lost is %v, want alive", got)
	}
	for _, s := range env.TakeSent() {
		if n, ok := s.Msg.(HeartbeatNotice); ok && n.Subject == far {
			t.Errorf("notice %v about the peer of an idle link, want none", n)
		}
	}
	if got := h.State(ring); got != HeartbeatFailed {
		t.Errorf("silent ring neighbour is %v after 3 T_insurance, want failed", got)
	}
}

// A suspicion made from a peer's insurance alone (one lost insurance
// heartbeat is a silence of T_insurance) waits (1 + H)·T_broken before it
// becomes a failure, as one heard by notice does; a monitor's own
// suspicion of a process that chose it waits T_broken.
func TestHeartbeatInsuranceSuspicionWaitsLonger(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.FullMeshMax = 0
	h, env := startHB(t, cfg, 100, ids(200), 17)
	const ring, chose = core.NodeID(101), core.NodeID(150)
	h.Receive(ring, HeartbeatMsg{Next: cfg.Insurance})
	h.Receive(chose, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	start := env.T
	var suspected, failed = map[core.NodeID]time.Duration{}, map[core.NodeID]time.Duration{}
	for env.T < start+2*cfg.Insurance {
		env.Advance(time.Millisecond, h)
		for _, e := range env.TakeEmitted() {
			switch e := e.(type) {
			case core.Suspected:
				suspected[e.Node] = env.T
			case core.Failed:
				failed[e.Node] = env.T
			}
		}
	}
	if d, want := failed[ring]-suspected[ring], cfg.Broken*time.Duration(1+cfg.LocalHealthMax); suspected[ring] == 0 || d != want {
		t.Errorf("ring neighbour silent after insurance: suspected at %v, failed %v later; want (1 + H)·T_broken = %v later", suspected[ring], d, want)
	}
	if d, want := failed[chose]-suspected[chose], monitorBroken(cfg); suspected[chose] == 0 || d != want {
		t.Errorf("process that chose us silent: suspected at %v, failed %v later; want T_broken and a quarter interval = %v later", suspected[chose], d, want)
	}
}

// monitorBroken is how long a monitor's own suspicion of a peer on a
// clean link lasts before it declares the peer failed, when the peer
// announced cfg.Interval and its jitter is below an eighth of it: T_broken
// and a quarter interval (brokenDue).
func monitorBroken(cfg HeartbeatConfig) time.Duration { return cfg.Broken + cfg.Interval/4 }

// monitorOf starts process 100 of 200 and returns it with peer 150,
// which chose it as a monitor, and a function that delivers a heartbeat
// of the peer.
func monitorOf(t *testing.T, cfg HeartbeatConfig) (*HeartbeatDetector, *coretest.Env, core.NodeID, func()) {
	h, env := startHB(t, cfg, 100, ids(200), 17)
	const peer = core.NodeID(150)
	return h, env, peer, func() {
		h.ObserveReceive(peer)
		h.Receive(peer, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	}
}

// A monitor's own suspicion of a peer whose link lost a heartbeat lately
// (a gap of at least 1.75 intervals within the last lossMemory intervals)
// waits (1 + H)·T_broken for the refutation, as one heard of does: a run
// of losses looks like a crash, and the refutation crosses the same link.
// On a clean link, and once the loss is old enough, it waits T_broken.
func TestHeartbeatLossyLinkSuspicionWaitsLonger(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.FullMeshMax = 0
	for _, tc := range []struct {
		name  string
		lost  bool          // one heartbeat of the peer goes missing
		after time.Duration // how long the peer then beats before it falls silent
		want  time.Duration
	}{
		{"clean link", false, 20 * cfg.Interval, monitorBroken(cfg)},
		{"a loss lately", true, 20 * cfg.Interval, cfg.Broken * time.Duration(1+cfg.LocalHealthMax)},
		{"a loss long ago", true, (lossMemory + 5) * cfg.Interval, monitorBroken(cfg)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, env, peer, beat := monitorOf(t, cfg)
			beat()
			for i := range 10 {
				env.Advance(cfg.Interval, h)
				if !(tc.lost && i == 5) {
					beat()
				}
			}
			for end := env.T + tc.after; env.T < end; {
				env.Advance(cfg.Interval, h)
				beat()
			}
			env.TakeEmitted()
			var suspected, failed time.Duration
			for start := env.T; env.T < start+cfg.Insurance && failed == 0; {
				env.Advance(time.Millisecond, h)
				for _, e := range env.TakeEmitted() {
					switch e := e.(type) {
					case core.Suspected:
						if e.Node == peer {
							suspected = env.T
						}
					case core.Failed:
						if e.Node == peer {
							failed = env.T
						}
					}
				}
			}
			if suspected == 0 || failed-suspected != tc.want {
				t.Errorf("suspected at %v, failed %v later; want %v later", suspected, failed-suspected, tc.want)
			}
		})
	}
}

// With T_timeout and T_broken whole intervals (group's presets), a
// monitor's own deadline falls when the peer's fourth heartbeat after the
// last one it got is due. After three lost in a row, that heartbeat must
// not lose the race by its jitter: the monitor waits a quarter interval
// more (or twice the link's measured jitter, if longer). A peer that
// crashed is declared then.
func TestHeartbeatDeadlineLeavesJitter(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.FullMeshMax = 0
	cfg.Timeout = 2 * cfg.Interval
	const jitter = 2 * time.Millisecond
	for _, crashed := range []bool{false, true} {
		h, env, _, beat := monitorOf(t, cfg)
		// Heartbeats every interval, every other one late by jitter; the
		// last one on time.
		beat()
		for i := range 31 {
			env.Advance(cfg.Interval+jitter*time.Duration(1-2*(i%2)), h)
			beat()
		}
		env.Advance(cfg.Interval-jitter, h)
		beat()
		env.TakeEmitted()
		var suspected, failed time.Duration
		for end := env.T + 4*cfg.Interval + jitter; env.T < end; {
			env.Advance(jitter/4, h)
			for _, e := range env.TakeEmitted() {
				switch e.(type) {
				case core.Suspected:
					suspected = env.T
				case core.Failed:
					failed = env.T
				}
			}
		}
		if suspected == 0 {
			t.Fatalf("crashed %v: three heartbeats lost, and no suspicion", crashed)
		}
		if failed != 0 {
			t.Errorf("crashed %v: declared failed %v after the suspicion, before the fourth heartbeat (due %v after the last, late by the jitter %v)", crashed, failed-suspected, 4*cfg.Interval, jitter)
		}
		if crashed {
			env.Advance(monitorBroken(cfg)-(env.T-suspected), h)
			if f := eventsOf[core.Failed](env.TakeEmitted()); len(f) != 1 {
				t.Errorf("crashed peer not declared failed T_broken and a quarter interval after the suspicion (%v after it)", env.T-suspected)
			}
			continue
		}
		beat() // the fourth heartbeat, late by the jitter
		for range 10 {
			env.Advance(cfg.Interval, h)
			beat()
		}
		evs := env.TakeEmitted()
		if f := eventsOf[core.Failed](evs); len(f) != 0 {
			t.Errorf("declared a live peer failed")
		}
		if u := eventsOf[core.Unsuspected](evs); len(u) != 1 {
			t.Errorf("the fourth heartbeat did not clear the suspicion")
		}
	}
}

// fixedClock is a shared clock that reads its own value plus the
// detector's environment's time: processes whose environments started at
// different moments of it (offsets) share it.
type fixedClock struct {
	env    *coretest.Env
	offset time.Duration
}

func (c fixedClock) Now() time.Duration { return c.env.T + c.offset }

// With a shared clock, every process sends its heartbeats when that clock
// is a multiple of the interval, whenever it started: the first one comes
// at the first such point (early, never late), then one every interval,
// to all its monitors at once.
func TestHeartbeatSharedClockAligns(t *testing.T) {
	cfg := bigCfg()
	cfg.Monitors = 3
	cfg.RingNeighbors = 0
	for i, offset := range []time.Duration{0, 37 * time.Millisecond, 4*time.Second + 999*time.Millisecond, -1234 * time.Millisecond} {
		env := coretest.NewEnv(5, uint64(i+1))
		c := cfg
		c.SharedClock = fixedClock{env, offset}
		h, err := NewHeartbeat(c, ids(20))
		if err != nil {
			t.Fatal(err)
		}
		env.AdvanceTo(time.Duration(i)*time.Second, h) // start at another time of the env's clock
		h.Start(env)
		start := env.T
		env.AdvanceTo(start+10*cfg.Interval-1, h)
		at := map[core.NodeID][]time.Duration{}
		for _, s := range sentOf[HeartbeatMsg](env.TakeSent()) {
			at[s.To] = append(at[s.To], s.At)
		}
		ms := h.Monitors()
		for _, m := range ms {
			if len(at[m]) != 10 || !slices.Equal(at[m], at[ms[0]]) {
				t.Fatalf("offset %v: heartbeats at %v to %v and at %v to %v: want 10 each, together", offset, at[m], m, at[ms[0]], ms[0])
			}
			for k, a := range at[m] {
				if shared := a + offset; shared%cfg.Interval != 0 {
					t.Fatalf("offset %v: heartbeat at %v (shared clock %v): not a multiple of %v", offset, a, shared, cfg.Interval)
				}
				if k == 0 && a-start >= cfg.Interval {
					t.Fatalf("offset %v: first heartbeat %v after the start, want within one interval", offset, a-start)
				}
			}
		}
	}
}

// A member declared failed whose process restarted and joined again under
// its id (core.MembersChanged.Renewed) is watched afresh: its record and
// verdict go (the new process is not told to stop expecting heartbeats it
// never expected), so a refused connection or a silence after its own
// announcement declares it failed again. Without the renewal the verdict
// stands, and nothing more is said about it.
func TestHeartbeatRenewedMember(t *testing.T) {
	cfg := bigCfg()
	const p = core.NodeID(30)
	for _, renew := range []bool{true, false} {
		h, env := startHB(t, cfg, 0, ids(100), 3)
		h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
		env.Advance(10*time.Minute, h)
		if f := eventsOf[core.Failed](env.TakeEmitted()); len(f) != 1 || f[0].Node != p {
			t.Fatalf("failures %v, want %v", f, p)
		}
		env.TakeSent()
		var renewed []core.NodeID
		if renew {
			renewed = []core.NodeID{p}
		}
		h.Handle(core.MembersChanged{Epoch: 2, Members: ids(100), Renewed: renewed})
		if b := beats(env.TakeSent()); slices.ContainsFunc(b[p], func(m HeartbeatMsg) bool { return m.Next == 0 }) {
			t.Errorf("renew=%v: %v told to stop expecting heartbeats", renew, p)
		}
		wantState := HeartbeatFailed
		if renew {
			wantState = HeartbeatAlive
		}
		if s := h.State(p); s != wantState {
			t.Fatalf("renew=%v: %v is %v, want %v", renew, p, s, wantState)
		}
		h.Handle(core.PeerHint{Node: p, Reason: "dial: connection refused", Refused: true})
		env.Advance(10*time.Minute, h)
		f := eventsOf[core.Failed](env.TakeEmitted())
		if renew && (len(f) != 1 || f[0].Node != p) {
			t.Fatalf("renewed: failures %v after a refused connection, want %v again", f, p)
		}
		if !renew && len(f) != 0 {
			t.Fatalf("not renewed: failures %v, want none (the verdict stands)", f)
		}
	}
	// The new process announces an interval, then falls silent.
	h, env := startHB(t, cfg, 0, ids(100), 3)
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	env.Advance(10*time.Minute, h)
	env.TakeEmitted()
	h.Handle(core.MembersChanged{Epoch: 2, Members: ids(100), Renewed: []core.NodeID{p}})
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	env.Advance(10*time.Minute, h)
	evs := env.TakeEmitted()
	if f := eventsOf[core.Failed](evs); len(f) != 1 || f[0].Node != p || len(eventsOf[core.Recovered](evs)) != 0 {
		t.Fatalf("events %v, want %v failed again and no Recovered", evs, p)
	}
}

// A failed connection is pinged along with its heartbeats, every Interval:
// the other side of a healed partition, which excluded this process from
// its view, ignores its heartbeats and sends it none, but answers a ping,
// and the pong ends the verdict (core.Recovered).
func TestHeartbeatFailedPeerPinged(t *testing.T) {
	cfg := bigCfg()
	h, env := startHB(t, cfg, 0, ids(100), 5)
	const p = core.NodeID(30)
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	env.Advance(time.Minute, h)
	if f := eventsOf[core.Failed](env.TakeEmitted()); len(f) != 1 || f[0].Node != p {
		t.Fatalf("failures %v, want %v", f, p)
	}
	env.TakeSent()
	env.Advance(cfg.Interval, h)
	sent := env.TakeSent()
	pings := 0
	for _, s := range sentOf[HeartbeatPing](sent) {
		if s.To == p {
			pings++
		}
	}
	if pings != 1 || len(beats(sent)[p]) != 1 {
		t.Fatalf("in one Interval the failed peer got %d pings and heartbeats %v, want one of each", pings, beats(sent)[p])
	}
	h.Receive(p, HeartbeatPong{})
	if r := eventsOf[core.Recovered](env.TakeEmitted()); len(r) != 1 || r[0].Node != p {
		t.Fatalf("the failed peer's pong gave %v, want it recovered", r)
	}
	env.TakeSent()
	env.Advance(cfg.Interval, h) // a silent peer is suspected again only after T_timeout
	for _, s := range sentOf[HeartbeatPing](env.TakeSent()) {
		if s.To == p {
			t.Fatalf("a recovered peer is still pinged")
		}
	}
}
