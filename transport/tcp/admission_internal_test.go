package tcp

import (
	"fmt"
	"testing"
	"time"
)

// TestLogLimiter checks the refusal logs' limit: one line per source per
// refusalLogInterval, the next one counting those not logged, and a bound
// on the sources tracked.
func TestLogLimiter(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	if ok, n := l.allow("10.0.0.1", t0); !ok || n != 0 {
		t.Fatalf("first refusal: logged %v, %d unlogged; want logged, 0", ok, n)
	}
	for i := range 3 {
		if ok, _ := l.allow("10.0.0.1", t0.Add(time.Duration(i+1)*time.Second)); ok {
			t.Fatalf("refusal %d within the interval was logged", i+2)
		}
	}
	if ok, _ := l.allow("10.0.0.2", t0.Add(time.Second)); !ok {
		t.Fatal("another source's first refusal was not logged")
	}
	if ok, n := l.allow("10.0.0.1", t0.Add(refusalLogInterval)); !ok || n != 3 {
		t.Fatalf("after the interval: logged %v, %d unlogged; want logged, 3", ok, n)
	}
	for i := range 3 * maxLogSources {
		l.allow(fmt.Sprintf("src-%d", i), t0.Add(refusalLogInterval))
	}
	if n := len(l.sources); n > maxLogSources+1 {
		t.Fatalf("%d sources tracked, bound %d", n, maxLogSources)
	}
}

// TestRefusalBudget checks a listener's budget of refusals in simulated
// time: refusalBurst at once, then one per refusalInterval, the wait for the
// next said exactly, and a budget unused for a while full again but no
// fuller.
func TestRefusalBudget(t *testing.T) {
	var b refusalBudget
	t0 := time.Unix(1000, 0)
	for i := range refusalBurst {
		if d := b.wait(t0); d != 0 {
			t.Fatalf("refusal %d of the burst: wait %v, want 0", i, d)
		}
		b.take(t0)
	}
	if d := b.wait(t0); d != refusalInterval {
		t.Fatalf("after the burst: wait %v, want %v", d, refusalInterval)
	}
	// At the budget's rate, each refusal finds its turn exactly.
	now := t0
	for i := range 3 * refusalRate {
		now = now.Add(b.wait(now))
		if d := b.wait(now); d != 0 {
			t.Fatalf("refusal %d past the burst: wait %v after waiting", i, d)
		}
		b.take(now)
	}
	if got, want := now.Sub(t0), 3*refusalRate*refusalInterval; got != want {
		t.Fatalf("%d refusals past the burst took %v, want %v", 3*refusalRate, got, want)
	}
	// Unused for long, the budget allows a burst again, not more.
	now = now.Add(time.Hour)
	n := 0
	for b.wait(now) == 0 {
		b.take(now)
		n++
	}
	if n != refusalBurst {
		t.Fatalf("after an hour unused: %d refusals at once, want %d", n, refusalBurst)
	}
}

// TestAcceptBacklog checks the accept queue's length: the bound on
// handshakes, at least minBacklog, and the system's without a bound.
func TestAcceptBacklog(t *testing.T) {
	for _, tc := range []struct {
		max, want int
		ok        bool
	}{{512, 512, true}, {4, minBacklog, true}, {0, minBacklog, true}, {-1, 0, false}} {
		if n, ok := acceptBacklog(Config{MaxHandshakes: tc.max}); n != tc.want || ok != tc.ok {
			t.Errorf("MaxHandshakes %d: backlog %d, %v; want %d, %v", tc.max, n, ok, tc.want, tc.ok)
		}
	}
}
