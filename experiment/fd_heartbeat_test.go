package experiment

import (
	"math"
	"testing"
	"time"
)

// TestFDHeartbeatTiny runs a small fd-heartbeat (Phoenix §6.2, Fig. 2) with
// one and two workers: the outputs are identical.
func TestFDHeartbeatTiny(t *testing.T) {
	args := []string{"--max-n", "16", "--duration", "120s", "--seeds", "1"}
	one, checks := runTiny(t, "fd-heartbeat", 1, args...)
	mustPass(t, checks)
	two, _ := runTiny(t, "fd-heartbeat", 2, args...)
	sameFiles(t, one, two, "heartbeat-vs-n.csv", "app-traffic.csv", "report.md")
}

// TestSuppressionTheory checks the renewal model of heartbeats suppressed
// by application traffic (Phoenix §4.2.3) at its limits.
func TestSuppressionTheory(t *testing.T) {
	if got := suppressionTheory(2, 64, 0, 5*time.Second); got != 2 {
		t.Errorf("no traffic: %v heartbeats, want k = 2", got)
	}
	// x = 1: x/(e−1) ≈ 0.582 per monitor.
	if got := suppressionTheory(2, 64, 63.0/5, 5*time.Second); math.Abs(got-2/(math.E-1)) > 1e-12 {
		t.Errorf("x = 1: %v, want %v", got, 2/(math.E-1))
	}
	if got := suppressionTheory(2, 64, 1e4, 5*time.Second); got > 1e-100 {
		t.Errorf("heavy traffic still sends %v heartbeats", got)
	}
}
