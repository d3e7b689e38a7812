package comm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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
