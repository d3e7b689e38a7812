package reserve

import (
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	now := time.Unix(0, 0)
	g, err := New(Config{Jobs: 2, ProcsPerJob: 2, Allowed: []string{"alice", "bob"}, Hold: 10 * time.Second}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reserve("mallory", "j0", 1); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("not allowed: %v", err)
	}
	if _, err := g.Reserve("alice", "j1", 3); !errors.Is(err, ErrTooMany) {
		t.Errorf("3 processes with P = 2: %v", err)
	}
	a, err := g.Reserve("alice", "j1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reserve("alice", "j1", 1); !errors.Is(err, ErrBusy) {
		t.Errorf("a second token for one job: %v", err)
	}
	b, err := g.Reserve("bob", "j2", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reserve("bob", "j3", 1); !errors.Is(err, ErrBusy) {
		t.Errorf("a third job with J = 2: %v", err)
	}
	// Only the submitter confirms or releases its token.
	if _, err := g.Confirm("bob", a.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("bob confirming alice's token: %v", err)
	}
	if _, err := g.Confirm("alice", a.ID); err != nil {
		t.Fatal(err)
	}
	// Unconfirmed tokens expire; confirmed ones stay.
	now = now.Add(11 * time.Second)
	if toks := g.Tokens(); len(toks) != 1 || toks[0].ID != a.ID {
		t.Fatalf("after the hold: %+v, want alice's confirmed token only", toks)
	}
	if _, err := g.Confirm("bob", b.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("confirming an expired token: %v", err)
	}
	if _, err := g.Reserve("bob", "j3", 1); err != nil {
		t.Errorf("a freed job slot: %v", err)
	}
	if err := g.Release("alice", a.ID); err != nil {
		t.Fatal(err)
	}
	if err := g.Release("alice", a.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("releasing twice: %v", err)
	}
	if _, err := New(Config{}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("zero config: %v", err)
	}
}

// An empty list allows no one unless every member is explicitly allowed;
// job names are per submitter.
func TestAllowAllAndJobNames(t *testing.T) {
	g, err := New(Config{Jobs: 2, ProcsPerJob: 1, Hold: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reserve("alice", "j", 1); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("an empty list: %v, want ErrNotAllowed", err)
	}
	g, _ = New(Config{Jobs: 2, ProcsPerJob: 1, AllowAll: true, Hold: time.Second}, nil)
	if _, err := g.Reserve("alice", "j", 1); err != nil {
		t.Fatalf("allow all: %v", err)
	}
	if _, err := g.Reserve("bob", "j", 1); err != nil {
		t.Errorf("bob's job named like alice's: %v", err)
	}
}
