package launch

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
)

// The job's certificate travels in the environment and back; two holders
// of it complete a TLS 1.3 handshake, a holder of another job's
// certificate does not; half a pair or a broken one is a bootstrap error.
func TestJobTLS(t *testing.T) {
	cert, key, err := NewJobTLS("job-a")
	if err != nil {
		t.Fatal(err)
	}
	b := Bootstrap{JobID: "job-a", Rank: 0, Size: 2, Rendezvous: "127.0.0.1:9", Secret: make([]byte, 16), TLSCert: cert, TLSKey: key}
	env := map[string]string{}
	for _, kv := range b.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	back, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || string(back.TLSCert) != string(cert) || string(back.TLSKey) != string(key) {
		t.Fatalf("round trip through the environment: %v", err)
	}
	cfgA, err := back.TLSConfig()
	if err != nil || cfgA == nil || cfgA.MinVersion != tls.VersionTLS13 {
		t.Fatalf("TLSConfig: %+v %v", cfgA, err)
	}
	otherCert, otherKey, _ := NewJobTLS("job-a") // same name, another key
	cfgB, err := Bootstrap{TLSCert: otherCert, TLSKey: otherKey}.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(server, client *tls.Config) error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		done := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			done <- tls.Server(c, server).Handshake()
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, client)
		cerr := tc.Handshake()
		if cerr == nil { // TLS 1.3: the client's certificate is checked after the client's handshake
			_, cerr = tc.Read(make([]byte, 1))
		}
		c.Close()
		return errors.Join(cerr, <-done)
	}
	if err := handshake(cfgA, cfgA); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Errorf("two holders of the job's certificate: %v", err)
	}
	if err := handshake(cfgA, cfgB); err == nil {
		t.Error("a rank with another job's certificate was accepted")
	}
	if err := handshake(cfgB, cfgA); err == nil {
		t.Error("a server with another job's certificate was trusted")
	}
	half := b
	half.TLSKey = nil
	if err := half.Validate(); !errors.Is(err, ErrBootstrap) {
		t.Errorf("a certificate without its key: %v", err)
	}
	bad := b
	bad.TLSKey = otherKey
	if err := bad.Validate(); !errors.Is(err, ErrBootstrap) {
		t.Errorf("a certificate with another key: %v", err)
	}
}
