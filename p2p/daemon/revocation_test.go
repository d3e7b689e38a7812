package daemon

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// A daemon refuses a submitter revoked after it started: at the next
// handshake, and on the next request of a connection made before; a
// submitter not revoked is served; the refusal names the submitter.
func TestRevokedSubmitterRefused(t *testing.T) {
	r := startDaemon(t, func(c *Config) { c.Allowed = []string{"alice", "bob"} })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, bob := NewClient(r.creds("alice"), "d1", r.addr), NewClient(r.creds("bob"), "d1", r.addr)
	for _, c := range []*Client{alice, bob} {
		if _, err := c.PS(ctx); err != nil {
			t.Fatalf("before any revocation: %v", err)
		}
	}
	if _, err := ca.Revoke(r.dir, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.PS(ctx); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("alice's kept-alive connection after her revocation: %v, want a refusal saying revoked", err)
	}
	fresh := NewClient(r.creds("alice"), "d1", r.addr)
	if _, err := fresh.PS(ctx); err == nil {
		t.Error("alice's new connection after her revocation was served")
	}
	if _, err := bob.PS(ctx); err != nil {
		t.Errorf("bob, not revoked: %v", err)
	}
	if _, err := NewClient(r.creds("bob"), "d1", r.addr).PS(ctx); err != nil {
		t.Errorf("bob's new connection: %v", err)
	}
	for _, want := range []string{`certificate revoked: \"alice\"`, `"caller":"alice"`} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, r.log.String())
		}
	}
}

// New refuses a revocation list that is missing where named or is not the
// CA's.
func TestNewRefusesBadRevocationList(t *testing.T) {
	r := startDaemon(t, nil)
	other := t.TempDir()
	if err := ca.Init(other, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	c, err := ca.IssueFor(other, other, "x", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.RevokeSerial(other, c.SerialNumber); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(other, ca.CRLFile):    "not signed by the cluster's CA",
		filepath.Join(r.dir, "missing.crl"): "no such file",
	} {
		cfg := r.d.cfg
		cfg.CRL = path
		if _, err := New(cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, ca.ErrCRL) || !strings.Contains(err.Error(), want) {
			t.Errorf("crl = %s: %v, want ErrCRL saying %q", path, err, want)
		}
	}
}
