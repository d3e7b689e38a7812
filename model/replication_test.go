package model

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestAmdahlDuration(t *testing.T) {
	for _, c := range []struct {
		seq      time.Duration
		alpha    float64
		p, r     int
		beta     float64
		wantSecs float64
	}{
		{100 * time.Second, 1, 10, 1, 0, 10},
		{100 * time.Second, 0, 10, 1, 0, 100},
		{100 * time.Second, 0.5, 2, 1, 0, 75},
		{100 * time.Second, 1, 10, 3, 0.5, 20}, // 10 s · (1 + 0.5·2)
	} {
		got, err := AmdahlDuration(c.seq, c.alpha, c.p, c.r, c.beta)
		if err != nil || math.Abs(got.Seconds()-c.wantSecs) > 1e-9 {
			t.Errorf("AmdahlDuration(%v, %v, %d, %d, %v) = %v, %v; want %vs", c.seq, c.alpha, c.p, c.r, c.beta, got, err, c.wantSecs)
		}
	}
	if _, err := AmdahlDuration(time.Second, 1.5, 1, 1, 0); !errors.Is(err, ErrParam) {
		t.Errorf("α = 1.5: err = %v", err)
	}
	if _, err := AmdahlDuration(time.Second, 1, 1, 0, 0); !errors.Is(err, ErrParam) {
		t.Errorf("r = 0: err = %v", err)
	}
}

// TestFigure10 checks the shape the chapter describes for Figure 10 (§4.5,
// 10 processes): the failure probability falls quickly, reaches its
// minimum at r ≈ 7, and rises again towards 1 (the curve is convex there:
// more replication lengthens the run more than it protects it).
func TestFigure10(t *testing.T) {
	m := Figure10Model()
	r, pmin, err := m.BestDegree(40)
	if err != nil {
		t.Fatal(err)
	}
	if r != 7 {
		t.Errorf("minimum at r = %d (%.4f), the chapter's figure has r ≈ 7", r, pmin)
	}
	var prev float64
	for k := 1; k <= 40; k++ {
		p, err := m.Failure(k)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case k > 1 && k <= r && p >= prev:
			t.Errorf("P(%d) = %v not below P(%d) = %v before the minimum", k, p, k-1, prev)
		case k > r && p <= prev:
			t.Errorf("P(%d) = %v not above P(%d) = %v after the minimum", k, p, k-1, prev)
		}
		prev = p
	}
	p1, _ := m.Failure(1)
	p40, _ := m.Failure(40)
	if !(p1 > 5*pmin && p40 > 0.9) {
		t.Errorf("P(1) = %v, P(min) = %v, P(40) = %v: want a deep minimum and a rise towards 1", p1, pmin, p40)
	}
}
