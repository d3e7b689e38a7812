// Package wire is the binary encoding of cohort: message payloads
// ([Encoder], [Decoder], [Message], [Codec]), frames and the connection
// handshake. It is pure (no I/O beyond io.Reader/io.Writer handed in, no
// goroutines, no randomness), so the simulator and the host share it.
//
// A protocol message implements [Message]: MarshalWire appends its fields
// with an [Encoder]; its package provides a [DecodeFunc] that reads them back
// with a [Decoder] in the same order and the host registers it in its
// [Codec]:
//
//	func (m Heartbeat) MarshalWire(e *wire.Encoder) { e.Uvarint(m.Seq); e.NodeIDs(m.Suspects) }
//
//	func decodeHeartbeat(d *wire.Decoder) (core.Msg, error) {
//		m := Heartbeat{Seq: d.Uvarint(), Suspects: d.NodeIDs()}
//		return m, d.Err()
//	}
//
//	c := wire.NewCodec()
//	err := c.Register(KindHeartbeat, "fd.Heartbeat", decodeHeartbeat)
package wire
