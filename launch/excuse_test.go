package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A rank excused before it registered: the others get the table once
// each of them registered, with "" for it; Missing no longer lists it;
// its registration is refused, before the table and after, saying why;
// excusing a registered rank, an out-of-range one or any after the table
// went out does nothing.
func TestRendezvousExcuse(t *testing.T) {
	rz := newTestRendezvous(t, 4)
	if !rz.Excuse(1) {
		t.Fatal("Excuse(1) before any registration = false, want true")
	}
	if rz.Excuse(1) || rz.Excuse(-1) || rz.Excuse(4) {
		t.Error("Excuse of an excused or out-of-range rank = true, want false")
	}
	if got := rz.Missing(); !slices.Equal(got, []int{0, 2, 3}) {
		t.Errorf("Missing = %v, want [0 2 3] (1 is excused)", got)
	}
	ctx := context.Background()
	early := registerAll(ctx, rz, []int{1})[0]
	if !errors.Is(early.err, ErrRendezvous) || !strings.Contains(early.err.Error(), "taken for gone before it registered") {
		t.Errorf("an excused rank registering: %v", early.err)
	}
	// Ranks 0 and 2 register (blocking until the table), then 3 is
	// excused: the table goes out at the excuse.
	done := make(chan []regResult, 1)
	go func() { done <- registerAll(ctx, rz, []int{0, 2}) }()
	for {
		if got, _ := rz.Registered(); len(got) == 2 {
			break
		}
		select {
		case <-rz.notify:
		case <-rz.Done():
			t.Fatal("the rendezvous ended with ranks 0 and 2 only")
		}
	}
	if rz.Excuse(0) {
		t.Error("Excuse of a registered rank = true, want false")
	}
	if !rz.Excuse(3) {
		t.Fatal("Excuse(3) = false, want true")
	}
	res := <-done
	want := []string{"127.0.0.1:5000", "", "127.0.0.1:5002", ""}
	for i, x := range res {
		if x.err != nil {
			t.Fatalf("rank %d: %v", []int{0, 2}[i], x.err)
		}
		if !slices.Equal(x.reg.Addrs, want) {
			t.Fatalf("table %q, want %q", x.reg.Addrs, want)
		}
		defer x.reg.Close()
	}
	if got := rz.Excused(); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("Excused = %v, want [1 3]", got)
	}
	if rz.Excuse(3) {
		t.Error("Excuse after the table went out = true, want false")
	}
	late := registerAll(ctx, rz, []int{1})[0]
	if !errors.Is(late.err, ErrRendezvous) || !strings.Contains(late.err.Error(), "registered after the rendezvous completed") {
		t.Errorf("an excused rank registering after the table: %v", late.err)
	}
}

// A rendezvous whose every rank is excused sends no table: nobody
// registered to take it.
func TestRendezvousExcuseAll(t *testing.T) {
	rz := newTestRendezvous(t, 2)
	rz.Excuse(0)
	rz.Excuse(1)
	select {
	case <-rz.Done():
		t.Fatal("a rendezvous of excused ranks only completed")
	default:
	}
}

// With spares or StartWithout, a process that dies before registering
// does not fail the start: the others get the table (and run), and the
// job's error names that process only, unregistered, with its own exit
// code.
func TestJobStartWithoutAnEarlyDeath(t *testing.T) {
	for _, cfg := range []Config{{N: 3, Spares: 1}, {N: 4, StartWithout: true}} {
		cfg.Args = []string{"-early-rank", "1"}
		t.Run(fmt.Sprintf("spares=%d", cfg.Spares), func(t *testing.T) { checkStartWithout(t, cfg) })
	}
}

func checkStartWithout(t *testing.T, cfg Config) {
	exits, err, out, errOut := run(t, context.Background(), cfg)
	var fe *FailedError
	if !errors.As(err, &fe) || fe.Cause != nil || len(fe.Failed) != 1 || fe.Failed[0].Rank != 1 {
		t.Fatalf("got %v, want a FailedError of process 1 alone, no cause\nstderr:\n%s", err, errOut)
	}
	if exits[1].Registered || exits[1].Code != 3 {
		t.Errorf("process 1: %+v, want unregistered with exit code 3", exits[1])
	}
	for _, p := range []int{0, 2, 3} {
		if !exits[p].OK() || !exits[p].Registered || !strings.Contains(out, fmt.Sprintf("rank %d of 4 ", p)) {
			t.Errorf("process %d: %+v, want registered with status 0\nstdout:\n%s", p, exits[p], out)
		}
	}
}
