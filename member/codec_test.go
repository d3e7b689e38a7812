package member

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/wire"
)

var updateCorpus = flag.Bool("update", false, "rewrite the fuzz seed corpus under testdata/fuzz")

func TestKindNumbers(t *testing.T) {
	for i, k := range decoders {
		if want := core.MakeKind(core.ProtoMember, uint8(i+1)); k.kind != want {
			t.Errorf("decoder %d has kind %v, want %v (append only)", i, k.kind, want)
		}
		if KindName(k.kind) == fmt.Sprint(k.kind) {
			t.Errorf("kind %v has no name", k.kind)
		}
	}
}

// sampleMessages returns one message of every kind, for round trips and
// the fuzz seed corpus.
func sampleMessages() []core.Msg {
	v, _ := initialView(ids(0, 1, 2, 3, 4, 5), 2)
	joined := []Joiner{{6, 77}, {3, 99}}
	p := &Prepare{Epoch: MakeEpoch(2, 0), Ancestry: []uint64{v.epoch}, Failed: ids(3), Joined: joined, Committed: true}
	nv, _ := v.apply(p.Epoch, nil, p.Failed, p.Joined, 2)
	full := &Prepare{Epoch: p.Epoch, Ancestry: p.Ancestry, Failed: p.Failed, Joined: p.Joined, Committed: true,
		Full: true, Members: nv.list(), Incs: nv.incList()}
	var msgs []core.Msg
	for _, c := range []Cause{CauseFailedNode, CauseRootDead, CauseRootAndNodeFailure, CauseNewNodeJoin, CauseAliveNodeJoin} {
		q, f := *p, *full
		q.Cause, f.Cause = c, c
		msgs = append(msgs, &q, &f, &Ack{Cause: c, Epoch: p.Epoch})
	}
	return append(msgs,
		&Report{Epoch: v.epoch, Failed: []Joiner{{1, 0}, {4, 12}}},
		&Report{Epoch: v.epoch, Failed: []Joiner{{1, 0}, {4, 12}}, Left: ids(4)},
		&Report{Root: true, Epoch: v.epoch, Failed: []Joiner{{0, 0}}},
		&ReportAck{Epoch: v.epoch, Failed: []Joiner{{1, 0}}},
		&Commit{Epoch: p.Epoch},
		&JoinRequest{From: 6, Epoch: 0, Joiners: []Joiner{{6, 77}}},
		&JoinRequest{Alive: true, From: 3, Epoch: MakeEpoch(9, 2), Hops: 2, Joiners: []Joiner{{3, 99}, {5, 0}}},
		&JoinDetAck{Epoch: p.Epoch},
		&Nack{Epoch: p.Epoch, Pending: true, View: nv.full()},
		&NeedView{Epoch: p.Epoch},
		&Query{Epoch: p.Epoch},
		&Sync{View: nv.full(), Abort: MakeEpoch(3, 1)},
		&Sync{View: nv.full(), Abort: MakeEpoch(3, 1), Pending: true},
		&Sync{View: FullView{Incs: []Joiner{{6, 77}}}, Abort: MakeEpoch(3, 1)},
		&Notice{Epoch: p.Epoch, Root: 0},
		&Notice{Epoch: p.Epoch, Root: 0, Final: true},
		&MinorityNotice{Epoch: v.epoch, Alive: 2, Size: 5},
		&Prepare{Cause: CauseRefresh, Epoch: p.Epoch, Ancestry: p.Ancestry, Committed: true},
		&Prepare{Cause: CauseRefresh, Epoch: p.Epoch, Ancestry: p.Ancestry, Committed: true,
			Full: true, Members: v.list(), Incs: v.incList()},
		&Ack{Cause: CauseRefresh, Epoch: p.Epoch},
		&Prepare{Cause: CauseFailedNode, Epoch: p.Epoch, Ancestry: p.Ancestry, Failed: p.Failed, Committed: true, Left: p.Failed},
		&Leave{Epoch: v.epoch, Inc: 77},
	)
}

func newCodec(t testing.TB) *wire.Codec {
	c := wire.NewCodec()
	if err := RegisterCodecs(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// Every message survives encoding and decoding, and its encoding is
// canonical (decode then encode gives the same bytes).
func TestCodecRoundTrip(t *testing.T) {
	c := newCodec(t)
	seen := map[core.Kind]bool{}
	for _, m := range sampleMessages() {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("%v: %v", KindName(m.Kind()), err)
		}
		d, err := c.Unmarshal(m.Kind(), b)
		if err != nil {
			t.Fatalf("%v: %v", KindName(m.Kind()), err)
		}
		if !reflect.DeepEqual(stripView(m), stripView(d)) {
			t.Errorf("%v: got %+v, want %+v", KindName(m.Kind()), d, m)
		}
		if s := core.MsgSize(m); s != len(b) {
			t.Errorf("%v: WireSize %d, encoding %d bytes", KindName(m.Kind()), s, len(b))
		}
		seen[m.Kind()] = true
	}
	for _, k := range c.Kinds() {
		if !seen[k] {
			t.Errorf("no sample of %v", KindName(k))
		}
	}
}

// stripView drops the in-memory shortcuts, which never travel.
func stripView(m core.Msg) core.Msg {
	switch x := m.(type) {
	case *Prepare:
		y := *x
		y.v = nil
		if !y.Full {
			y.Members, y.Incs = nil, nil
		}
		return &y
	case *Nack:
		y := *x
		y.v = nil
		return &y
	case *Sync:
		y := *x
		y.v = nil
		return &y
	case *Ack:
		// ROOT_DEAD and ROOT_AND_NODE_FAILURE are acknowledged by
		// FAILURE_ACK: the cause travels as the kind.
		y := *x
		if y.Kind() == KindFailureAck {
			y.Cause = CauseFailedNode
		}
		return &y
	}
	return m
}

// Malformed input is an error wrapping a wire sentinel, never a panic.
func TestCodecRejects(t *testing.T) {
	c := newCodec(t)
	enc := func(f func(e *wire.Encoder)) []byte { var e wire.Encoder; f(&e); return e.B }
	// prep encodes p as given, epoch 2.n0 on base 1.n0 unless p says
	// otherwise (an empty, non-nil Ancestry is none): the encoder checks
	// nothing, so malformed proposals come out as they are.
	prep := func(p Prepare) []byte {
		p.Epoch = MakeEpoch(2, 0)
		if p.Ancestry == nil {
			p.Ancestry = []uint64{MakeEpoch(1, 0)}
		}
		return enc(p.MarshalWire)
	}
	// Lists longer than the ones compared pairwise, their last entry a
	// duplicate.
	longJoiners := make([]Joiner, 40)
	for i := range longJoiners {
		longJoiners[i] = Joiner{core.NodeID(i + 1), 0}
	}
	longJoiners[39].ID = 7
	longIDs := make([]core.NodeID, 30)
	for i := range longIDs {
		longIDs[i] = core.NodeID(100 - i)
	}
	longIDs[29] = 100
	cases := []struct {
		name string
		kind core.Kind
		b    []byte
		want error
	}{
		{"empty report", KindNodeFailure, enc(func(e *wire.Encoder) { e.Uvarint(MakeEpoch(1, 0)); e.Uvarint(0); e.Uvarint(0) }), wire.ErrInvalid},
		{"leaver not among the failed", KindNodeFailure, enc((&Report{Epoch: MakeEpoch(1, 0), Failed: []Joiner{{1, 0}}, Left: ids(2)}).MarshalWire), wire.ErrInvalid},
		{"leaver listed twice", KindNodeFailure, enc((&Report{Epoch: MakeEpoch(1, 0), Failed: []Joiner{{1, 0}}, Left: ids(1, 1)}).MarshalWire), wire.ErrInvalid},
		{"leaver listed twice in a proposal", KindFailedNode, prep(Prepare{Failed: ids(1), Left: ids(1, 1)}), wire.ErrInvalid},
		{"leave of epoch 0", KindLeave, enc(func(e *wire.Encoder) { e.Uvarint(0); e.Uvarint(0) }), wire.ErrInvalid},
		{"epoch counter 0", KindViewCommit, enc(func(e *wire.Encoder) { e.Uvarint(7) }), wire.ErrInvalid},
		{"duplicate failed", KindNodeFailure, enc((&Report{Epoch: MakeEpoch(1, 0), Failed: []Joiner{{1, 0}, {1, 0}}}).MarshalWire), wire.ErrInvalid},
		{"duplicate failed in a long report", KindNodeFailure, enc((&Report{Epoch: MakeEpoch(1, 0), Failed: longJoiners}).MarshalWire), wire.ErrInvalid},
		{"duplicate failed in a proposal", KindFailedNode, prep(Prepare{Failed: ids(3, 1, 3)}), wire.ErrInvalid},
		{"duplicate failed in a long proposal", KindFailedNode, prep(Prepare{Failed: longIDs}), wire.ErrInvalid},
		{"duplicate joiner in a proposal", KindNewNodeJoin, prep(Prepare{Joined: []Joiner{{5, 1}, {6, 2}, {5, 3}}}), wire.ErrInvalid},
		{"duplicate member in a full list", KindNewNodeJoin, prep(Prepare{Joined: []Joiner{{5, 1}}, Full: true, Members: ids(0, 5, 2, 5), Incs: []Joiner{{5, 1}}}), wire.ErrInvalid},
		{"no ancestry", KindFailedNode, prep(Prepare{Ancestry: []uint64{}, Failed: ids(1)}), wire.ErrInvalid},
		{"ancestry above epoch", KindFailedNode, prep(Prepare{Ancestry: []uint64{MakeEpoch(3, 0)}, Failed: ids(1)}), wire.ErrInvalid},
		{"full list rooted elsewhere", KindFailedNode, prep(Prepare{Failed: ids(1), Committed: true, Full: true, Members: ids(2, 0)}), wire.ErrInvalid},
		{"truncated", KindViewSync, []byte{0x80}, wire.ErrTruncated},
		{"sync without a view or an abort", KindViewSync, enc((&Sync{View: FullView{Incs: []Joiner{{6, 77}}}}).MarshalWire), wire.ErrInvalid},
		{"sync without a view, pending", KindViewSync, enc((&Sync{View: FullView{Incs: []Joiner{{6, 77}}}, Abort: MakeEpoch(3, 1), Pending: true}).MarshalWire), wire.ErrInvalid},
		{"sync without a view, with members", KindViewSync, enc((&Sync{View: FullView{Members: ids(1), Incs: []Joiner{{6, 77}}}, Abort: MakeEpoch(3, 1)}).MarshalWire), wire.ErrInvalid},
		{"sync without a view or an incarnation", KindViewSync, enc((&Sync{Abort: MakeEpoch(3, 1)}).MarshalWire), wire.ErrInvalid},
		{"trailing", KindViewCommit, enc(func(e *wire.Encoder) { e.Uvarint(MakeEpoch(1, 0)); e.Uint8(0) }), wire.ErrTrailing},
		{"joiner count too long", KindNewNode, enc(func(e *wire.Encoder) { e.NodeID(1); e.Uvarint(0); e.Uint8(0); e.Uvarint(1000) }), wire.ErrTooLong},
		{"alive above size", KindMinority, enc(func(e *wire.Encoder) { e.Uvarint(MakeEpoch(1, 0)); e.Uvarint(5); e.Uvarint(3) }), wire.ErrInvalid},
	}
	for _, tc := range cases {
		_, err := c.Unmarshal(tc.kind, tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

// fuzzDecoder checks one decoder: any input either fails with an error or
// decodes to a message whose encoding is the input (the encoding is
// canonical), even once the input is overwritten; and a decoded message
// handed to a running member never makes it panic or break an invariant
// (it is run with ordinary state).
func fuzzDecoder(f *testing.F, kinds ...core.Kind) {
	c := newCodec(f)
	for _, m := range sampleMessages() {
		for _, k := range kinds {
			if m.Kind() == k {
				b, _ := c.Marshal(m)
				f.Add(uint8(0), b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, sel uint8, b []byte) {
		k := kinds[int(sel)%len(kinds)]
		if !c.Detached(k) {
			t.Fatalf("%v is not registered as detached", k)
		}
		// The kinds are detached (the host decodes them straight from the
		// transport's buffer): the message must hold nothing of in, which
		// is overwritten before the message is checked.
		in := bytes.Clone(b)
		m, err := c.Unmarshal(k, in)
		for i := range in {
			in[i] = 0xa5
		}
		if err != nil {
			var de *wire.DecodeError
			if !errors.As(err, &de) && !errors.Is(err, wire.ErrTrailing) {
				t.Fatalf("error without a decode error: %v", err)
			}
			return
		}
		out, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
		}
		// Feed it to a member that is the root and to one that is not,
		// from a member and from an outsider.
		for _, self := range ids(0, 3) {
			mb, _ := New(DefaultConfig(), ids(0, 1, 2, 3, 4, 5))
			env := coretest.NewEnv(self, 1)
			mb.Start(env)
			for _, from := range ids(1, 6) {
				mb.Receive(from, m)
			}
		}
	})
}

func FuzzReport(f *testing.F)    { fuzzDecoder(f, KindNodeFailure, KindRootFailure) }
func FuzzReportAck(f *testing.F) { fuzzDecoder(f, KindFailureDetAck) }
func FuzzPrepare(f *testing.F) {
	fuzzDecoder(f, KindFailedNode, KindRootDead, KindRootAndNodeFailure, KindNewNodeJoin, KindAliveNodeJoin, KindRefresh)
}
func FuzzAck(f *testing.F) {
	fuzzDecoder(f, KindFailureAck, KindNewNodeJoinAck, KindAliveNodeJoinAck, KindRefreshAck)
}
func FuzzCommit(f *testing.F)      { fuzzDecoder(f, KindViewCommit) }
func FuzzJoinRequest(f *testing.F) { fuzzDecoder(f, KindNewNode, KindNodeAlive) }
func FuzzJoinDetAck(f *testing.F)  { fuzzDecoder(f, KindJoinDetAck) }
func FuzzNack(f *testing.F)        { fuzzDecoder(f, KindViewNack) }
func FuzzNeedView(f *testing.F)    { fuzzDecoder(f, KindViewNeed) }
func FuzzQuery(f *testing.F)       { fuzzDecoder(f, KindViewQuery) }
func FuzzSync(f *testing.F)        { fuzzDecoder(f, KindViewSync) }
func FuzzNotice(f *testing.F)      { fuzzDecoder(f, KindExcluded) }
func FuzzMinority(f *testing.F)    { fuzzDecoder(f, KindMinority) }
func FuzzLeave(f *testing.F)       { fuzzDecoder(f, KindLeave) }

// TestFuzzCorpus writes (with -update) and checks the seed corpus of every
// fuzz target under testdata/fuzz: one file per sample message.
func TestFuzzCorpus(t *testing.T) {
	targets := map[string][]core.Kind{
		"FuzzReport":      {KindNodeFailure, KindRootFailure},
		"FuzzReportAck":   {KindFailureDetAck},
		"FuzzPrepare":     {KindFailedNode, KindRootDead, KindRootAndNodeFailure, KindNewNodeJoin, KindAliveNodeJoin},
		"FuzzAck":         {KindFailureAck, KindNewNodeJoinAck, KindAliveNodeJoinAck},
		"FuzzCommit":      {KindViewCommit},
		"FuzzJoinRequest": {KindNewNode, KindNodeAlive},
		"FuzzJoinDetAck":  {KindJoinDetAck},
		"FuzzNack":        {KindViewNack},
		"FuzzNeedView":    {KindViewNeed},
		"FuzzQuery":       {KindViewQuery},
		"FuzzSync":        {KindViewSync},
		"FuzzNotice":      {KindExcluded},
		"FuzzMinority":    {KindMinority},
		"FuzzLeave":       {KindLeave},
	}
	c := newCodec(t)
	for name, kinds := range targets {
		dir := filepath.Join("testdata", "fuzz", name)
		n := 0
		for _, m := range sampleMessages() {
			for i, k := range kinds {
				if m.Kind() != k {
					continue
				}
				b, _ := c.Marshal(m)
				body := fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", byte(i), b)
				path := filepath.Join(dir, fmt.Sprintf("seed-%02d", n))
				n++
				if *updateCorpus {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				got, err := os.ReadFile(path)
				if err != nil || string(got) != body {
					t.Errorf("%s is missing or stale; run go test ./member -run TestFuzzCorpus -update", path)
				}
			}
		}
	}
}
