package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Spike is a window of extra latency: every message sent at a time t with
// From ≤ t < Until, between the given nodes, takes Extra longer. Between
// means: with A and B both nil, every message; with B nil, every message
// that A sends or receives; otherwise every message from A to B or from B
// to A.
type Spike struct {
	Extra       time.Duration
	From, Until time.Duration
	A, B        []core.NodeID
}

func (s Spike) covers(from, to core.NodeID, t time.Duration) bool {
	if t < s.From || t >= s.Until {
		return false
	}
	switch {
	case s.A == nil && s.B == nil:
		return true
	case s.B == nil:
		return hasNode(s.A, from) || hasNode(s.A, to)
	}
	return hasNode(s.A, from) && hasNode(s.B, to) || hasNode(s.B, from) && hasNode(s.A, to)
}

func hasNode(sorted []core.NodeID, id core.NodeID) bool {
	_, ok := slices.BinarySearch(sorted, id)
	return ok
}

func (s Spike) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "+%v in [%v,%v)", s.Extra, s.From, s.Until)
	switch {
	case s.A == nil && s.B == nil:
	case s.B == nil:
		fmt.Fprintf(&b, " around %s", nodeSet(s.A))
	default:
		fmt.Fprintf(&b, " between %s and %s", nodeSet(s.A), nodeSet(s.B))
	}
	return b.String()
}

// spiky adds spikes to a network. The world keeps pairs FIFO around it (a
// message sent after a spike cannot overtake one slowed by it).
type spiky struct {
	inner  Network
	spikes []Spike
}

// WithSpikes returns n slowed down by the given spikes. If n routes hop by
// hop (a [*Graph]), a slowed message enters the network Extra late, and
// later messages of the same pair wait for it, so pairs stay FIFO.
func WithSpikes(n Network, spikes ...Spike) Network {
	s := &spiky{inner: n}
	for _, sp := range spikes {
		s.add(sp)
	}
	if r, ok := n.(router); ok {
		return &spikyRouter{spiky: s, r: r, last: map[uint64]time.Duration{}}
	}
	return s
}

func (s *spiky) add(sp Spike) {
	sp.A = sortedNodes(sp.A)
	sp.B = sortedNodes(sp.B)
	s.spikes = append(s.spikes, sp)
}

func sortedNodes(ids []core.NodeID) []core.NodeID {
	if ids == nil {
		return nil
	}
	c := slices.Clone(ids)
	slices.Sort(c)
	return c
}

// extra is the sum of the spikes covering a message sent at t.
func (s *spiky) extra(from, to core.NodeID, t time.Duration) time.Duration {
	var d time.Duration
	for _, sp := range s.spikes {
		if sp.covers(from, to, t) {
			d += sp.Extra
		}
	}
	return d
}

// Transit implements Network.
func (s *spiky) Transit(from, to core.NodeID, size int, now time.Duration, rng *rand.Rand) (time.Duration, bool) {
	d, ok := s.inner.Transit(from, to, size, now, rng)
	if !ok {
		return 0, false
	}
	return d + s.extra(from, to, now), true
}

func (s *spiky) String() string {
	parts := make([]string, len(s.spikes))
	for i, sp := range s.spikes {
		parts[i] = sp.String()
	}
	return fmt.Sprintf("spikes(%v; %s)", s.inner, strings.Join(parts, "; "))
}

type spikyRouter struct {
	*spiky
	r    router
	last map[uint64]time.Duration // pair -> latest injection, while it may hold back a later message
}

func (s *spikyRouter) route(w *World, from, to core.NodeID, m core.Msg, size int, depart time.Duration) {
	inject := depart + s.extra(from, to, depart)
	k := pairKey(from, to)
	if last, ok := s.last[k]; ok {
		inject = max(inject, last)
	}
	if inject > depart {
		s.last[k] = inject
	} else {
		delete(s.last, k)
	}
	s.r.route(w, from, to, m, size, inject)
}
