package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	errClosed := errors.New("closed")
	calls := 0
	if err := Until(context.Background(), nil, errClosed, time.Millisecond, func() bool { calls++; return calls == 3 }); err != nil || calls != 3 {
		t.Fatalf("Until: %v after %d calls, want nil after 3", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Until(ctx, nil, errClosed, time.Millisecond, func() bool { return false }); err != context.Canceled {
		t.Fatalf("Until with its context done: %v", err)
	}
	closed := make(chan struct{})
	close(closed)
	if err := Until(context.Background(), closed, errClosed, time.Millisecond, func() bool { return false }); err != errClosed {
		t.Fatalf("Until once closed: %v", err)
	}
	if err := Until(ctx, closed, errClosed, time.Millisecond, func() bool { return true }); err != nil {
		t.Fatalf("Until with its condition true from the start: %v", err)
	}
}
