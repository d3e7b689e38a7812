package fault_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/fault"
	"github.com/cohort-mp/cohort/transport/mem"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// pair returns a wrapper around node 1's endpoint of a perfect hub, and
// the recorder of node 2.
func pair(t *testing.T, cfg fault.Config) (*fault.Transport, *transporttest.Recorder) {
	t.Helper()
	hub, err := mem.NewHub(mem.Config{QueueLen: 1 << 15})
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
	t.Cleanup(func() { b.Close() })
	a.SetPeer(2, b.Addr())
	b.SetPeer(1, a.Addr())
	r := transporttest.NewRecorder()
	b.SetHandler(r)
	a.SetHandler(transporttest.NewRecorder())
	f, err := fault.New(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, r
}

var (
	kindA = core.MakeKind(core.ProtoTest, 1)
	kindB = core.MakeKind(core.ProtoFD, 1)
)

func send(t *testing.T, f *fault.Transport, k core.Kind, seq uint64) {
	t.Helper()
	if err := f.Send(t.Context(), 2, wire.Frame{Kind: k, Payload: transporttest.Payload(seq, 4)}); err != nil {
		t.Fatal(err)
	}
}

// seqs returns the sequence numbers of the frames, in arrival order.
func seqs(t *testing.T, frames []wire.Frame) []uint64 {
	out := make([]uint64, len(frames))
	for i, f := range frames {
		s, ok := transporttest.Seq(f.Payload)
		if !ok {
			t.Fatalf("frame %d: corrupt payload", i)
		}
		out[i] = s
	}
	return out
}

// With no rule the wrapper keeps the transport contract.
func TestContractWithoutRules(t *testing.T) {
	factory := func(t *testing.T, n int, opt transporttest.Options) []transport.Transport {
		hub, err := mem.NewHub(mem.Config{QueueLen: opt.QueueLen, MaxFrameSize: opt.MaxFrameSize})
		if err != nil {
			t.Fatal(err)
		}
		ts := make([]transport.Transport, n)
		for i := range ts {
			e, err := hub.Join(core.NodeID(i + 1))
			if err != nil {
				t.Fatal(err)
			}
			f, err := fault.New(e, fault.Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			ts[i] = f
		}
		for _, a := range ts {
			for _, b := range ts {
				if a != b {
					a.SetPeer(b.Self(), b.Addr())
				}
			}
		}
		return ts
	}
	transporttest.Run(t, factory, 1)
}

// Drop loses about the given fraction of matching frames, reproducibly
// from the seed, and only frames of the matching kind.
func TestDropRateAndKinds(t *testing.T) {
	const n = 10_000
	count := func(seed uint64) (uint64, int) {
		f, r := pair(t, fault.Config{Seed: seed, Rules: []fault.Rule{{Kinds: []core.Kind{kindA}, Drop: 0.05}}})
		for i := range n {
			send(t, f, kindA, uint64(i))
		}
		for i := range 100 {
			send(t, f, kindB, uint64(n+i))
		}
		st := f.Stats()
		want := n + 100 - int(st.Dropped)
		r.Wait(t, 20*time.Second, "the frames not dropped", func(fr []wire.Frame, _ []core.PeerHint) bool { return len(fr) == want })
		b := 0
		for _, fr := range r.Frames() {
			if fr.Kind == kindB {
				b++
			}
		}
		if b != 100 {
			t.Errorf("%d of 100 frames of another kind arrived, want all", b)
		}
		return st.Dropped, want
	}
	d1, _ := count(7)
	d2, _ := count(7)
	t.Logf("seed 7: %d of %d dropped", d1, n)
	if d1 != d2 {
		t.Errorf("same seed dropped %d then %d frames, want the same", d1, d2)
	}
	// 5% of 10,000: 500 ± 3σ (σ ≈ 22).
	if d1 < 434 || d1 > 566 {
		t.Errorf("%d of %d dropped, want about 500", d1, n)
	}
}

// Delay holds frames at least that long, keeps their order even with
// jitter, and makes a later undelayed frame wait behind them; Duplicate
// sends a frame twice; a window bounds a rule.
func TestDelayOrderDuplicateWindow(t *testing.T) {
	const delay = 30 * time.Millisecond
	f, r := pair(t, fault.Config{Seed: 3, Rules: []fault.Rule{
		{Protos: []core.Proto{core.ProtoTest}, Delay: delay, Jitter: 20 * time.Millisecond},
	}})
	start := time.Now()
	for i := range 50 {
		send(t, f, kindA, uint64(i))
	}
	send(t, f, kindB, 50) // not delayed, but behind the held frames
	r.Wait(t, 20*time.Second, "51 frames", func(fr []wire.Frame, _ []core.PeerHint) bool { return len(fr) == 51 })
	if el := time.Since(start); el < delay {
		t.Errorf("51 frames delivered %v after the first send, want at least the delay %v", el, delay)
	}
	got := seqs(t, r.Frames())
	for i, s := range got {
		if s != uint64(i) {
			t.Fatalf("arrival order %v, want 0..50 in order", got)
		}
	}
	if st := f.Stats(); st.Delayed != 51 || st.Dropped != 0 {
		t.Errorf("stats %+v, want 51 held (50 delayed, 1 behind them), none dropped", st)
	}
	// Duplicates, in a window that is open now; a rule whose window is
	// in the future does nothing.
	now := f.Now()
	if err := f.SetRules([]fault.Rule{
		{Duplicate: 1, From: now, Until: now + time.Hour},
		{Drop: 1, From: now + time.Hour},
	}); err != nil {
		t.Fatal(err)
	}
	send(t, f, kindA, 100)
	r.Wait(t, 20*time.Second, "the duplicate", func(fr []wire.Frame, _ []core.PeerHint) bool { return len(fr) == 53 })
	if got := seqs(t, r.Frames()[51:]); got[0] != 100 || got[1] != 100 {
		t.Errorf("after a duplicated send got %v, want 100 twice", got)
	}
}

// Invalid rules are refused with ErrBadRule.
func TestBadRules(t *testing.T) {
	hub, err := mem.NewHub(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := hub.Join(1)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for name, r := range map[string]fault.Rule{
		"drop > 1":       {Drop: 1.5},
		"negative dup":   {Duplicate: -0.1},
		"negative delay": {Delay: -time.Second},
		"empty window":   {From: 2 * time.Second, Until: time.Second},
	} {
		if _, err := fault.New(e, fault.Config{Rules: []fault.Rule{r}}); !errors.Is(err, fault.ErrBadRule) {
			t.Errorf("%s: %v, want ErrBadRule", name, err)
		}
	}
	if _, err := fault.New(nil, fault.Config{}); !errors.Is(err, fault.ErrBadRule) {
		t.Errorf("nil inner: %v, want ErrBadRule", err)
	}
}

// BreakConns reaches the inner transport when it can break connections,
// and does nothing over one that cannot.
func TestBreakConnsDelegates(t *testing.T) {
	join := func() transport.Transport {
		t.Helper()
		hub, err := mem.NewHub(mem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := hub.Join(1)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	b := &breakable{Transport: join()}
	tr, err := fault.New(b, fault.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got := tr.BreakConns(2); got != 1 || b.broken != 2 {
		t.Fatalf("BreakConns(2) = %d, inner broke %v; want 1 and node 2", got, b.broken)
	}
	plain, err := fault.New(join(), fault.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if got := plain.BreakConns(2); got != 0 {
		t.Fatalf("BreakConns over a transport without connections = %d, want 0", got)
	}
}

type breakable struct {
	transport.Transport
	broken core.NodeID
}

func (b *breakable) BreakConns(id core.NodeID) int {
	b.broken = id
	return 1
}
