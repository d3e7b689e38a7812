package stable

import (
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The message kinds of package stable, in protocol [core.ProtoStable].
// Append only: the numbers are on the wire. Never renumber, never reuse a
// retired number.
const (
	// KindStart starts a round of Coord or S_Coord ([Start]).
	KindStart = core.Kind(core.ProtoStable)<<8 | 1
	// KindAck carries a member's vector, or a subtree's minimum, to the
	// coordinator or the parent ([Ack]).
	KindAck = core.Kind(core.ProtoStable)<<8 | 2
	// KindInfo carries the round's result from the coordinator or root
	// ([Info]).
	KindInfo = core.Kind(core.ProtoStable)<<8 | 3
	// KindAckInfo confirms an info (§3.5, only when Config.Resend > 0)
	// ([AckInfo]).
	KindAckInfo = core.Kind(core.ProtoStable)<<8 | 4
	// KindRow is FullDist's info message: one member's row ([Row]).
	KindRow = core.Kind(core.ProtoStable)<<8 | 5
	// KindGossip is CubeFullDist's stability message ([Gossip]).
	KindGossip = core.Kind(core.ProtoStable)<<8 | 6
)

var kindNames = map[core.Kind]string{
	KindStart:   "stable.Start",
	KindAck:     "stable.Ack",
	KindInfo:    "stable.Info",
	KindAckInfo: "stable.AckInfo",
	KindRow:     "stable.Row",
	KindGossip:  "stable.Gossip",
}

// KindName returns the name of a stable message kind ("stable.Ack", …), or
// the generic [core.Kind.String] form for a kind that is not one of ours.
func KindName(k core.Kind) string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprint(k)
}

// RegisterCodecs registers the decoders of every stable message kind in c.
// A host that runs a [Detector] calls it once while building its codec.
func RegisterCodecs(c *wire.Codec) error {
	for _, r := range []struct {
		k core.Kind
		f wire.DecodeFunc
	}{
		{KindStart, DecodeStart},
		{KindAck, DecodeAck},
		{KindInfo, DecodeInfo},
		{KindAckInfo, DecodeAckInfo},
		{KindRow, DecodeRow},
		{KindGossip, DecodeGossip},
	} {
		if err := c.Register(r.k, kindNames[r.k], r.f); err != nil {
			return err
		}
	}
	return nil
}
