package group

import (
	"fmt"
	"sync"
	"time"
)

// SuspicionKind says what a [Suspicion] reports.
type SuspicionKind uint8

// The kinds of suspicion.
const (
	// Suspected: this node's detector suspects Node (it may be slow).
	Suspected SuspicionKind = iota + 1
	// Cleared: a suspicion of Node is withdrawn (it was heard from).
	Cleared
	// Declared: the detector declares Node failed; the membership will
	// exclude it.
	Declared
)

func (k SuspicionKind) String() string {
	switch k {
	case Suspected:
		return "suspected"
	case Cleared:
		return "cleared"
	case Declared:
		return "declared failed"
	}
	return fmt.Sprintf("suspicion(%d)", uint8(k))
}

// Suspicion is what this node's failure detector says about another node.
// Suspicions are local opinions: only views are agreed on.
type Suspicion struct {
	Node NodeID
	Kind SuspicionKind
	At   time.Time
}

// Delivery is a multicast delivered to this node (Config.Multicast): the
// Seq-th message Sender multicast in the view numbered Epoch. A sender's
// messages arrive in Seq order, each once; every member that moves from a
// view to the next delivered the same messages in the first.
type Delivery struct {
	Epoch   uint64
	Sender  NodeID
	Seq     uint64
	Payload []byte
}

// A Delegate is told of the node's views, suspicions and deliveries
// (Config.Delegate), in the order they happen, by one goroutine of the
// node's: a method is not called before the previous call returned. It is
// the callback form of [Group.Views], [Group.Suspicions] and
// [Group.Deliveries], which work beside it.
//
// The slow reader. Events wait for the Delegate (and for each channel's
// reader) in a queue of Config.EventBuffer entries. When the queue is
// full, the oldest view or suspicion in it is dropped for the new event
// (counted in [Stats]; a view's Prev then shows the gap, and [Group.View]
// is always the newest); deliveries are never dropped: with the queue
// full of them, the node's loop waits for the reader, so a reader that
// stays behind for longer than the detector's bound stalls the node,
// which the others then exclude as failed.
type Delegate interface {
	NotifyView(View)
	NotifySuspicion(Suspicion)
	NotifyDelivery(Delivery)
}

// DelegateFuncs is a Delegate of functions; nil ones are skipped.
type DelegateFuncs struct {
	View      func(View)
	Suspicion func(Suspicion)
	Delivery  func(Delivery)
}

// NotifyView calls f.View.
func (f DelegateFuncs) NotifyView(v View) {
	if f.View != nil {
		f.View(v)
	}
}

// NotifySuspicion calls f.Suspicion.
func (f DelegateFuncs) NotifySuspicion(s Suspicion) {
	if f.Suspicion != nil {
		f.Suspicion(s)
	}
}

// NotifyDelivery calls f.Delivery.
func (f DelegateFuncs) NotifyDelivery(d Delivery) {
	if f.Delivery != nil {
		f.Delivery(d)
	}
}

// queue is a bounded, ordered queue drained by one goroutine (into a
// channel, or into a Delegate). When full, push drops the oldest value
// that may be dropped, or, if none may, waits for room.
type queue[T any] struct {
	mu        sync.Mutex
	q         []T
	limit     int
	droppable func(T) bool
	dropped   func(T) // counts a drop, under mu
	wake      chan struct{}
	room      *sync.Cond
	done      chan struct{}
	once      sync.Once
	closed    bool
}

func newQueue[T any](limit int, droppable func(T) bool, dropped func(T)) *queue[T] {
	q := &queue[T]{limit: limit, droppable: droppable, dropped: dropped, wake: make(chan struct{}, 1), done: make(chan struct{})}
	q.room = sync.NewCond(&q.mu)
	return q
}

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	for !q.closed && len(q.q) >= q.limit {
		i := -1
		for j, x := range q.q {
			if q.droppable(x) {
				i = j
				break
			}
		}
		if i < 0 {
			q.room.Wait()
			continue
		}
		q.dropped(q.q[i])
		q.q = append(q.q[:i], q.q[i+1:]...)
	}
	if !q.closed {
		q.q = append(q.q, v)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop waits for the next value; ok is false once the queue is closed.
func (q *queue[T]) pop() (v T, ok bool) {
	for {
		q.mu.Lock()
		if len(q.q) > 0 {
			v = q.q[0]
			var zero T
			q.q[0] = zero
			q.q = q.q[1:]
			q.room.Broadcast()
			q.mu.Unlock()
			return v, true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.done:
			return v, false
		}
	}
}

// close stops the queue: values not yet taken are dropped, and a push
// waiting for room returns.
func (q *queue[T]) close() {
	q.once.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.q = nil
		q.room.Broadcast()
		q.mu.Unlock()
		close(q.done)
	})
}

// toChan drains q into a new channel, closed with q.
func toChan[T any](q *queue[T]) <-chan T {
	out := make(chan T)
	go func() {
		defer close(out)
		for {
			v, ok := q.pop()
			if !ok {
				return
			}
			select {
			case out <- v:
			case <-q.done:
				return
			}
		}
	}()
	return out
}
