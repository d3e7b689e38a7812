package vsync

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/stable"
)

// Scripted tests of one layer against a manual Env: each feeds views,
// messages and stability vectors by hand and checks exactly what the layer
// sends and emits. They check the reliable multicast (per-sender FIFO
// delivery, retransmission, stability-driven freeing, flow control) and
// the flush of view synchrony (the same-view delivery of the membership
// paper, Varma et al. §2.1).

type script struct {
	t   *testing.T
	env *coretest.Env
	l   *Layer
}

func newScript(t *testing.T, self core.NodeID, cfg Config) *script {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(self, 1)
	l.Start(env)
	return &script{t: t, env: env, l: l}
}

func ids(xs ...int) []core.NodeID {
	out := make([]core.NodeID, len(xs))
	for i, x := range xs {
		out[i] = core.NodeID(x)
	}
	return out
}

func (s *script) view(epoch uint64, members ...int) {
	s.l.Handle(core.MembersChanged{Epoch: epoch, Members: ids(members...)})
}

// sent returns the messages sent since the last call, as "to:msg" strings.
func (s *script) sent() []string {
	var out []string
	for _, m := range s.env.TakeSent() {
		out = append(out, fmt.Sprintf("%v:%v", m.To, m.Msg))
	}
	return out
}

// events returns the events emitted since the last call, Progress included
// only if progress is true.
func (s *script) events(progress bool) []string {
	var out []string
	for _, e := range s.env.TakeEmitted() {
		switch x := e.(type) {
		case Delivered:
			out = append(out, fmt.Sprintf("deliver %v#%d %q", x.Sender, x.Seq, x.Payload))
		case ViewChanged:
			out = append(out, fmt.Sprintf("view e%d %v from e%d count %d", x.Epoch, x.Members, x.Previous, x.Count))
		case stable.Progress:
			if progress {
				out = append(out, fmt.Sprintf("progress e%d %v", x.Epoch, x.Have))
			}
		case Refused:
			out = append(out, fmt.Sprintf("refused %q: %v", x.Payload, x.Err))
		default:
			out = append(out, fmt.Sprintf("%T", e))
		}
	}
	return out
}

func (s *script) want(what string, got []string, want ...string) {
	s.t.Helper()
	if !slices.Equal(got, want) {
		s.t.Fatalf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}

func data(epoch uint64, sender int, seq uint64, payload string) *Data {
	return &Data{Epoch: epoch, Sender: core.NodeID(sender), Seq: seq, Payload: []byte(payload)}
}

// TestMulticastFIFOAndNack: a sender delivers its own message at once and
// sends it to every other member; a receiver delivers each sender's
// messages in order, holds back what follows a gap, asks the sender for the
// gap (NACK) and delivers once the retransmission fills it.
func TestMulticastFIFOAndNack(t *testing.T) {
	s := newScript(t, 0, DefaultConfig())
	s.view(5, 0, 1, 2)
	s.want("first view", s.events(false), "view e5 [n0 n1 n2] from e0 count 0")
	s.sent()

	s.l.Handle(Multicast{Payload: []byte("a")})
	s.want("multicast sends", s.sent(), "n1:data{e5 n0#1 1B}", "n2:data{e5 n0#1 1B}")
	s.want("multicast delivers", s.events(true), `deliver n0#1 "a"`, "progress e5 [1 0 0]")

	s.l.Receive(1, data(5, 1, 2, "y"))
	s.want("gap: nothing delivered", s.events(true), "progress e5 [1 0 0]")
	s.want("gap: nack", s.sent(), "n1:nack{e5 n1#1..1}")
	s.l.Receive(1, data(5, 1, 1, "x"))
	s.want("gap filled", s.events(true), `deliver n1#1 "x"`, `deliver n1#2 "y"`, "progress e5 [1 2 0]")
	s.l.Receive(1, data(5, 1, 2, "y"))
	s.want("duplicate ignored", s.events(true))
	if st := s.l.Stats(); st.Duplicates != 1 || st.Delivered != 3 || st.Nacks != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStableFreesAndWindow: own messages beyond the window wait in the
// queue until a stability vector frees the oldest; stable messages are
// dropped from the buffers (Friedman et al. §1: a message is kept until it
// is stable); a full queue refuses with ErrQueueFull.
func TestStableFreesAndWindow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Window = 2
	cfg.MaxQueued = 1
	s := newScript(t, 0, cfg)
	s.view(5, 0, 1)
	s.events(false)
	for _, p := range []string{"a", "b", "c", "d"} {
		s.l.Handle(Multicast{Payload: []byte(p)})
	}
	s.want("window of 2", s.sent(), "n1:data{e5 n0#1 1B}", "n1:data{e5 n0#2 1B}")
	s.want("c queued, d refused", s.events(false), `deliver n0#1 "a"`, `deliver n0#2 "b"`, `refused "d": vsync: send queue full`)
	if st := s.l.Stats(); st.Buffered != 2 || st.Queued != 1 {
		t.Fatalf("stats %+v, want 2 buffered, 1 queued", st)
	}
	s.l.Handle(stable.Stable{Epoch: 5, Round: 1, Vector: []uint64{1, 0}})
	s.want("window opens", s.sent(), "n1:data{e5 n0#3 1B}")
	if st := s.l.Stats(); st.Buffered != 2 || st.Queued != 0 || st.PeakBuffered != 2 {
		t.Fatalf("stats %+v, want 2 buffered (n0#2, n0#3)", st)
	}
	s.l.Handle(stable.Stable{Epoch: 5, Round: 2, Vector: []uint64{3, 0}})
	if st := s.l.Stats(); st.Buffered != 0 || st.BufferedBytes != 0 {
		t.Fatalf("stats %+v, want empty buffers", st)
	}
	s.env.TakeEmitted()
	s.l.Handle(Multicast{Payload: make([]byte, cfg.MaxPayload+1)})
	if ev := s.env.TakeEmitted(); len(ev) != 1 || !errors.Is(ev[0].(Refused).Err, ErrTooLarge) {
		t.Fatalf("got %d events, want one Refused(ErrTooLarge)", len(ev))
	}
}

// TestDigestRecoversTail: when the last message of a sender is lost, no gap
// shows; the sender's digest (sent after its own messages made no stability
// progress for two periods) tells the receiver, which asks for it.
func TestDigestRecoversTail(t *testing.T) {
	cfg := DefaultConfig()
	snd := newScript(t, 0, cfg)
	snd.view(5, 0, 1)
	snd.l.Handle(Multicast{Payload: []byte("a")})
	snd.sent()
	snd.env.Advance(3*cfg.Retransmit, snd.l)
	got := snd.sent()
	if len(got) == 0 || got[0] != "n1:digest{e5 sent 1}" {
		t.Fatalf("sender sent %q, want a digest", got)
	}
	rcv := newScript(t, 1, cfg)
	rcv.view(5, 0, 1)
	rcv.sent()
	rcv.l.Receive(0, &Digest{Epoch: 5, Sent: 1})
	rcv.want("receiver asks", rcv.sent(), "n0:nack{e5 n0#1..1}")
	snd.l.Receive(1, &Nack{Epoch: 5, Sender: 0, From: 1, To: 1})
	snd.want("sender resends", snd.sent(), "n1:data{e5 n0#1 1B}")
}

// TestFlushAfterCrash is the scenario of same-view delivery (Varma et al.
// §2.1): n2 dies after its message 2 reached n1 only. n0 and n1 install
// the view without n2; their reports give the cut (n2: 2 messages), n0
// pulls n2#2 from n1, both say FLUSH_OK, and n0 announces the new view
// having delivered exactly the cut. A late copy of n2#3 is dropped.
func TestFlushAfterCrash(t *testing.T) {
	s := newScript(t, 0, DefaultConfig())
	s.view(5, 0, 1, 2)
	s.l.Receive(2, data(5, 2, 1, "m1"))
	s.l.Handle(Multicast{Payload: []byte("own")})
	s.events(false)
	s.sent()

	s.view(6, 0, 1)
	s.want("report", s.sent(), "n1:flush{→e6 from e5 [1 0 1]}")
	s.l.Handle(Multicast{Payload: []byte("later")})
	s.want("no sending during a flush", s.sent())
	s.l.Receive(1, &Flush{Target: 6, Old: 5, Vector: []uint64{1, 0, 2}})
	s.want("pull from the holder", s.sent(), "n1:nack{e5 n2#2..2}")
	s.l.Receive(1, data(5, 2, 2, "m2"))
	s.want("cut reached", s.sent(), "n1:flushok{→e6 from e5}")
	s.want("delivered up to the cut", s.events(false), `deliver n2#2 "m2"`)
	s.l.Receive(1, data(5, 2, 3, "m3"))
	s.want("beyond the cut: held back", s.events(false))
	s.l.Receive(1, &FlushOK{Target: 6, Old: 5})
	ev := s.env.TakeEmitted()
	vc, ok := ev[0].(ViewChanged)
	if !ok || vc.Epoch != 6 || vc.Previous != 5 || vc.Count != 3 {
		t.Fatalf("events %v, want ViewChanged e6 from e5 with 3 messages", ev)
	}
	want := MessageHash(2, 1, []byte("m1")) + MessageHash(0, 1, []byte("own")) + MessageHash(2, 2, []byte("m2"))
	if vc.Digest != want {
		t.Fatalf("digest %x, want %x", vc.Digest, want)
	}
	s.want("queued multicast goes out in the new view", s.sent(), "n1:data{e6 n0#1 5B}")
	s.l.Receive(2, data(5, 2, 3, "m3"))
	if st := s.l.Stats(); st.Late != 1 || st.Flushes != 1 {
		t.Fatalf("stats %+v, want one late message, one flush", st)
	}
	// A straggler still in the flush gets the report and OK again.
	s.l.Receive(1, &Flush{Target: 6, Old: 5, Vector: []uint64{1, 0, 2}})
	s.want("answer a straggler", s.sent(), "n1:flush{→e6 from e5 [1 0 1]}", "n1:flushok{→e6 from e5}")
}

// TestFlushRestartsOnNewerView: a view installed during a flush (another
// member died) restarts the flush toward the newer view with a new report;
// reports for the abandoned target are ignored, and a member whose
// application is in another view is no participant.
func TestFlushRestartsOnNewerView(t *testing.T) {
	s := newScript(t, 0, DefaultConfig())
	s.view(5, 0, 1, 2, 3)
	s.l.Receive(3, data(5, 3, 1, "x"))
	s.sent()
	s.events(false)
	s.view(6, 0, 1, 2)
	s.want("first report", s.sent(), "n1:flush{→e6 from e5 [0 0 0 1]}", "n2:flush{→e6 from e5 [0 0 0 1]}")
	s.view(7, 0, 1, 4)
	s.want("second report", s.sent(), "n1:flush{→e7 from e5 [0 0 0 1]}", "n4:flush{→e7 from e5 [0 0 0 1]}")
	s.l.Receive(2, &Flush{Target: 6, Old: 5, Vector: []uint64{0, 0, 0, 3}})
	s.want("stale target ignored", s.sent())
	// n1's application already moved to another view: not a participant.
	s.l.Receive(1, &Flush{Target: 7, Old: 6, Vector: []uint64{0, 0, 0}})
	s.want("alone in the flush", s.events(false), "view e7 [n0 n1 n4] from e5 count 1")
}

// TestJoinerStartsFresh: a node whose first view is a later one installs it
// at once (it has delivered nothing before), buffers messages of views it
// has not installed yet, and answers the reports of old members.
func TestJoinerStartsFresh(t *testing.T) {
	s := newScript(t, 9, DefaultConfig())
	s.l.Receive(0, data(8, 0, 1, "early"))
	s.want("nothing yet", s.events(false))
	s.view(8, 0, 9)
	s.want("fresh view, then its messages", s.events(false), "view e8 [n0 n9] from e0 count 0", `deliver n0#1 "early"`)
	s.sent()
	s.l.Receive(0, &Flush{Target: 8, Old: 7, Vector: []uint64{4}})
	s.want("answers with an empty report", s.sent(), "n0:flush{→e8 from e0 []}")
}

// TestFlushRetransmits: unanswered flush messages are sent again every
// Retransmit, so a lost report or OK does not stall the flush.
func TestFlushRetransmits(t *testing.T) {
	cfg := DefaultConfig()
	s := newScript(t, 0, cfg)
	s.view(5, 0, 1)
	s.view(6, 0, 1)
	s.sent()
	s.env.Advance(cfg.Retransmit, s.l)
	s.want("report again", s.sent(), "n1:flush{→e6 from e5 [0 0]}")
	s.l.Receive(1, &Flush{Target: 6, Old: 5, Vector: []uint64{0, 0}})
	s.want("ok", s.sent(), "n1:flushok{→e6 from e5}")
	s.env.Advance(cfg.Retransmit, s.l)
	s.want("report and ok again", s.sent(), "n1:flush{→e6 from e5 [0 0]}", "n1:flushok{→e6 from e5}")
	s.l.Receive(1, &FlushOK{Target: 6, Old: 5})
	if e, flushing := s.l.View(); e != 6 || flushing {
		t.Fatalf("view e%d flushing %v, want e6 done", e, flushing)
	}
	s.env.Advance(time.Second, s.l)
}

type recorder struct{ got []core.Event }

func (r *recorder) Start(core.Env)                {}
func (r *recorder) Receive(core.NodeID, core.Msg) {}
func (r *recorder) Fire(core.Timer)               {}
func (r *recorder) Handle(e core.Event)           { r.got = append(r.got, e) }
func (r *recorder) Protos() []core.Proto          { return []core.Proto{core.ProtoStable} }

// TestHideFailures: the wrapped machine sees views and progress but no
// verdict of the failure detector, and keeps its protocols.
func TestHideFailures(t *testing.T) {
	r := &recorder{}
	h := HideFailures(r)
	for _, e := range []core.Event{
		core.Failed{Node: 1}, core.Suspected{Node: 1}, core.Unsuspected{Node: 1}, core.Recovered{Node: 1}, core.PeerHint{Node: 1},
		core.MembersChanged{Epoch: 2, Members: ids(0, 2)}, stable.Progress{Epoch: 2, Have: []uint64{1, 0}},
	} {
		h.Handle(e)
	}
	if len(r.got) != 2 {
		t.Fatalf("wrapped machine saw %v, want only the view and the progress", r.got)
	}
	if ps := h.(core.ProtoOwner).Protos(); !slices.Equal(ps, []core.Proto{core.ProtoStable}) {
		t.Fatalf("protos %v", ps)
	}
}

// TestConfigValidate: every invalid field is an ErrConfig; New refuses it.
func TestConfigValidate(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.Window = 0 },
		func(c *Config) { c.MaxQueued = -1 },
		func(c *Config) { c.MaxPayload = -1 },
		func(c *Config) { c.Retransmit = 0 },
		func(c *Config) { c.MaxResend = 0 },
	} {
		c := DefaultConfig()
		mut(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", c, err)
		}
	}
	if err := SimConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
