package model

import (
	"errors"
	"math"
	"testing"
	"time"
)

// Young (1974): τ = √(2CM). Worked example: C = 5 min, M = 24 h gives
// √(2·300·86400) s = 7200 s = 2 h. Daly (2006, Eq. 37) is below it by
// about C when C ≪ M, and is M once C ≥ 2M.
func TestCheckpointIntervals(t *testing.T) {
	y, err := YoungInterval(5*time.Minute, 24*time.Hour)
	if err != nil || y != 2*time.Hour {
		t.Fatalf("Young(5 min, 24 h) = %v, %v; want 2h", y, err)
	}
	d, err := DalyInterval(5*time.Minute, 24*time.Hour)
	// √(2CM)·[1 + ⅓√(C/2M) + ⅑(C/2M)] − C with C/2M = 1/576:
	// 7200·(1 + 1/72 + 1/5184) − 300 = 7001.39 s.
	if err != nil || d.Round(time.Second) != 7001*time.Second {
		t.Fatalf("Daly(5 min, 24 h) = %v, %v; want 7001 s", d, err)
	}
	if d, _ := DalyInterval(3*time.Hour, time.Hour); d != time.Hour {
		t.Fatalf("Daly with C ≥ 2M = %v, want M", d)
	}
	for _, bad := range [][2]time.Duration{{0, time.Hour}, {time.Second, 0}, {-1, time.Hour}} {
		if _, err := YoungInterval(bad[0], bad[1]); !errors.Is(err, ErrParam) {
			t.Errorf("Young%v: %v, want ErrParam", bad, err)
		}
		if _, err := DalyInterval(bad[0], bad[1]); !errors.Is(err, ErrParam) {
			t.Errorf("Daly%v: %v, want ErrParam", bad, err)
		}
	}
}

// The waste is smallest near Young's interval, and the first-order
// formula gives C/(τ+C) + (R + (τ+C)/2)/M.
func TestCheckpointWaste(t *testing.T) {
	c, r, m := 10*time.Second, 30*time.Second, 10*time.Hour
	w, err := CheckpointWaste(990*time.Second, c, r, m)
	want := 10.0/1000 + (30+500)/36000.0
	if err != nil || !approx(w, want) {
		t.Fatalf("waste %v, %v; want %v", w, err, want)
	}
	y, _ := YoungInterval(c, m)
	at := func(d time.Duration) float64 { w, _ := CheckpointWaste(d, c, r, m); return w }
	if !(at(y) < at(y/4) && at(y) < at(4*y)) {
		t.Fatalf("waste at τ/4, τ, 4τ: %v %v %v; want the least at Young's τ", at(y/4), at(y), at(4*y))
	}
	if w, _ := CheckpointWaste(100*time.Hour, c, r, time.Second); w != 1 {
		t.Fatalf("waste with failures far more often than checkpoints: %v, want 1", w)
	}
	if _, err := CheckpointWaste(0, c, r, m); !errors.Is(err, ErrParam) {
		t.Fatalf("interval 0: %v, want ErrParam", err)
	}
}

// The expected time with checkpoints is the work over one minus the
// waste; a job that makes no progress is an error.
func TestCheckpointedTime(t *testing.T) {
	c, r, m := 10*time.Second, 30*time.Second, 10*time.Hour
	got, err := CheckpointedTime(time.Hour, 990*time.Second, c, r, m)
	w := 10.0/1000 + (30+500)/36000.0
	if want := 3600 / (1 - w); err != nil || !approx(got.Seconds(), want) {
		t.Fatalf("CheckpointedTime = %v, %v; want %.3f s", got, err, want)
	}
	if _, err := CheckpointedTime(time.Hour, 100*time.Hour, c, r, time.Second); !errors.Is(err, ErrOverflow) {
		t.Fatalf("no progress: %v, want ErrOverflow", err)
	}
	if _, err := CheckpointedTime(-time.Second, time.Hour, c, r, m); !errors.Is(err, ErrParam) {
		t.Fatalf("negative work: %v, want ErrParam", err)
	}
}

// Figure 10's model: the expected time with replication is the run's
// duration over its probability of success, and replication pays off
// where the unreplicated run fails often.
func TestReplicatedTime(t *testing.T) {
	m := Figure10Model()
	for r := 1; r <= 3; r++ {
		e, run, p, err := m.ReplicatedTime(r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := AmdahlDuration(m.Seq, m.Parallel, m.Processes, r, m.Overhead)
		pf, _ := m.Failure(r)
		if ratio := e.Seconds() * (1 - p) / run.Seconds(); run != want || p != pf || math.Abs(ratio-1) > 1e-9 {
			t.Fatalf("r = %d: %v, %v, %v; want T = %v, P = %v, T/(1−P)", r, e, run, p, want, pf)
		}
	}
	m.Rate = 1 // a host fails within a second or so: every run of 95 s fails
	if _, _, p, err := m.ReplicatedTime(1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("λ = 1/s: P(fail) = %v, %v; want ErrOverflow", p, err)
	}
}
