// Package wire is the binary encoding of cohort: message payloads
// ([Encoder], [Decoder], [Message], [Codec]), frames ([Frame],
// [AppendFrame], [DecodeFrame], [FrameReader], [FrameWriter]) and the
// authenticated connection handshake ([Hello], [Proof], [Resume]) with the
// records that protect a connection between hosts ([RecordKeys],
// [RecordSealer], [RecordOpener]). It is pure: it does
// no I/O except through the io.Reader and io.Writer handed to it, starts no
// goroutine, and has no randomness (nonces come from the caller), so the
// simulator and the host share it.
//
// # Messages
//
// A protocol message implements [Message]: MarshalWire appends its fields
// with an [Encoder]; its package provides a [DecodeFunc] that reads them back
// with a [Decoder] in the same order, and the host registers every protocol's
// decoders in one [Codec] at start-up:
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
//
// Integers are varints (unsigned, or zig-zag for signed), in their one
// canonical (shortest) form: the decoder rejects padded varints, so every
// value has exactly one encoding. Byte strings, strings and lists are a
// uvarint count followed by the elements; a count larger than the bytes
// left is rejected before anything is allocated. The [Decoder]'s error is
// sticky, so a decoder reads every field and checks Err once. No input makes
// a decoder panic; every decoder here is fuzzed.
//
// # Kind numbers
//
// A frame names its message with a [core.Kind]: the high byte is the
// protocol ([core.Proto], itself an append-only list in core), the low byte
// the protocol's own number. Each protocol numbers its kinds in one
// append-only list: a number once released is never reused or renumbered,
// because it is on the wire; a retired kind keeps its number, unused. Kind 0
// (core/0) is reserved and never valid in a frame, so a zeroed buffer is not
// mistaken for a frame. This package owns the kinds of protocol core:
// core/1 is [Hello] and core/2 is [Proof].
//
// # Frames
//
// A frame is a big-endian uint32 length L followed by L bytes: a header of
// four uvarints and the payload (the message's MarshalWire output):
//
//	 0       1       2       3       4
//	+-------+-------+-------+-------+-------- ... ---+------------ ... ---+
//	|  L (uint32, big-endian)       | header          | payload            |
//	+-------+-------+-------+-------+-------- ... ---+------------ ... ---+
//	                                 \______________ L bytes ______________/
//
//	header = kind   uvarint  (1-3 bytes, ≤ 0xffff, ≠ 0)
//	         src    uvarint  (1-5 bytes, ≤ 2^32-1)
//	         dst    uvarint  (1-5 bytes, ≤ 2^32-1)
//	         epoch  uvarint  (1-10 bytes): the sender's view epoch
//
// The payload runs to the end of the frame, so it carries no length of its
// own. There is no flags byte: nothing per-frame needs one today, and a
// layout change bumps [Version], which the handshake checks.
//
// The length is a fixed 4-byte field rather than a uvarint for two reasons.
// A reader learns the whole frame size from exactly 4 bytes, without
// reading byte by byte. And a writer can encode a message of unknown size
// straight into its buffer and fill the length in afterwards (as
// [FrameWriter.WriteMessage] does), which a variable-width prefix would
// prevent without a copy. The cost, 1 to 3 bytes per frame over a varint,
// is small next to the 40 bytes of TCP/IP headers. L is checked against a
// limit ([DefaultMaxFrameSize], 16 MiB; [MaxHandshakeFrameSize] before
// authentication) before any buffer is grown.
//
// [DecodeFrame] distinguishes "need more bytes" ([ErrShortFrame]) from a
// corrupt or hostile stream ([ErrFrameTooLarge], [ErrMalformedFrame]),
// after which the connection must be closed. [FrameReader] and
// [FrameWriter] wrap a stream: the reader reads in large chunks into one
// reused buffer, the writer coalesces frames until Flush.
//
// # Handshake
//
// Every connection starts with this exchange, before any other frame is
// accepted (docs/DESIGN.md, "Security": every connection proves knowledge of the
// job secret). The initiator is the side that opened the connection; the
// other is the acceptor. Both sides know the job id and the job secret, a
// random byte string created at launch.
//
//  1. Each side, as soon as the connection is open and without waiting for
//     the other, sends a frame of kind [KindHello] (src = its node id, dst =
//     the peer's id if known, else core.None; epoch 0) carrying
//     Hello{Version, JobID, Node, Nonce, Integrity}, with 16 fresh random
//     bytes as Nonce (from crypto/rand in the host; never reused) and
//     Integrity set if the side wants the frames in records (see
//     "Records"). Each side sets its [FrameReader]'s limit to
//     [MaxHandshakeFrameSize] meanwhile.
//
//  2. Each side reads the peer's Hello ([DecodeHello], which stops at a
//     foreign version) and checks it with [CheckHello]: same version
//     ([ErrVersion], reporting both), same job ([ErrJob]), a valid node id,
//     and a nonce different from its own (a reflected Hello is [ErrAuth]).
//     The host also checks that Node is a node it expects. On any failure it
//     closes the connection.
//
//  3. Each side sends a frame of kind [KindProof] carrying
//     [ComputeProof](secret, its Hello, the peer's Hello, initiator?) =
//     HMAC-SHA256(secret, "cohort-v1" || initiator's Hello || acceptor's
//     Hello || direction label), the Hellos length-prefixed, the label
//     "initiator->acceptor" or "acceptor->initiator" by who sends it. The
//     initiator sends its Proof as soon as it has checked the acceptor's
//     Hello; the acceptor sends its own only after step 4, once the
//     initiator's Proof has verified: a peer that does not know the secret
//     gets no Proof, and nothing is decided or kept on its behalf (the
//     host's tie-break between simultaneous dials included). An acceptor
//     that has verified the initiator's Proof and refuses the connection
//     (transport/tcp's tie-break) sends, instead of a [KindProof] frame, a
//     [KindGoodbye] frame carrying the same Proof, then closes: the
//     initiator verifies it as a Proof and knows the refusal comes from the
//     node it dialled.
//
//  4. Each side reads the peer's Proof and checks it with [VerifyProof]
//     (or [CheckProof], which returns [ErrAuth]); the comparison is
//     constant-time. Only then does it raise its frame limit, send other
//     frames and accept the peer's: a side never sends data to a peer that
//     has not proved itself. From here on the host drops frames whose src is
//     not the authenticated node or whose dst is not itself.
//
//  5. Each side sends a [KindResume] frame ([Resume]: its stream id for
//     the pair, the peer's stream id as it last knew it, how many of that
//     stream's frames it has delivered, and whether it can be dialled) and
//     reads the peer's: the initiator right after its Proof, without
//     waiting, and the acceptor after its own Proof, having read the
//     initiator's before it decides on the connection (a node that cannot
//     be dialled wins transport/tcp's tie-break). If either Hello asked
//     for Integrity, each side's bytes after its Proof (its Resume
//     included) go in records (see "Records"). The
//     first frame each side sends after the handshake is a [KindSeq] mark,
//     the number of its next frame in the pair's stream; every later frame
//     but [KindPad], [KindGoodbye], [KindSeq], [KindAck] and [KindRelay]
//     takes the next number, and [KindAck] frames acknowledge a stream cumulatively. A
//     host resends on a new connection what the peer has not delivered
//     and drops what it delivered already (transport/tcp).
//
//  6. Only on a plain (not TLS) Unix socket between processes of one host:
//     each side sends a [KindRing] offer ([Ring]: the size of the ring it
//     will write, its memory passed beside the frame, or 0 for none), reads
//     the peer's, then sends and reads the answers (1: the peer's ring was
//     mapped and its header checked, including [RingTag]; 0: refused). If
//     both offered and both accepted, each side's frames go into its ring
//     from then on; otherwise both stay on the socket.
//
// Both Hellos cross in one flight, then the initiator's Proof and Resume
// and the acceptor's in turn, so the handshake costs one and a half round
// trips after the connection opens for the initiator and one for the
// acceptor (two more on a Unix socket, for the ring offers and answers).
//
// What a replay can and cannot do. A Hello carries no secret: anyone can
// send one, or replay an old one, and obtain the other side's Hello for
// that connection; anyone who accepts a connection obtains the
// initiator's Proof too. That Proof is useless elsewhere: it covers both
// nonces of this connection and its direction, so it convinces no other
// connection (the peer's nonce there is fresh) and cannot be reflected
// back on the same connection (the direction label differs, and an echoed
// Hello is refused). Replaying a recorded Proof fails for the same reason:
// it covers an old nonce of ours. So without the secret a peer can make us
// spend one handshake (an HMAC) and learn our version, job id and node id,
// but never complete a handshake. The handshake alone authenticates the
// two ends at the start, nothing after: an attacker on the path could
// relay a genuine handshake between two genuine nodes and then alter the
// frames that follow. Records close that gap.
//
// # Records
//
// When either Hello asks for Integrity (transport/tcp does on connections
// between hosts), each side carries its bytes after its Proof in records:
// a big-endian uint32 length N (1 or more), N bytes, and a 16-byte tag,
// AES-256-GCM's over nothing to encrypt with the N bytes as additional
// data (GMAC). Each direction has its key, [RecordKeys]: HKDF-SHA256 with
// the job secret as input key, both nonces as salt, and as info the
// label "cohort-v1 records", both Hellos length-prefixed (their job id,
// node ids and nonces) and the direction label. The nonce is the record's
// number in its direction, counted from 0 and never sent. A reader
// ([RecordOpener]) hands on no byte of a record before its tag has
// verified; a record altered, cut, replayed, reordered, moved to another
// connection or reflected fails ([ErrRecordAuth]), and the connection is
// closed. The proofs cover both Hellos, so no one on the path can take a
// request for records out. Records authenticate and do not encrypt: an
// attacker on the path still reads the frames (a job that must hide them
// runs over TLS, transport/tcp's Config.TLS). Record boundaries are the
// writer's (a batch of frames, a large payload), not the frames'.
//
// # Relayed frames
//
// Between two nodes whose direct link is down, transport/tcp carries a
// pair's frames through a third node in [KindRelay] frames: a [Relay]
// header (origin, destination, both stream ids, the frame's number in
// the pair's stream), the inner frame and an AES-GCM tag under a key of
// the ordered pair derived from the job secret ([RelayKey]). [SealRelay]
// authenticates the header and frame (GMAC: AES-GCM's tag with nothing to
// encrypt and header and frame as additional data), or encrypts the
// frame too ([RelaySealed], a job under TLS); [OpenRelay] checks it. The relay
// forwards the payload unchanged. This keeps a node without the secret
// from forging, altering or moving a relayed frame; it does not keep a
// node that holds the secret (any member, the relay included) from
// forging frames of any pair, as on the direct path, where any holder of
// the secret may claim any node id. [KindRoute] frames ([Route]) tell the
// peers which nodes the sender cannot reach directly.
package wire
