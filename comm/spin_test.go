package comm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseSpin(t *testing.T) {
	for _, c := range []struct {
		v    string
		size int
		want time.Duration
		bad  bool
	}{
		{"", 4, 0, false},
		{"off", 4, 0, false},
		{"0", 4, 0, false},
		{"20us", 4, 20 * time.Microsecond, false},
		{"auto", max(1, runtime.NumCPU()/2), map[bool]time.Duration{true: autoSpin}[runtime.NumCPU() >= 2], false},
		{"auto", runtime.NumCPU()/2 + 1, 0, false}, // fewer than two cores per rank: off
		{"-1us", 4, 0, true},
		{"1s", 4, 0, true},
		{"fast", 4, 0, true},
	} {
		d, err := parseSpin(c.v, c.size)
		if c.bad != (err != nil) || d != c.want || (err != nil && !errors.Is(err, ErrBadArg)) {
			t.Errorf("parseSpin(%q, %d) = %v, %v; want %v, error %v", c.v, c.size, d, err, c.want, c.bad)
		}
	}
}

// TestSpinKeepsSemantics: with polling on, a ping-pong still delivers every
// message in order, a receive that nothing matches still honours its
// context, and SetSpin refuses bad values.
func TestSpinKeepsSemantics(t *testing.T) {
	ss := tcpJob(t, 2)
	for _, s := range ss {
		if err := s.SetSpin(50 * time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss[0].SetSpin(time.Second); !errors.Is(err, ErrBadArg) {
		t.Fatalf("SetSpin(1s) = %v, want ErrBadArg", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w0, w1 := ss[0].World(), ss[1].World()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 8)
		for range 200 {
			if _, err := w1.Recv(ctx, buf, 0, 1); err != nil {
				done <- err
				return
			}
			if err := w1.Send(ctx, buf, 0, 1); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range 200 {
		out, in := []byte(fmt.Sprintf("msg%05d", i)), make([]byte, 8)
		if err := w0.Send(ctx, out, 1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := w0.Recv(ctx, in, 1, 1); err != nil {
			t.Fatal(err)
		}
		if string(in) != string(out) {
			t.Fatalf("round trip %d: got %q, want %q", i, in, out)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	if _, err := w0.Recv(short, make([]byte, 8), 1, 99); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unmatched Recv with polling on = %v, want the deadline", err)
	}
}

// The polling window stretches after a wait whose message came soon after
// it parked (the peer's wake-up outlasted the window), to twice the whole
// wait and at most maxPollWindow; a message that came much later (a peer
// computing) changes nothing; each wait that polls its message in time
// shrinks the window by a sixteenth, down to the polling time and no
// further. Without a polling time nothing is stretched.
func TestPollWindowStretches(t *testing.T) {
	s := &Session{progTime: 50 * time.Microsecond, prog: noProgress{}}
	if got := s.pollWindow(); got != 50*time.Microsecond {
		t.Fatalf("window %v, want the polling time 50µs", got)
	}
	s.cameLate(70 * time.Microsecond) // a slow wake-up: 50 µs polled, 70 µs more
	if got := s.pollWindow(); got != 240*time.Microsecond {
		t.Fatalf("after a reply 70µs late: window %v, want 2×(50+70)µs = 240µs", got)
	}
	s.cameLate(200 * time.Microsecond)
	if got := s.pollWindow(); got != maxPollWindow {
		t.Fatalf("after a reply 200µs late: window %v, want the bound %v", got, maxPollWindow)
	}
	s.cameLate(time.Second) // a peer that computed: no stretch, no shrink
	if got := s.pollWindow(); got != maxPollWindow {
		t.Fatalf("after a reply 1s late: window %v, want it unchanged (%v)", got, maxPollWindow)
	}
	win := s.pollWindow()
	for i := 0; i < 200; i++ {
		s.polledInTime(win)
		next := s.pollWindow()
		if next > win || next < s.progTime {
			t.Fatalf("shrink %d: %v after %v (polling time %v)", i, next, win, s.progTime)
		}
		win = next
	}
	if win != s.progTime {
		t.Fatalf("after 200 waits polled in time: window %v, want the polling time %v", win, s.progTime)
	}
	var off Session
	if !off.parkClock().IsZero() {
		t.Fatal("a session that polls no transport timed its park")
	}
}

type noProgress struct{}

func (noProgress) PollUntil(*atomic.Bool, time.Duration) bool { return false }
