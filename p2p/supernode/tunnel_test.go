package supernode

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// A daemon registered as dial-out-only is reached through the supernode:
// it polls, accepts each call over a connection of its own, and the
// caller's TLS runs with the daemon's end to end (the caller checks the
// daemon's certificate, the daemon sees the caller's). The peer list says
// which peers are dial-out-only; a connect to a daemon that is not, to
// one that never accepts, and an accept of an unknown call are refused.
func TestTunnel(t *testing.T) {
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
	sn, d1, d2, alice := load("127.0.0.1"), load("d1"), load("d2"), load("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan string, 1)
	go Serve(ctx, Config{Listen: "127.0.0.1:0", Creds: sn, Ready: func(a string) { ready <- a }})
	addr := <-ready

	dc := NewClient(d1, "", addr)
	defer dc.Close()
	if err := dc.RegisterDialOutOnly(ctx, "10.0.0.1:7950"); err != nil {
		t.Fatal(err)
	}
	if err := NewClient(d2, "", addr).Register(ctx, "10.0.0.2:7950"); err != nil {
		t.Fatal(err)
	}
	peers, err := NewClient(alice, "", addr).Peers(ctx)
	if err != nil || len(peers) != 2 || !peers[0].DialOutOnly || peers[1].DialOutOnly {
		t.Fatalf("peers %+v, %v; want d1 dial-out-only and d2 not", peers, err)
	}

	// d1 answers each call with a TLS server that greets its caller by
	// name and echoes one line.
	served := make(chan error, 4)
	go func() {
		for ctx.Err() == nil {
			id, err := dc.WaitTunnel(ctx)
			if err != nil || id == "" {
				continue
			}
			go func() {
				conn, err := dc.AcceptTunnel(ctx, id)
				if err != nil {
					served <- err
					return
				}
				tc := tls.Server(conn, d1.ServerConfig(nil))
				defer tc.Close()
				if err := tc.HandshakeContext(ctx); err != nil {
					served <- err
					return
				}
				line, err := bufio.NewReader(tc).ReadString('\n')
				if err == nil {
					_, err = fmt.Fprintf(tc, "hello %s: %s", ca.PeerName(tc.ConnectionState()), line)
				}
				served <- err
			}()
		}
	}()
	ac := NewClient(alice, "", addr)
	defer ac.Close()
	for i := range 2 {
		conn, err := ac.Connect(ctx, "d1")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		tc := tls.Client(conn, alice.ClientConfig("d1"))
		fmt.Fprintf(tc, "call %d\n", i)
		got, err := io.ReadAll(tc)
		tc.Close()
		if want := fmt.Sprintf("hello alice: call %d\n", i); string(got) != want || err != nil {
			t.Errorf("call %d: got %q, %v; want %q", i, got, err, want)
		}
		if err := <-served; err != nil {
			t.Errorf("call %d, d1's side: %v", i, err)
		}
	}

	// A daemon that is not dial-out-only is not called through the
	// supernode.
	if _, err := ac.Connect(ctx, "d2"); !errors.Is(err, ErrTunnel) || !strings.Contains(err.Error(), "404") {
		t.Errorf("connect to d2: %v, want a 404 wrapping ErrTunnel", err)
	}
	// A call nobody accepts ends.
	d2c := NewClient(d2, "", addr)
	defer d2c.Close()
	if err := d2c.RegisterDialOutOnly(ctx, "10.0.0.2:7950"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = ac.Connect(ctx, "d2")
	if !errors.Is(err, ErrTunnel) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("connect to d2, which does not poll: %v, want a timeout wrapping ErrTunnel", err)
	}
	t.Logf("a call nobody accepts ends after %v", time.Since(start).Round(time.Millisecond))
	if _, err := d2c.AcceptTunnel(ctx, "0123"); !errors.Is(err, ErrTunnel) || !strings.Contains(err.Error(), "404") {
		t.Errorf("accept of an unknown call: %v, want a 404", err)
	}
}
