package ca

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mkCA(t *testing.T, name string, members ...string) (string, map[string]*Credentials) {
	t.Helper()
	dir := t.TempDir()
	if err := Init(dir, name); err != nil {
		t.Fatal(err)
	}
	creds := map[string]*Credentials{}
	for _, m := range members {
		if err := Issue(dir, dir, m); err != nil {
			t.Fatal(err)
		}
		c, err := Load(filepath.Join(dir, "ca.crt"), dir, m)
		if err != nil {
			t.Fatal(err)
		}
		creds[m] = c
	}
	return dir, creds
}

func TestInitIssueFiles(t *testing.T) {
	dir, _ := mkCA(t, "cluster", "daemon1", "10.0.0.7")
	for f, want := range map[string]os.FileMode{"ca.key": 0o600, "daemon1.key": 0o600, "10.0.0.7.key": 0o600, "ca.crt": 0o644} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v, want %v", f, err, st.Mode().Perm(), want)
		}
	}
	if err := Init(dir, "cluster"); !errors.Is(err, ErrExists) {
		t.Errorf("Init over an existing CA: %v", err)
	}
	if err := Issue(dir, dir, "daemon1"); !errors.Is(err, ErrExists) {
		t.Errorf("Issue over existing files: %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", "-x", strings.Repeat("a", 64)} {
		if err := Issue(dir, dir, bad); !errors.Is(err, ErrBadName) {
			t.Errorf("Issue(%q): %v, want ErrBadName", bad, err)
		}
	}
	os.Chmod(filepath.Join(dir, "daemon1.key"), 0o644)
	if _, err := Load(filepath.Join(dir, "ca.crt"), dir, "daemon1"); !errors.Is(err, ErrFiles) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key readable by others: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.crt"), dir, "daemon1"); !errors.Is(err, ErrFiles) {
		t.Errorf("a missing CA file: %v", err)
	}
}

// handshake runs a TLS server with cfg and a client with ccfg; it returns
// the client's name as the server saw it and the server's handshake error
// (nil: accepted).
func handshake(t *testing.T, cfg, ccfg *tls.Config) (string, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		err  error
		name string
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		err = tc.Handshake()
		done <- result{err, PeerName(tc.ConnectionState())}
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), ccfg)
	if err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Read(make([]byte, 1)) // TLS 1.3: the client learns of a refusal on its first read
		c.Close()
	}
	r := <-done
	return r.name, r.err
}

// A daemon accepts a submitter of its CA whose name it allows, and refuses,
// each with a clear reason, one without a certificate, one with a
// certificate of another CA, and one of its CA whose name it does not
// allow.
func TestMutualTLSRefusals(t *testing.T) {
	_, creds := mkCA(t, "cluster", "daemon", "alice", "mallory")
	_, other := mkCA(t, "elsewhere", "alice")
	srv := creds["daemon"].ServerConfig([]string{"alice"})

	if name, err := handshake(t, srv, creds["alice"].ClientConfig("daemon")); err != nil || name != "alice" {
		t.Fatalf("allowed submitter: %v (peer %q)", err, name)
	}
	noCert := creds["alice"].ClientConfig("daemon")
	noCert.Certificates = nil
	if _, err := handshake(t, srv, noCert); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("no certificate: %v, want a refusal naming the certificate", err)
	}
	foreign := other["alice"].ClientConfig("daemon")
	foreign.RootCAs = creds["alice"].Pool // it trusts the daemon, the daemon does not trust it
	if _, err := handshake(t, srv, foreign); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("another CA's certificate: %v, want a refusal", err)
	}
	if _, err := handshake(t, srv, creds["mallory"].ClientConfig("daemon")); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "mallory") {
		t.Errorf("trusted but not allowed: %v, want ErrNotAllowed naming mallory", err)
	}
	// Without an allow list, every member of the CA is accepted.
	if _, err := handshake(t, creds["daemon"].ServerConfig(nil), creds["mallory"].ClientConfig("daemon")); err != nil {
		t.Errorf("no allow list: %v", err)
	}
}

// A key file that appears between Issue's existence check and its writing
// (here: planted before writePair is called) is never written through: not
// a file of looser mode, not a symbolic link to elsewhere.
func TestWritePairRefusesExisting(t *testing.T) {
	dir, _ := mkCA(t, "cluster")
	caCert, caKey, err := load(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "m.key")
	if err := os.WriteFile(loose, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writePair(dir, "m", caCert.Raw, caKey); !errors.Is(err, ErrExists) {
		t.Errorf("writing over a key of mode 0644: %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(loose); string(b) != "old" {
		t.Errorf("the private key was written into the existing 0644 file")
	}
	target := filepath.Join(t.TempDir(), "stolen")
	if err := os.Symlink(target, filepath.Join(dir, "n.key")); err != nil {
		t.Fatal(err)
	}
	if err := writePair(dir, "n", caCert.Raw, caKey); !errors.Is(err, ErrExists) {
		t.Errorf("writing through a symbolic link: %v, want ErrExists", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the private key landed at the link's target: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "n.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a certificate was written although its key was refused: %v", err)
	}
}
