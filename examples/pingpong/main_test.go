package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// TestPingPong bounces messages of several sizes (the empty one included)
// between two ranks of an in-process job; a third rank idles.
func TestPingPong(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss, err := comm.Local(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 1, 8, 4096, 1 << 20} {
		errs := make([]error, len(ss))
		var lat time.Duration
		var wg sync.WaitGroup
		for r, s := range ss {
			wg.Go(func() {
				d, err := PingPong(ctx, s.World(), size, 20)
				errs[r] = err
				if r == 0 {
					lat = d
				}
			})
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("size %d rank %d: %v", size, r, err)
			}
		}
		if lat <= 0 {
			t.Fatalf("size %d: latency %v", size, lat)
		}
	}
	for _, s := range ss {
		s.Finalize(ctx)
	}
}

func TestParseSizes(t *testing.T) {
	if got, err := parseSizes("0, 8,1048576"); err != nil || len(got) != 3 || got[2] != 1<<20 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", "8,,9"} {
		if _, err := parseSizes(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
