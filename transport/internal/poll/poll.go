// Package poll waits for a condition that nothing signals, as the
// transports' Flush does for acknowledgements and queues.
package poll

import (
	"context"
	"time"
)

// Until calls done at once, then every interval, until it reports true
// (Until returns nil), ctx ends (ctx's error) or closed is closed
// (closedErr). The first call costs no timer, so a condition that
// already holds returns without one.
func Until(ctx context.Context, closed <-chan struct{}, closedErr error, every time.Duration, done func() bool) error {
	var tick *time.Ticker
	for !done() {
		if tick == nil {
			tick = time.NewTicker(every)
			defer tick.Stop()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			return closedErr
		}
	}
	return nil
}
