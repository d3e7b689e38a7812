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
