package sim

import (
	"time"

	"github.com/cohort-mp/cohort/core"
)

// evKind says what an event does when it reaches the head of the queue.
type evKind uint8

const (
	evStart   evKind = iota // start node's machine
	evDeliver               // deliver payload (a core.Msg) from -> node
	evArrive                // a message reaches node's CPU queue (serial processing)
	evTimer                 // fire payload (a core.Timer) on node
	evFunc                  // run payload (a func()) — faults, network internals
)

// event is one entry of the queue. Events are ordered by (at, seq); seq is
// unique and increasing, so the order is total and reproducible.
type event struct {
	at      time.Duration
	seq     uint64
	kind    evKind
	node    core.NodeID
	from    core.NodeID
	inc     uint32 // incarnation of node the event belongs to
	tid     core.TimerID
	payload any
}

func (a *event) less(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// queue is a binary min-heap of events held by value.
type queue struct{ ev []event }

func (q *queue) len() int { return len(q.ev) }

func (q *queue) push(e event) {
	q.ev = append(q.ev, e)
	i := len(q.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.ev[i].less(&q.ev[p]) {
			break
		}
		q.ev[i], q.ev[p] = q.ev[p], q.ev[i]
		i = p
	}
}

func (q *queue) pop() event {
	top := q.ev[0]
	last := len(q.ev) - 1
	q.ev[0] = q.ev[last]
	q.ev[last] = event{}
	q.ev = q.ev[:last]
	i, n := 0, last
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.ev[r].less(&q.ev[l]) {
			m = r
		}
		if !q.ev[m].less(&q.ev[i]) {
			break
		}
		q.ev[i], q.ev[m] = q.ev[m], q.ev[i]
		i = m
	}
	return top
}

func (q *queue) peek() *event { return &q.ev[0] }
