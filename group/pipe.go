package group

import "sync"

// pipe is an unbounded, ordered queue in front of a channel: push never
// blocks the node's loop, and the reader gets every value in order. Closing
// it closes the channel (values not yet read are dropped).
type pipe[T any] struct {
	mu   sync.Mutex
	q    []T
	wake chan struct{}
	done chan struct{}
	once sync.Once
	out  chan T
}

func newPipe[T any]() *pipe[T] {
	p := &pipe[T]{wake: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan T)}
	go p.pump()
	return p
}

func (p *pipe[T]) push(v T) {
	p.mu.Lock()
	p.q = append(p.q, v)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pipe[T]) close() { p.once.Do(func() { close(p.done) }) }

func (p *pipe[T]) pump() {
	defer close(p.out)
	for {
		p.mu.Lock()
		if len(p.q) == 0 {
			p.mu.Unlock()
			select {
			case <-p.wake:
				continue
			case <-p.done:
				return
			}
		}
		v := p.q[0]
		var zero T
		p.q[0] = zero
		p.q = p.q[1:]
		p.mu.Unlock()
		select {
		case p.out <- v:
		case <-p.done:
			return
		}
	}
}
