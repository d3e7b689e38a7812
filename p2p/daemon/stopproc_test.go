package daemon

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A malformed stop request is refused with a reason that says what is
// wrong with it.
func TestDecodeStop(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
		err  string
	}{
		{`{"rank":3}`, 3, ""},
		{`{"rank":0}` + "\n", 0, ""},
		{`{}`, 0, "no process number"},
		{`{"rank":-1}`, 0, "process -1, want 0 to"},
		{`{"rank":2000000}`, 0, "process 2000000, want 0 to"},
		{`{"rank":"1"}`, 0, "malformed stop request"},
		{`{"rank":1,"signal":"KILL"}`, 0, "unknown field"},
		{`{"rank":1}{"rank":2}`, 0, "data after the request"},
		{`{"rank":1} x`, 0, "data after the request"},
		{``, 0, "malformed stop request"},
		{`[1]`, 0, "malformed stop request"},
	} {
		sr, err := decodeStop(strings.NewReader(tc.body))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.body, err)
		case tc.err == "" && sr.Rank != tc.want:
			t.Errorf("%q: process %d, want %d", tc.body, sr.Rank, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: got %v, want an error saying %q", tc.body, err, tc.err)
		}
	}
}

// The submitter stops one process of a running job: SIGTERM, and SIGKILL
// for a process that ignores it once the grace period has passed; the
// exits come on the launch stream, the other process runs on. Refused:
// before the launch, a process the job does not have, another
// submitter's token, once the job ended.
func TestStopOneProcess(t *testing.T) {
	r := startDaemon(t, func(c *Config) { c.Allowed, c.ProcsPerJob = []string{"alice", "bob"}, 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := NewClient(r.creds("alice"), "d1", r.addr)
	defer alice.Close()
	bob := NewClient(r.creds("bob"), "d1", r.addr)
	defer bob.Close()
	tok, err := alice.Reserve(ctx, "j", 3)
	if err != nil {
		t.Fatal(err)
	}
	// Process 2 ignores SIGTERM (sleep inherits the ignored signal).
	script := "#!/bin/sh\nif [ \"$RANK\" = 2 ]; then trap '' TERM; fi\necho \"up $RANK\"\nexec sleep 60\n"
	if err := alice.Stage(ctx, tok.Token, fileOf("p", []byte(script), true), strings.NewReader(script)); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, alice.Stop(ctx, tok.Token, 0), "not launched")

	s := &streamLog{exits: map[int]string{}, change: make(chan struct{}, 1)}
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- alice.Launch(ctx, tok.Token, LaunchRequest{Program: "p",
			Ranks: []LaunchRank{{Rank: 0, Env: []string{"RANK=0"}}, {Rank: 1, Env: []string{"RANK=1"}}, {Rank: 2, Env: []string{"RANK=2"}}}}, 10*time.Second, s.add)
	}()
	s.waitFor(t, ctx, "every process up", func(out []string, _ map[int]string) bool { return len(out) == 3 })

	wantRefused(t, alice.Stop(ctx, tok.Token, 7), "process 7 is not the job's here")
	wantRefused(t, bob.Stop(ctx, tok.Token, 1), "unknown")
	if err := alice.Stop(ctx, tok.Token, 1); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, ctx, "process 1 stopped by SIGTERM", func(_ []string, exits map[int]string) bool { return exits[1] == "SIGTERM" })
	if err := alice.Stop(ctx, tok.Token, 1); err != nil {
		t.Errorf("stopping a process that has ended: %v", err)
	}
	if err := alice.Stop(ctx, tok.Token, 2); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, ctx, "process 2 killed after the grace period", func(_ []string, exits map[int]string) bool { return exits[2] == "SIGKILL" })
	s.mu.Lock()
	if _, ended := s.exits[0]; ended {
		t.Errorf("process 0 ended too: %v", s.exits)
	}
	s.mu.Unlock()
	if err := alice.Stop(ctx, tok.Token, 0); err != nil {
		t.Fatal(err)
	}
	if err := <-streamErr; err != nil {
		t.Fatalf("the stream: %v", err)
	}
	wantRefused(t, alice.Stop(ctx, tok.Token, 0), "the job ended")
	if logs := r.log.String(); !strings.Contains(logs, "stop refused") || !strings.Contains(logs, "stopping one process") {
		t.Errorf("the log does not tell the requests:\n%s", logs)
	}
}
