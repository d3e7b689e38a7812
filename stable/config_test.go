package stable_test

import (
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/stable/stabletest"
)

func TestProtocolNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want stable.Protocol
	}{
		{"coord", stable.Coord}, {"FullDist", stable.FullDist}, {"S_Coord", stable.SCoord},
		{"scoord", stable.SCoord}, {"cube", stable.CubeFullDist}, {"CubeFullDist", stable.CubeFullDist},
	} {
		got, err := stable.ParseProtocol(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseProtocol(%q) = %v, %v", tc.in, got, err)
		}
	}
	if _, err := stable.ParseProtocol("ring"); !errors.Is(err, stable.ErrProtocol) {
		t.Errorf("unknown protocol: %v", err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var p stable.Protocol
	fs.TextVar(&p, "protocol", stable.CubeFullDist, "")
	if err := fs.Parse([]string{"--protocol", "s_coord"}); err != nil || p != stable.SCoord {
		t.Fatalf("flag: %v, %v", p, err)
	}
	if stable.SCoord.PaperName() != "S_Coord" || stable.Protocol(9).String() != "protocol(9)" {
		t.Fatal("names")
	}
	if _, err := stable.Protocol(9).MarshalText(); err == nil {
		t.Fatal("marshalled an unknown protocol")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := stable.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := stable.PaperConfig(stable.SCoord).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []stable.Config{
		{Protocol: 7, Period: time.Second},
		{Period: 0},
		{Period: time.Second, Resend: -1},
		{Period: time.Second, Degree: -1},
		{Period: time.Second, Senders: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	// §4.1: degree log n; 50 senders.
	c := stable.Config{Senders: 50}
	if c.DegreeFor(1900) != 11 || c.DegreeFor(2) != 1 || c.DegreeFor(1) != 1 || c.SendersFor(10) != 10 || c.SendersFor(100) != 50 {
		t.Fatal("DegreeFor / SendersFor")
	}
}

// New never panics on bad input: the detector stays idle and says why.
func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		cfg     stable.Config
		members []core.NodeID
		want    error
	}{
		{stable.Config{Period: 0}, ids(3), stable.ErrConfig},
		{stable.DefaultConfig(), nil, stable.ErrMembers},
		{stable.DefaultConfig(), []core.NodeID{1, 2, 1}, stable.ErrMembers},
		{stable.DefaultConfig(), []core.NodeID{core.None}, stable.ErrMembers},
	} {
		d := stable.New(tc.cfg, tc.members)
		if !errors.Is(d.Err(), tc.want) {
			t.Errorf("%+v %v: %v, want %v", tc.cfg, tc.members, d.Err(), tc.want)
		}
		env := coretest.NewEnv(0, 1)
		d.Start(env)
		d.Handle(stable.Progress{})
		d.Receive(1, stable.Start{Round: 1})
		env.Advance(time.Hour, d)
		if len(env.Sent) != 0 || len(env.Emitted) != 0 {
			t.Errorf("an invalid detector acted: %v %v", env.Sent, env.Emitted)
		}
	}
	// A node outside the view stays idle until a view includes it.
	d := stable.New(stable.DefaultConfig(), []core.NodeID{1, 2})
	env := coretest.NewEnv(5, 1)
	d.Start(env)
	env.Advance(time.Second, d)
	if len(env.Sent) != 0 {
		t.Fatal("a non-member sent")
	}
	d.Handle(core.MembersChanged{Epoch: 1, Members: []core.NodeID{5, 1, 2}})
	if len(env.Sent) == 0 || d.Epoch() != 1 {
		t.Fatal("position 0 of the new view did not start a round")
	}
}

// liar emits a Stable that no member's Progress supports, and one that
// goes down: the checker must catch both (it can fail).
type liar struct {
	env  core.Env
	vecs [][]uint64
}

func (l *liar) Start(env core.Env) {
	l.env = env
	env.Emit(stable.Progress{Epoch: 0, Have: []uint64{5, 5}})
	env.SetTimer(time.Millisecond, 0)
}
func (l *liar) Receive(core.NodeID, core.Msg) {}
func (l *liar) Handle(core.Event)             {}
func (l *liar) Fire(core.Timer) {
	for i, v := range l.vecs {
		l.env.Emit(stable.Stable{Epoch: 0, Round: uint64(i + 1), Vector: v})
	}
}

func TestCheckerCatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		vecs [][]uint64
	}{
		{"beyond a member's Have", [][]uint64{{6, 0}}},
		{"going down", [][]uint64{{3, 3}, {3, 2}}},
	} {
		w := sim.New(sim.Config{Seed: 1})
		w.Add(&liar{vecs: tc.vecs})
		w.Add(&liar{})
		chk := stabletest.NewChecker(ids(2))
		w.AddChecker(chk)
		if err := w.RunChecked(time.Second); !errors.Is(err, sim.ErrInvariant) {
			t.Errorf("%s: checker said %v", tc.name, err)
		}
	}
	// And liveness: nobody finishes a round.
	w := sim.New(sim.Config{Seed: 1})
	w.Add(&liar{})
	chk := stabletest.NewChecker(ids(1))
	chk.MinRounds = 1
	w.AddChecker(chk)
	w.RunUntil(time.Second)
	if err := w.Finish(); !errors.Is(err, sim.ErrInvariant) {
		t.Errorf("liveness: checker said %v", err)
	}
}
