package fd

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// TestKindNumbers pins the wire numbers of the fd kinds: they are append
// only, and each must equal core.MakeKind(core.ProtoFD, n).
func TestKindNumbers(t *testing.T) {
	for _, c := range []struct {
		k    core.Kind
		n    uint8
		name string
	}{
		{KindHeartbeat, 1, "heartbeat"},
		{KindHeartbeatPing, 2, "heartbeat-ping"},
		{KindHeartbeatPong, 3, "heartbeat-pong"},
		{KindHeartbeatNotice, 4, "heartbeat-notice"},
		{KindHeartbeatNoticeAck, 5, "heartbeat-notice-ack"},
		{KindHeartbeatProbeReq, 6, "heartbeat-probe-req"},
		{KindHeartbeatProbeAck, 7, "heartbeat-probe-ack"},
		{KindGossip, 16, "gossip"},
		{KindGossipPing, 17, "gossip-ping"},
		{KindGossipPong, 18, "gossip-pong"},
		{KindGossipProbeReq, 19, "gossip-probe-req"},
		{KindGossipProbeAck, 20, "gossip-probe-ack"},
		{KindGossipProbeRelay, 21, "gossip-probe-relay"},
	} {
		if want := core.MakeKind(core.ProtoFD, c.n); c.k != want {
			t.Errorf("%s = %v, want %v", c.name, c.k, want)
		}
		if got := KindName(c.k); got != c.name {
			t.Errorf("KindName(%v) = %q, want %q", c.k, got, c.name)
		}
	}
	if got := KindName(core.MakeKind(core.ProtoFD, 99)); got != "fd/99" {
		t.Errorf("KindName(unknown) = %q, want fd/99", got)
	}
}

// TestRegisterCodecs: every fd kind named in kinds.go has a decoder.
func TestRegisterCodecs(t *testing.T) {
	c := wire.NewCodec()
	if err := RegisterCodecs(c); err != nil {
		t.Fatal(err)
	}
	for k := range kindNames {
		if c.Name(k) == k.String() {
			t.Errorf("kind %v (%s) has no decoder", k, KindName(k))
		}
	}
}
