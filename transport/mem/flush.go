package mem

import (
	"context"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/internal/poll"
)

// flushPoll is how often Flush looks at the links' backlogs again.
const flushPoll = time.Millisecond

// Flush waits until every frame that Send accepted before the call has
// been handed to its receiver's handler, or dropped (its receiver is gone,
// or the peer was removed), as transport/tcp's Flush waits for its peers'
// acknowledgements: a process calls it before it tells others that it is
// done, so that what it sent first is there before the news. It returns
// ctx's error if ctx ends first, transport.ErrClosed after Close.
func (e *Endpoint) Flush(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return transport.ErrClosed
	}
	links := make([]*link, 0, len(e.links))
	for _, l := range e.links {
		links = append(links, l)
	}
	e.mu.Unlock()
	return poll.Until(ctx, e.done, transport.ErrClosed, flushPoll, func() bool {
		links = slices.DeleteFunc(links, func(l *link) bool {
			select {
			case <-l.stop:
				return true // removed: its frames are dropped
			default:
			}
			return l.backlog.Load() == 0
		})
		return len(links) == 0
	})
}
