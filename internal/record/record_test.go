package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
)

// TestRoundTrip: what WriteLine writes, DecodeRecord reads back as the same
// typed event; a line of an unknown type keeps its raw fields.
func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := WriteLine(&b, 3, 5*time.Millisecond, "PingPong", PingPong{Peer: 1, Count: 2, Median: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRecord(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	if r.Node != 3 || r.Uptime != 5*time.Millisecond || r.Type != "record.PingPong" {
		t.Fatalf("got %+v, want node 3, uptime 5ms, type record.PingPong", r)
	}
	if p, ok := r.Event.(PingPong); !ok || p.Peer != 1 || p.Count != 2 || p.Median != time.Millisecond {
		t.Fatalf("event %#v, want PingPong{Peer: 1, Count: 2, Median: 1ms}", r.Event)
	}
	line := EncodeLine(Record{Node: 1, Time: time.Unix(1, 0), Type: "member.ViewInstalled", Event: member.ViewInstalled{Epoch: 4, Members: []core.NodeID{0, 1}}})
	r, err = DecodeRecord(line)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := r.Event.(member.ViewInstalled); !ok || v.Epoch != 4 || len(v.Members) != 2 {
		t.Fatalf("event %#v, want a view of epoch 4 with 2 members", r.Event)
	}
	r, err = DecodeRecord(EncodeLine(Record{Type: "other.Thing", Event: map[string]int{"x": 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if raw, ok := r.Event.(json.RawMessage); !ok || string(raw) != `{"x":1}` {
		t.Fatalf("unknown type: event %#v, want its raw fields {\"x\":1}", r.Event)
	}
}

// TestDecodeErrors: a line that is not JSON, or whose fields do not fit its
// type, is an ErrRecord.
func TestDecodeErrors(t *testing.T) {
	for _, line := range []string{``, `{`, `[1,2]`, `{"type":"record.PingPong","fields":{"Count":"x"}}`} {
		if _, err := DecodeRecord([]byte(line)); !errors.Is(err, ErrRecord) {
			t.Errorf("DecodeRecord(%q) = %v, want ErrRecord", line, err)
		}
	}
}

// FuzzDecodeRecord: no input panics; a decoded record encodes and decodes
// again to the same node and type.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(EncodeLine(Record{Node: 2, Time: time.Unix(7, 0), Type: "record.Killed", Event: Killed{}}))
	f.Add(EncodeLine(Record{Node: 1, Type: "member.ViewInstalled", Event: member.ViewInstalled{Epoch: 1, Members: []core.NodeID{1}}}))
	f.Add(EncodeLine(Record{Type: "record.MulticastReport", Event: MulticastReport{Sent: 3, Lat: []uint64{1, 2}}}))
	f.Add([]byte(`{"type":"core.Failed","fields":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := DecodeRecord(line)
		if err != nil {
			if !errors.Is(err, ErrRecord) {
				t.Fatalf("error %v does not wrap ErrRecord", err)
			}
			return
		}
		again, err := DecodeRecord(EncodeLine(r))
		if err != nil {
			t.Fatalf("re-decoding %q: %v", EncodeLine(r), err)
		}
		if again.Node != r.Node || again.Type != r.Type {
			t.Fatalf("round trip changed %v %q into %v %q", r.Node, r.Type, again.Node, again.Type)
		}
	})
}

// TestFromEvent: for an event of every type a record holds as a value, and
// for events of other types, FromEvent gives the record that DecodeRecord
// reads from the line a host writes for the event.
func TestFromEvent(t *testing.T) {
	samples := []core.Event{
		member.ViewInstalled{Epoch: 4, Members: []core.NodeID{0, 1, 3}, Joined: []core.NodeID{3}, Departed: []core.NodeID{2}},
		member.Stabilized{Epoch: 4, Began: time.Millisecond, At: 3 * time.Millisecond, Members: 3},
		member.StabilizationStarted{Epoch: 4, Cause: member.CauseFailedNode, Began: time.Millisecond, At: 2 * time.Millisecond, Failed: []core.NodeID{2}, Joined: []core.NodeID{3}},
		member.Evicted{Epoch: 4, Root: 1},
		core.Suspected{Node: 2},
		core.Failed{Node: 2},
		Listening{Addr: "127.0.0.1:1", PID: 7},
		PingPong{Peer: 1, Count: 2, Min: 1, Median: 2, Mean: 3, Max: 4},
		TreeEchoTime{Fanout: 4, Members: 64, Count: 20, Min: 1, Median: 2, Max: 3},
		EchoOnce{Fanout: 4, Members: 64, Took: 7},
		EchoOnce{Fanout: 4, Members: 64, Err: "not the root"},
		ProcessTime{Kind: "FAILED_NODE", Epoch: 4, From: 1, Took: 5},
		Hint{Node: 2, Reason: "dial: refused"},
		FailureInjected{Node: 2},
		Reports{Epoch: 4, Count: 2, From: []core.NodeID{1, 5}},
		PeerAdded{Peer: 9, Addr: "127.0.0.1:2"},
		Exit{Err: "x"},
		Killed{},
		Exited{ExitCode: -1, Err: "killed"},
		Spawned{PID: 3, Addr: "127.0.0.1:3", Join: true},
		// Types records do not hold as values.
		core.MembersChanged{Epoch: 4, Members: []core.NodeID{0, 1}},
		&core.Failed{Node: 2},
		7,
	}
	covered := map[string]bool{}
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, ev := range samples {
		b, err := json.Marshal(host.EventLine{Time: at, UptimeNs: 9, Node: 3, Type: host.EventType(ev), Fields: host.EventFields(ev)})
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		got := FromEvent(3, at, 9, ev)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("FromEvent(%#v)\n got %#v\nwant %#v", ev, got, want)
		}
		if _, raw := got.Event.(json.RawMessage); !raw {
			covered[got.Type] = true
		}
	}
	for name := range known {
		if !covered[name] {
			t.Errorf("no sample of %s", name)
		}
	}
}
