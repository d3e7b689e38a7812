package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// streamLog collects a launch stream's events for a test.
type streamLog struct {
	mu     sync.Mutex
	out    []string
	exits  map[int]string // process → its exit's signal, or "exit N"
	change chan struct{}  // a value after every event
}

func (s *streamLog) add(ev Event) {
	s.mu.Lock()
	switch {
	case ev.Exited && ev.Signal != "":
		s.exits[ev.Rank] = ev.Signal
	case ev.Exited:
		s.exits[ev.Rank] = fmt.Sprintf("exit %d", ev.Code)
	case ev.Out != "":
		s.out = append(s.out, ev.Out)
	}
	s.mu.Unlock()
	select {
	case s.change <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds of the events, for at most the test's
// context.
func (s *streamLog) waitFor(t *testing.T, ctx context.Context, what string, cond func(out []string, exits map[int]string) bool) {
	t.Helper()
	for {
		s.mu.Lock()
		ok := cond(s.out, s.exits)
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.change:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("never %s; output %q, exits %v", what, s.out, s.exits)
		}
	}
}

// pidOf returns the pid of process p of the caller's only job, from ps.
func pidOf(t *testing.T, ctx context.Context, c *Client, p int) int {
	t.Helper()
	jobs, err := c.PS(ctx)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("ps: %v %v", jobs, err)
	}
	for _, pi := range jobs[0].Ranks {
		if pi.Rank == p && pi.Running {
			return pi.PID
		}
	}
	t.Fatalf("process %d is not running: %+v", p, jobs[0].Ranks)
	return 0
}

// A running job takes one more process from its submitter once a slot of
// its reservation is free: the process runs the launch's program with the
// launch's arguments and environment and its own variables, and its
// output and exit come on the launch's stream. Refused: before the
// launch, with every slot taken, a process number the job has, a token
// the caller does not hold (another submitter's, or none), and once the
// job ended.
func TestSpawnOneMoreProcess(t *testing.T) {
	r := startDaemon(t, func(c *Config) { c.Allowed = []string{"alice", "bob"} })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := NewClient(r.creds("alice"), "d1", r.addr)
	defer alice.Close()
	bob := NewClient(r.creds("bob"), "d1", r.addr)
	defer bob.Close()
	tok, err := alice.Reserve(ctx, "j", 2)
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"up $RANK of $JOBWIDE $1\"\nexec sleep 60\n"
	if err := alice.Stage(ctx, tok.Token, fileOf("p", []byte(script), true), strings.NewReader(script)); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, alice.Spawn(ctx, tok.Token, LaunchRank{Rank: 2}), "not launched")

	s := &streamLog{exits: map[int]string{}, change: make(chan struct{}, 1)}
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- alice.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Args: []string{"arg"}, Env: []string{"JOBWIDE=w"},
			Ranks: []LaunchRank{{Rank: 0, Env: []string{"RANK=0"}}, {Rank: 1, Env: []string{"RANK=1"}}}}, 10*time.Second, s.add)
	}()
	s.waitFor(t, ctx, "both processes up", func(out []string, _ map[int]string) bool { return len(out) == 2 })

	wantRefused(t, alice.Spawn(ctx, tok.Token, LaunchRank{Rank: 2, Env: []string{"RANK=2"}}), "2 of the job's processes run here, the 2 its reservation holds")
	wantRefused(t, bob.Spawn(ctx, tok.Token, LaunchRank{Rank: 2}), "unknown")
	wantRefused(t, alice.Spawn(ctx, "no-such-token", LaunchRank{Rank: 2}), "unknown")

	if err := syscall.Kill(pidOf(t, ctx, alice, 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, ctx, "process 1 killed", func(_ []string, exits map[int]string) bool { return exits[1] == "SIGKILL" })
	wantRefused(t, alice.Spawn(ctx, tok.Token, LaunchRank{Rank: 1}), "process 1 is the job's already")
	wantRefused(t, alice.Spawn(ctx, tok.Token, LaunchRank{Rank: 2, Env: []string{"BAD"}}), "not NAME=value")
	if err := alice.Spawn(ctx, tok.Token, LaunchRank{Rank: 2, Env: []string{"RANK=2"}}); err != nil {
		t.Fatalf("one more process in the slot process 1 freed: %v", err)
	}
	s.waitFor(t, ctx, "process 2 up", func(out []string, _ map[int]string) bool {
		for _, l := range out {
			if l == "up 2 of w arg" {
				return true
			}
		}
		return false
	})
	for _, p := range []int{0, 2} {
		if err := syscall.Kill(pidOf(t, ctx, alice, p), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-streamErr; err != nil {
		t.Fatalf("the stream: %v", err)
	}
	s.mu.Lock()
	if len(s.exits) != 3 {
		t.Errorf("exits %v, want processes 0, 1 and 2's", s.exits)
	}
	s.mu.Unlock()
	wantRefused(t, alice.Spawn(ctx, tok.Token, LaunchRank{Rank: 3}), "the job ended (finished)")
	wantRefused(t, bob.Spawn(ctx, tok.Token, LaunchRank{Rank: 3}), "unknown")
	if logs := r.log.String(); !strings.Contains(logs, "spawn refused") || !strings.Contains(logs, "started one more process") {
		t.Errorf("the log does not tell the requests:\n%s", logs)
	}
}

// wantRefused fails the test unless err is the daemon's refusal
// (ErrRefused) saying want.
func wantRefused(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want a refusal saying %q", err, want)
	}
}
