package fd

import (
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The message kinds of package fd, in protocol [core.ProtoFD]. Append only:
// the numbers are on the wire. Never renumber, never reuse a retired number.
//
// Numbers 1–15 belong to the heartbeat detector (Phoenix §4), 16–31 to the
// gossip detector (P2P-MPI §5). A detector that needs a new kind takes the
// next free number in its own range and adds it at the end of its block.
//
// Each value equals core.MakeKind(core.ProtoFD, n); they are spelled out as
// constants (MakeKind is a function and cannot appear in a const
// declaration) so that they can label switch cases, and TestKindNumbers
// checks them against MakeKind.
const (
	// Heartbeat detector (Phoenix §4), numbers 1–15. Owned by heartbeat*.go;
	// 8–15 are reserved for it.

	// KindHeartbeat is a heartbeat sent by a node to its monitors.
	KindHeartbeat = core.Kind(core.ProtoFD)<<8 | 1
	// KindHeartbeatPing asks a suspect whether it is alive.
	KindHeartbeatPing = core.Kind(core.ProtoFD)<<8 | 2
	// KindHeartbeatPong answers a KindHeartbeatPing.
	KindHeartbeatPong = core.Kind(core.ProtoFD)<<8 | 3
	// KindHeartbeatNotice spreads a suspicion or its refutation to every
	// member (the Phoenix §4.2 routing-table propagation).
	KindHeartbeatNotice = core.Kind(core.ProtoFD)<<8 | 4
	// KindHeartbeatNoticeAck acknowledges a KindHeartbeatNotice (notices
	// are retransmitted until acknowledged).
	KindHeartbeatNoticeAck = core.Kind(core.ProtoFD)<<8 | 5
	// KindHeartbeatProbeReq asks a helper to reach a suspect on the
	// sender's behalf (an indirect probe).
	KindHeartbeatProbeReq = core.Kind(core.ProtoFD)<<8 | 6
	// KindHeartbeatProbeAck tells the requester of an indirect probe that
	// the helper heard from the suspect.
	KindHeartbeatProbeAck = core.Kind(core.ProtoFD)<<8 | 7

	// Gossip detector (P2P-MPI §5), numbers 16–31. Owned by gossip*.go;
	// 22–31 are reserved for it.

	// KindGossip carries a heartbeat table ([GossipMsg]).
	KindGossip = core.Kind(core.ProtoFD)<<8 | 16
	// KindGossipPing is the consensus-phase probe of a suspect
	// ([GossipPing]).
	KindGossipPing = core.Kind(core.ProtoFD)<<8 | 17
	// KindGossipPong answers a KindGossipPing ([GossipPong]).
	KindGossipPong = core.Kind(core.ProtoFD)<<8 | 18
	// KindGossipProbeReq asks a helper to ping a suspect on the sender's
	// behalf ([GossipProbeReq]).
	KindGossipProbeReq = core.Kind(core.ProtoFD)<<8 | 19
	// KindGossipProbeAck tells the requester that the suspect answered the
	// helper ([GossipProbeAck]).
	KindGossipProbeAck = core.Kind(core.ProtoFD)<<8 | 20
	// KindGossipProbeRelay asks a member to pass a suspect's own answer
	// on to the requester ([GossipProbeRelay]).
	KindGossipProbeRelay = core.Kind(core.ProtoFD)<<8 | 21
)

var kindNames = map[core.Kind]string{
	KindHeartbeat:          "heartbeat",
	KindHeartbeatPing:      "heartbeat-ping",
	KindHeartbeatPong:      "heartbeat-pong",
	KindHeartbeatNotice:    "heartbeat-notice",
	KindHeartbeatNoticeAck: "heartbeat-notice-ack",
	KindHeartbeatProbeReq:  "heartbeat-probe-req",
	KindHeartbeatProbeAck:  "heartbeat-probe-ack",
	KindGossip:             "gossip",
	KindGossipPing:         "gossip-ping",
	KindGossipPong:         "gossip-pong",
	KindGossipProbeReq:     "gossip-probe-req",
	KindGossipProbeAck:     "gossip-probe-ack",
	KindGossipProbeRelay:   "gossip-probe-relay",
}

// KindName returns the name of an fd message kind ("gossip",
// "heartbeat-ping", …), or the generic [core.Kind.String] form for a kind
// that is not one of package fd's.
func KindName(k core.Kind) string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprint(k)
}

// RegisterCodecs registers the decoders of every fd message kind in c: the
// heartbeat detector's ([RegisterHeartbeatCodecs]) and the gossip
// detector's ([RegisterGossipCodecs]). A host that runs either detector
// calls this once while building its codec. Each detector registers its own
// kinds in its own function; a detector that adds kinds registers them
// there, and this function needs no change.
func RegisterCodecs(c *wire.Codec) error {
	if err := RegisterHeartbeatCodecs(c); err != nil {
		return err
	}
	return RegisterGossipCodecs(c)
}
