package ca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// logBuf is a log sink safe for the handshakes' goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// watching returns creds[name] reloaded, with the revocation list at path
// watched ("": the default, beside ca.crt) and its log.
func watching(t *testing.T, dir, name, path string) (*Credentials, *logBuf) {
	t.Helper()
	c, err := Load(filepath.Join(dir, "ca.crt"), dir, name)
	if err != nil {
		t.Fatal(err)
	}
	log := &logBuf{}
	if err := c.WatchRevocations(path, slog.New(slog.NewTextHandler(log, nil))); err != nil {
		t.Fatal(err)
	}
	return c, log
}

// A revoked member is refused in the handshake, as a client by a server
// and as a server by a client, with an error naming it; a member not
// revoked is accepted; revoking by name revokes each of its certificates.
func TestRevokedRefused(t *testing.T) {
	dir, creds := mkCA(t, "cluster", "daemon", "alice", "mallory", "evil-daemon")
	renewed, err := Renew(dir, dir, "mallory", MemberValidity)
	if err != nil {
		t.Fatal(err)
	}
	serials, err := Revoke(dir, "mallory")
	if err != nil || len(serials) != 2 {
		t.Fatalf("Revoke(mallory) = %v, %v; want its two certificates", serials, err)
	}
	if _, err := Revoke(dir, "nobody"); !errors.Is(err, ErrUnknown) {
		t.Errorf("revoking a name never issued: %v, want ErrUnknown", err)
	}
	if err := RevokeSerial(dir, creds["evil-daemon"].Cert.Leaf.SerialNumber); err != nil {
		t.Fatal(err)
	}
	daemon, _ := watching(t, dir, "daemon", "")
	srv := daemon.ServerConfig(nil)
	if name, err := handshake(t, srv, creds["alice"].ClientConfig("daemon")); err != nil || name != "alice" {
		t.Errorf("alice, not revoked: %v (peer %q)", err, name)
	}
	for _, m := range []*Credentials{creds["mallory"], mustLoad(t, dir, "mallory")} {
		_, err := handshake(t, srv, m.ClientConfig("daemon"))
		if !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), `"mallory"`) || !strings.Contains(err.Error(), SerialText(m.Cert.Leaf.SerialNumber)) {
			t.Errorf("mallory (serial %s): %v, want ErrRevoked naming mallory and its serial", SerialText(m.Cert.Leaf.SerialNumber), err)
		}
	}
	if mustLoad(t, dir, "mallory").Cert.Leaf.SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Fatal("the renewed certificate is not the one on disk")
	}
	// The client side: a daemon dialling a revoked server refuses it.
	_, cliErr := handshakeBoth(t, creds["evil-daemon"].ServerConfig(nil), daemon.ClientConfig("evil-daemon"))
	if !errors.Is(cliErr, ErrRevoked) || !strings.Contains(cliErr.Error(), "evil-daemon") {
		t.Errorf("dialling a revoked server: %v, want ErrRevoked naming it", cliErr)
	}
	// Without a revocation list, the same credentials accept mallory.
	if _, err := handshake(t, creds["daemon"].ServerConfig(nil), creds["mallory"].ClientConfig("daemon")); err != nil {
		t.Errorf("no revocation list watched: %v", err)
	}
	list, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, is := range list {
		if want := is.Name == "mallory" || is.Name == "evil-daemon"; want != !is.Revoked.IsZero() {
			t.Errorf("List: %s %s revoked at %v", is.Name, SerialText(is.Serial), is.Revoked)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, CRLFile)); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("ca.crl: %v, mode %v, want 0644", err, st.Mode().Perm())
	}
}

func mustLoad(t *testing.T, dir, name string) *Credentials {
	t.Helper()
	c, err := Load(filepath.Join(dir, "ca.crt"), dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A list not signed by the CA, not a list at all, or missing where it was
// named, is refused at start.
func TestBadListRefusedAtStart(t *testing.T) {
	dir, _ := mkCA(t, "cluster", "daemon", "mallory")
	other, otherCreds := mkCA(t, "elsewhere", "x")
	if err := RevokeSerial(other, otherCreds["x"].Cert.Leaf.SerialNumber); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.crl")
	os.WriteFile(garbage, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o644)
	for path, want := range map[string]string{
		filepath.Join(other, CRLFile):          "not signed by the cluster's CA",
		garbage:                                "not an X509 CRL",
		filepath.Join(t.TempDir(), "none.crl"): "no such file",
	} {
		c := mustLoad(t, dir, "daemon")
		if err := c.WatchRevocations(path, nil); !errors.Is(err, ErrCRL) || !strings.Contains(err.Error(), want) {
			t.Errorf("WatchRevocations(%s): %v, want ErrCRL saying %q", path, err, want)
		}
	}
	// The CA's own revoke refuses to build on another CA's list.
	data, _ := os.ReadFile(filepath.Join(other, CRLFile))
	os.WriteFile(filepath.Join(dir, CRLFile), data, 0o644)
	if _, err := Revoke(dir, "mallory"); !errors.Is(err, ErrCRL) {
		t.Errorf("revoking over another CA's list: %v, want ErrCRL", err)
	}
}

// A list copied onto the machine after start is in force from the next
// handshake; a later list that is bad, of another CA, older, or removed,
// is logged and the last good one stays in force.
func TestListReloaded(t *testing.T) {
	dir, creds := mkCA(t, "cluster", "daemon", "alice", "mallory", "trudy")
	other, otherCreds := mkCA(t, "elsewhere", "x")
	if err := RevokeSerial(other, otherCreds["x"].Cert.Leaf.SerialNumber); err != nil {
		t.Fatal(err)
	}
	daemon, log := watching(t, dir, "daemon", "")
	srv := daemon.ServerConfig(nil)
	if _, err := handshake(t, srv, creds["mallory"].ClientConfig("daemon")); err != nil {
		t.Fatalf("before any list: %v", err)
	}
	crl := filepath.Join(dir, CRLFile)
	if _, err := Revoke(dir, "mallory"); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(crl)
	if _, err := handshake(t, srv, creds["mallory"].ClientConfig("daemon")); !errors.Is(err, ErrRevoked) {
		t.Fatalf("after the list appeared: %v, want ErrRevoked", err)
	}
	if _, err := Revoke(dir, "trudy"); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(crl)
	refused := func(stage string) {
		t.Helper()
		for _, m := range []string{"mallory", "trudy"} {
			if _, err := handshake(t, srv, creds[m].ClientConfig("daemon")); !errors.Is(err, ErrRevoked) {
				t.Errorf("%s: %s: %v, want ErrRevoked", stage, m, err)
			}
		}
		if _, err := handshake(t, srv, creds["alice"].ClientConfig("daemon")); err != nil {
			t.Errorf("%s: alice: %v", stage, err)
		}
	}
	refused("second list")
	replace := func(data []byte) {
		t.Helper()
		tmp := crl + ".new"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, crl); err != nil {
			t.Fatal(err)
		}
	}
	otherList, _ := os.ReadFile(filepath.Join(other, CRLFile))
	for _, c := range []struct {
		stage string
		data  []byte
		log   string
	}{
		{"garbage", []byte("not a list"), "new revocation list refused"},
		{"another CA's list", otherList, "not signed by the cluster's CA"},
		{"an older list", first, "older than"},
	} {
		replace(c.data)
		refused(c.stage)
		if !strings.Contains(log.String(), c.log) {
			t.Errorf("%s: log %q, want %q", c.stage, log.String(), c.log)
		}
	}
	os.Remove(crl)
	refused("list removed")
	if !strings.Contains(log.String(), "revocation list gone") {
		t.Errorf("list removed: log %q", log.String())
	}
	replace(second)
	refused("list back")
	// A connection established before the revocation is cut off by the
	// server's per-request check.
	cs := creds["alice"].Cert.Leaf
	if err := RevokeSerial(dir, cs.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := daemon.CheckRevoked(tlsStateOf(cs)); !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), "alice") {
		t.Errorf("CheckRevoked after alice's revocation: %v", err)
	}
	if strings.Count(log.String(), "not signed by the cluster's CA") != 1 {
		t.Errorf("a refused list is logged more than once while it does not change:\n%s", log.String())
	}
}

func tlsStateOf(c *x509.Certificate) tls.ConnectionState {
	return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
}
