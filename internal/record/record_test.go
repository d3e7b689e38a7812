package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
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
