package ca

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
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
	name, srvErr, _ := handshake3(t, cfg, ccfg)
	return name, srvErr
}

// handshakeBoth is handshake returning the server's and the client's
// errors.
func handshakeBoth(t *testing.T, cfg, ccfg *tls.Config) (srvErr, cliErr error) {
	_, srvErr, cliErr = handshake3(t, cfg, ccfg)
	return srvErr, cliErr
}

func handshake3(t *testing.T, cfg, ccfg *tls.Config) (string, error, error) {
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
	c, cliErr := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), ccfg)
	if cliErr == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
			cliErr = err // TLS 1.3: the client learns of a refusal on its first read
		}
		c.Close()
	}
	r := <-done
	return r.name, r.err, cliErr
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

// A member's certificate lives MemberValidity unless told otherwise,
// within bounds; every one issued or renewed is in the CA's list, and a
// renewal replaces the member's files with a new key and serial.
func TestLifetimeListRenew(t *testing.T) {
	dir, creds := mkCA(t, "cluster", "alice")
	if got := creds["alice"].Cert.Leaf.NotAfter.Sub(creds["alice"].Cert.Leaf.NotBefore); got != MemberValidity+time.Hour {
		t.Errorf("default lifetime %v, want %v (plus the hour of clock skew allowed before)", got, MemberValidity)
	}
	bob, err := IssueFor(dir, dir, "bob", 7*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := bob.NotAfter.Sub(bob.NotBefore); got != 7*24*time.Hour+time.Hour {
		t.Errorf("7-day lifetime: %v", got)
	}
	for _, bad := range []time.Duration{0, -time.Hour, MaxMemberValidity + time.Hour} {
		if _, err := IssueFor(dir, dir, "carol", bad); !errors.Is(err, ErrValidity) {
			t.Errorf("IssueFor(%v): %v, want ErrValidity", bad, err)
		}
	}
	if _, err := Renew(dir, dir, "nobody", time.Hour); !errors.Is(err, ErrFiles) {
		t.Errorf("renewing a member without a certificate: %v", err)
	}
	renewed, err := Renew(dir, dir, "bob", 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(filepath.Join(dir, "ca.crt"), dir, "bob")
	if err != nil || c.Cert.Leaf.SerialNumber.Cmp(renewed.SerialNumber) != 0 || c.Cert.Leaf.SerialNumber.Cmp(bob.SerialNumber) == 0 {
		t.Fatalf("after renewal: %v; serial on disk %v, renewed %v, old %v", err, c.Cert.Leaf.SerialNumber, renewed.SerialNumber, bob.SerialNumber)
	}
	for f, want := range map[string]os.FileMode{"bob.key": 0o600, "bob.crt": 0o644} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != want {
			t.Errorf("renewed %s: %v, mode %v, want %v", f, err, st.Mode().Perm(), want)
		}
	}
	list, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, is := range list {
		got = append(got, is.Name+" "+SerialText(is.Serial))
	}
	want := []string{"alice " + SerialText(creds["alice"].Cert.Leaf.SerialNumber), "bob " + SerialText(bob.SerialNumber), "bob " + SerialText(renewed.SerialNumber)}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("List = %q, want %q", got, want)
	}
	// A certificate that is in dir but not in the index (issued before the
	// CA kept one) is listed too.
	os.Remove(filepath.Join(dir, IndexFile))
	if list, err := List(dir); err != nil || len(list) != 2 || list[1].Serial.Cmp(renewed.SerialNumber) != 0 {
		t.Errorf("without the index: %v %+v", err, list)
	}
	os.WriteFile(filepath.Join(dir, IndexFile), []byte("zz 2030 x\n"), 0o644)
	if _, err := List(dir); !errors.Is(err, ErrFiles) || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("a bad index line: %v, want ErrFiles naming the line", err)
	}
}

// An expired member certificate is refused by the standard verification
// of the handshake, on both sides.
func TestExpiredRefused(t *testing.T) {
	dir, creds := mkCA(t, "cluster", "daemon", "alice")
	caCert, caKey, err := load(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	expired := func(name string) *Credentials {
		c := *creds[name]
		tmpl := *c.Cert.Leaf
		tmpl.SerialNumber = serial()
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, caCert, c.Cert.Leaf.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		c.Cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: c.Cert.PrivateKey, Leaf: leaf}
		return &c
	}
	if _, err := handshake(t, creds["daemon"].ServerConfig(nil), expired("alice").ClientConfig("daemon")); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired client: %v, want a refusal saying expired", err)
	}
	srvErr, cliErr := handshakeBoth(t, expired("daemon").ServerConfig(nil), creds["alice"].ClientConfig("daemon"))
	if srvErr == nil || cliErr == nil || !strings.Contains(cliErr.Error(), "expired") {
		t.Errorf("expired server: server %v, client %v; want the client to refuse it as expired", srvErr, cliErr)
	}
}
