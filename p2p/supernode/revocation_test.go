package supernode

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A supernode watching the CA's revocation list refuses a revoked daemon
// at the handshake, and one revoked after its connection was made on its
// next request, naming it in its log; a daemon not revoked registers.
func TestServeRefusesRevoked(t *testing.T) {
	dir := t.TempDir()
	if err := ca.Init(dir, "cluster"); err != nil {
		t.Fatal(err)
	}
	load := func(n string) *ca.Credentials {
		if err := ca.Issue(dir, dir, n); err != nil {
			t.Fatal(err)
		}
		c, err := ca.Load(filepath.Join(dir, "ca.crt"), dir, n)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sn, good, mallory, trudy := load("127.0.0.1"), load("good"), load("mallory"), load("trudy")
	if _, err := ca.Revoke(dir, "mallory"); err != nil {
		t.Fatal(err)
	}
	log := &syncLog{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	if err := sn.WatchRevocations("", logger); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ready := make(chan string, 1)
	go Serve(ctx, Config{Listen: "127.0.0.1:0", Creds: sn, Logger: logger, Ready: func(a string) { ready <- a }})
	addr := <-ready

	if err := NewClient(good, "", addr).Register(ctx, "10.0.0.1:7950"); err != nil {
		t.Errorf("a daemon not revoked: %v", err)
	}
	if err := NewClient(mallory, "", addr).Register(ctx, "10.0.0.2:7950"); err == nil {
		t.Error("a revoked daemon registered")
	}
	tc := NewClient(trudy, "", addr)
	if err := tc.Register(ctx, "10.0.0.3:7950"); err != nil {
		t.Fatalf("trudy before its revocation: %v", err)
	}
	if _, err := ca.Revoke(dir, "trudy"); err != nil {
		t.Fatal(err)
	}
	err := tc.Register(ctx, "10.0.0.3:7950")
	if err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("trudy after its revocation: %v, want a refusal saying revoked", err)
	}
	reg, err := NewClient(good, "", addr).Peers(ctx)
	if err != nil || len(reg) != 2 || reg[0].Name != "good" || reg[1].Name != "trudy" {
		t.Errorf("peers %+v, %v; want good and trudy's first registration", reg, err)
	}
	for _, want := range []string{`certificate revoked: \"mallory\"`, "request refused\" peer=trudy"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not name %s:\n%s", want, log.String())
		}
	}
}
