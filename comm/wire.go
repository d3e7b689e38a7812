package comm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The frame kinds of package comm, in core.ProtoComm. Append only: the
// numbers are on the wire. Every comm frame travels straight through the
// transport (Session's data path), never through the host's event loop.
const (
	kindData   = core.Kind(core.ProtoComm)<<8 | 1 // point-to-point and collective data
	kindVData  = core.Kind(core.ProtoComm)<<8 | 2 // data addressed to a virtual node
	kindRevoke = core.Kind(core.ProtoComm)<<8 | 3 // a communicator is revoked (flooded)
	kindAgree  = core.Kind(core.ProtoComm)<<8 | 4 // one step of the fault-tolerant agreement
	kindVMap   = core.Kind(core.ProtoComm)<<8 | 5 // a virtual-node mapping update (flooded)
	// 6, 7, 8: the rendezvous's kindRTS, kindCTS, kindRData (rendezvous.go)
	kindCredit = core.Kind(core.ProtoComm)<<8 | 9  // eager credit returned to a sender (credit.go)
	kindCData  = core.Kind(core.ProtoComm)<<8 | 10 // kindData that also returns credit (credit.go)
	// 11: the rendezvous's kindRStop (rendezvous.go); 12: kindWelcome (newcomer.go)
	// 13: retired, never reused (a rank's leave goes through the membership, leave.go)
)

// controlKind reports whether frames of kind k are comm's control frames:
// revocations, agreement steps and welcomes (newcomer.go), which travel
// apart from its data, in
// the transport's control lane (transport/tcp lists these kinds), and may
// overtake data sent before them (package doc, "Control frames").
func controlKind(k core.Kind) bool { return k == kindRevoke || k == kindAgree || k == kindWelcome }

// errMalformed: a comm frame that does not decode. It is dropped and counted.
var errMalformed = errors.New("comm: malformed frame")

// A data frame's payload is a small header followed by the message bytes:
//
//	(kindCData only) uvarint credit | uvarint context id | varint tag | (kindVData only) uvarint virtual node | data
//
// A kindCData frame is a kindData frame that also returns credit to the
// destination (credit.go). The header is written by appendDataHeader and
// read by parseData; it is at most three 10-byte varints, so it fits in a
// Request's header array (maxRTS, rendezvous.go).

// dataHeader is a data frame's header.
type dataHeader struct {
	credit uint64 // kindCData: bytes of credit returned
	ctxID  uint64
	tag    int
	vnode  uint64 // kindVData: the virtual node
}

func appendDataHeader(b []byte, kind core.Kind, h dataHeader) []byte {
	// A small message's header on the world's communicators: every field
	// one byte (parseData's fast case).
	zt := uint64(h.tag) << 1 // zig-zag, as binary.AppendVarint
	if h.tag < 0 {
		zt = ^zt
	}
	switch {
	case kind == kindCData && h.credit|h.ctxID|zt < 0x80:
		return append(b, byte(h.credit), byte(h.ctxID), byte(zt))
	case kind == kindData && h.ctxID|zt < 0x80:
		return append(b, byte(h.ctxID), byte(zt))
	}
	return appendDataHeaderVarints(b, kind, h)
}

// appendDataHeaderVarints is appendDataHeader for fields of any length.
func appendDataHeaderVarints(b []byte, kind core.Kind, h dataHeader) []byte {
	if kind == kindCData {
		b = binary.AppendUvarint(b, h.credit)
	}
	b = binary.AppendUvarint(b, h.ctxID)
	b = binary.AppendVarint(b, int64(h.tag))
	if kind == kindVData {
		b = binary.AppendUvarint(b, h.vnode)
	}
	return b
}

// parseData splits the payload of a data frame of the given kind into its
// header and its data (aliasing p).
func parseData(p []byte, kind core.Kind) (h dataHeader, data []byte, err error) {
	// A small message's header on the world's communicators: every field
	// one byte, decoded here without a call per field.
	switch {
	case kind == kindCData && len(p) >= 3 && p[0]|p[1]|p[2] < 0x80:
		h.credit, h.ctxID, h.tag = uint64(p[0]), uint64(p[1]), unzigzag(p[2])
		return h, p[3:], nil
	case kind == kindData && len(p) >= 2 && p[0]|p[1] < 0x80:
		h.ctxID, h.tag = uint64(p[0]), unzigzag(p[1])
		return h, p[2:], nil
	}
	return parseDataVarints(p, kind)
}

// unzigzag decodes a one-byte zig-zag varint (binary.AppendVarint's).
func unzigzag(z byte) int {
	t := int(z >> 1)
	if z&1 != 0 {
		t = ^t
	}
	return t
}

// parseDataVarints is parseData for fields of any length.
func parseDataVarints(p []byte, kind core.Kind) (h dataHeader, data []byte, err error) {
	var ok bool
	if kind == kindCData {
		if h.credit, p, ok = dataUvarint(p); !ok {
			return dataHeader{}, nil, fmt.Errorf("%w: credit", errMalformed)
		}
	}
	if h.ctxID, p, ok = dataUvarint(p); !ok {
		return dataHeader{}, nil, fmt.Errorf("%w: context id", errMalformed)
	}
	var zt uint64
	if zt, p, ok = dataUvarint(p); !ok {
		return dataHeader{}, nil, fmt.Errorf("%w: tag", errMalformed)
	}
	t := int64(zt >> 1) // zig-zag, as binary.AppendVarint writes it
	if zt&1 != 0 {
		t = ^t
	}
	if t != int64(int(t)) {
		return dataHeader{}, nil, fmt.Errorf("%w: tag", errMalformed)
	}
	h.tag = int(t)
	if kind == kindVData {
		if h.vnode, p, ok = dataUvarint(p); !ok {
			return dataHeader{}, nil, fmt.Errorf("%w: virtual node", errMalformed)
		}
	}
	return h, p, nil
}

// dataUvarint reads a varint at the start of p and returns the rest; a
// one-byte varint (most fields of a small message's header) inline.
func dataUvarint(p []byte) (uint64, []byte, bool) {
	if len(p) > 0 && p[0] < 0x80 {
		return uint64(p[0]), p[1:], true
	}
	u, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, nil, false
	}
	return u, p[n:], true
}

// agreeMsg is one step of the agreement protocol (see agree.go). Ranks are
// ranks of the communicator.
type agreeMsg struct {
	Comm     uint64 // the communicator's id
	Instance uint64 // which agreement of that communicator (1, 2, …)
	Type     agreeType
	Ballot   int   // the coordinator's rank the message is about
	Flag     int64 // contrib: the sender's flag
	AccB     int   // contrib: ballot of the accepted value, -1 if none
	Value    agreeValue
}

type agreeType uint8

// The agreement steps. Append only.
const (
	agreeContrib  agreeType = 1 // participant → coordinator: flag, promise, accepted value
	agreeAccept   agreeType = 2 // coordinator → all: accept this value at this ballot
	agreeAccepted agreeType = 3 // participant → coordinator: accepted
	agreeDecided  agreeType = 4 // anyone → anyone: the decision
)

// agreeValue is what an agreement decides: the AND of the survivors' flags
// and the failed ranks it excluded.
type agreeValue struct {
	Flag   int64
	Failed []int // increasing: the ranks gone, failed or left
	Left   []int // increasing: those of Failed that left the job (leave.go)
}

func (m *agreeMsg) marshal() []byte {
	var e wire.Encoder
	e.Uvarint(m.Comm)
	e.Uvarint(m.Instance)
	e.Uint8(uint8(m.Type))
	e.Varint(int64(m.Ballot))
	e.Varint(m.Flag)
	e.Varint(int64(m.AccB))
	e.Varint(m.Value.Flag)
	for _, rs := range [][]int{m.Value.Failed, m.Value.Left} {
		e.Uvarint(uint64(len(rs)))
		for _, r := range rs {
			e.Uvarint(uint64(r))
		}
	}
	return e.B
}

func unmarshalAgree(p []byte) (agreeMsg, error) {
	d := wire.NewDecoder(p)
	var m agreeMsg
	m.Comm = d.Uvarint()
	m.Instance = d.Uvarint()
	m.Type = agreeType(d.Uint8())
	m.Ballot = int(int32(d.Varint()))
	m.Flag = d.Varint()
	m.AccB = int(int32(d.Varint()))
	m.Value.Flag = d.Varint()
	for _, rs := range []*[]int{&m.Value.Failed, &m.Value.Left} {
		n := d.Uvarint()
		if n > uint64(d.Remaining()) {
			return m, fmt.Errorf("%w: agreement with %d ranks gone in %d bytes", errMalformed, n, d.Remaining())
		}
		if n > 0 {
			*rs = make([]int, n)
			for i := range *rs {
				(*rs)[i] = int(uint32(d.Uvarint()))
			}
		}
	}
	if err := d.Finish(); err != nil {
		return m, fmt.Errorf("%w: agreement: %w", errMalformed, err)
	}
	if m.Type < agreeContrib || m.Type > agreeDecided {
		return m, fmt.Errorf("%w: agreement step %d", errMalformed, m.Type)
	}
	return m, nil
}

// vmapMsg announces that the listed virtual nodes are mapped to Rank (-1:
// unmapped) as of version (Counter, Origin): the newer version wins, so
// concurrent remaps converge (a last-writer-wins register per virtual node).
type vmapMsg struct {
	Comm    uint64
	Counter uint64
	Origin  int // rank that made the change
	Rank    int // new owner, -1 for none
	VNodes  []uint64
}

func (m *vmapMsg) marshal() []byte {
	var e wire.Encoder
	e.Uvarint(m.Comm)
	e.Uvarint(m.Counter)
	e.Uvarint(uint64(m.Origin))
	e.Varint(int64(m.Rank))
	e.Uvarints(m.VNodes)
	return e.B
}

func unmarshalVMap(p []byte) (vmapMsg, error) {
	d := wire.NewDecoder(p)
	var m vmapMsg
	m.Comm = d.Uvarint()
	m.Counter = d.Uvarint()
	m.Origin = int(uint32(d.Uvarint()))
	m.Rank = int(int32(d.Varint()))
	m.VNodes = d.Uvarints()
	if err := d.Finish(); err != nil {
		return m, fmt.Errorf("%w: mapping: %w", errMalformed, err)
	}
	return m, nil
}
