package vsync

import (
	"encoding/binary"
	"hash/fnv"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// stream is what a node holds of one sender's messages in one view.
//
//	1 … base          freed (stable and delivered)
//	base+1 … have     held, contiguous (held[0 : have-base])
//	have+1 … top      held where not nil (holes are missing messages)
//
// and delivered ≤ have counts the messages handed to the application.
type stream struct {
	base      uint64
	held      []*Data // held[i] is message base+1+i; nil is a hole
	have      uint64
	delivered uint64
	top       uint64 // highest sequence number known to exist
	lastNack  time.Duration
	nacked    bool
}

// get returns message seq if it is held.
func (s *stream) get(seq uint64) *Data {
	if seq <= s.base || seq > s.base+uint64(len(s.held)) {
		return nil
	}
	return s.held[seq-s.base-1]
}

// put stores m and reports whether it was new. Messages more than maxAhead
// beyond the freed prefix are refused (the window of a correct sender never
// gets there; a retransmission fetches them later).
func (s *stream) put(m *Data, maxAhead uint64) bool {
	if m.Seq <= s.have || m.Seq > s.base+maxAhead {
		return false
	}
	i := m.Seq - s.base - 1
	for uint64(len(s.held)) <= i {
		s.held = append(s.held, nil)
	}
	if s.held[i] != nil {
		return false
	}
	s.held[i] = m
	for s.have-s.base < uint64(len(s.held)) && s.held[s.have-s.base] != nil {
		s.have++
	}
	s.top = max(s.top, m.Seq)
	return true
}

// free drops the delivered messages up to upTo and returns how many
// messages and payload bytes it dropped.
func (s *stream) free(upTo uint64) (msgs, bytes int) {
	upTo = min(upTo, s.delivered)
	if upTo <= s.base {
		return 0, 0
	}
	k := int(upTo - s.base)
	for _, m := range s.held[:k] {
		msgs++
		bytes += len(m.Payload)
	}
	n := copy(s.held, s.held[k:])
	clear(s.held[n:])
	s.held = s.held[:n]
	s.base = upTo
	return msgs, bytes
}

// count returns the messages and payload bytes held.
func (s *stream) count() (msgs, bytes int) {
	for _, m := range s.held {
		if m != nil {
			msgs++
			bytes += len(m.Payload)
		}
	}
	return msgs, bytes
}

// viewState is what a node keeps of one view: the members, one stream per
// sender (indexed by position in the view), the newest stability vector
// and a summary of the deliveries.
type viewState struct {
	epoch   uint64
	members []core.NodeID
	pos     map[core.NodeID]int
	me      int
	streams []stream
	stable  []uint64
	count   uint64 // messages delivered in this view
	digest  uint64 // sum of MessageHash over them
}

func newViewState(epoch uint64, members []core.NodeID, self core.NodeID) *viewState {
	vs := &viewState{
		epoch:   epoch,
		members: members,
		pos:     make(map[core.NodeID]int, len(members)),
		me:      -1,
		streams: make([]stream, len(members)),
		stable:  make([]uint64, len(members)),
	}
	for i, id := range members {
		vs.pos[id] = i
		if id == self {
			vs.me = i
		}
	}
	return vs
}

// delivered returns the delivered vector.
func (vs *viewState) delivered() []uint64 {
	v := make([]uint64, len(vs.streams))
	for i := range vs.streams {
		v[i] = vs.streams[i].delivered
	}
	return v
}

// haves returns the held (contiguous) vector.
func (vs *viewState) haves() []uint64 {
	v := make([]uint64, len(vs.streams))
	for i := range vs.streams {
		v[i] = vs.streams[i].have
	}
	return v
}

// MessageHash is the hash of one message that [ViewChanged.Digest] sums:
// 64-bit FNV-1a over the sender (4 bytes, little-endian), the sequence
// number (8 bytes, little-endian) and the payload. A sum is independent of
// the order in which different senders' messages were delivered.
func MessageHash(sender core.NodeID, seq uint64, payload []byte) uint64 {
	h := fnv.New64a()
	var b [12]byte
	binary.LittleEndian.PutUint32(b[:4], uint32(sender))
	binary.LittleEndian.PutUint64(b[4:], seq)
	h.Write(b[:])
	h.Write(payload)
	return h.Sum64()
}
