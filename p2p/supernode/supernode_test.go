package supernode

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// Registrations expire unless renewed; the clock is injected.
func TestRegistryExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewRegistry(10*time.Second, func() time.Time { return now })
	if err := r.Register("a", "10.0.0.1:7950"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(6 * time.Second)
	r.Register("b", "10.0.0.2:7950")
	if got := r.Peers(); len(got) != 2 || got[0].Name != "a" || got[0].LastSeen != 6*time.Second {
		t.Fatalf("peers %+v", got)
	}
	now = now.Add(5 * time.Second) // a is 11 s old
	if got := r.Peers(); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("after a's expiry: %+v", got)
	}
	r.Register("b", "10.0.0.9:7950") // renewal, new address
	if got := r.Peers(); got[0].Addr != "10.0.0.9:7950" || got[0].LastSeen != 0 {
		t.Fatalf("renewal: %+v", got)
	}
	for _, bad := range []string{"", "10.0.0.1", "10.0.0.1:0", ":"} {
		if err := r.Register("c", bad); !errors.Is(err, ErrBadAddr) {
			t.Errorf("Register(%q): %v", bad, err)
		}
	}
}

func TestMerge(t *testing.T) {
	a := []Peer{{Name: "x", Addr: "1.1.1.1:1", LastSeenMillisAgo: 500}, {Name: "y", Addr: "2.2.2.2:2", LastSeenMillisAgo: 10}}
	b := []Peer{{Name: "x", Addr: "1.1.1.9:1", LastSeenMillisAgo: 20}, {Name: "z", Addr: "3.3.3.3:3"}}
	got := Merge(a, b)
	if len(got) != 3 || got[0].Addr != "1.1.1.9:1" || got[2].Name != "z" {
		t.Fatalf("Merge = %+v", got)
	}
}

// Over mutual TLS: a daemon registers under its certificate's name; the
// list comes back; a client without a certificate is refused at the
// handshake; malformed requests are 400 and change nothing.
func TestHTTPOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if err := ca.Init(dir, "cluster"); err != nil {
		t.Fatal(err)
	}
	load := func(name string) *ca.Credentials {
		if err := ca.Issue(dir, dir, name); err != nil {
			t.Fatal(err)
		}
		c, err := ca.Load(filepath.Join(dir, "ca.crt"), dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sn, d1 := load("127.0.0.1"), load("daemon1")
	reg := NewRegistry(0, nil)
	srv := httptest.NewUnstartedServer(Handler(reg, nil))
	srv.TLS = sn.ServerConfig(nil)
	srv.StartTLS()
	defer srv.Close()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: d1.ClientConfig("127.0.0.1")}}

	post := func(body string) *http.Response {
		resp, err := client.Post(srv.URL+"/v1/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(`{"addr":"10.1.2.3:7950"}`); resp.StatusCode != 200 {
		t.Fatalf("register: %s", resp.Status)
	}
	for _, bad := range []string{`{"addr":`, `{"addr":"nope"}`, `{"addr":"1.2.3.4:5","name":"root"}`, `{"addr":"` + strings.Repeat("a", 5000) + `:1"}`} {
		if resp := post(bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("register %.40q: %s, want 400", bad, resp.Status)
		}
	}
	resp, err := client.Get(srv.URL + "/v1/peers")
	if err != nil {
		t.Fatal(err)
	}
	peers, err := DecodePeers(resp.Body)
	resp.Body.Close()
	if err != nil || len(peers) != 1 || peers[0].Name != "daemon1" || peers[0].Addr != "10.1.2.3:7950" {
		t.Fatalf("peers %+v, %v: want daemon1 at 10.1.2.3:7950 (its certificate's name)", peers, err)
	}
	anon := d1.ClientConfig("127.0.0.1")
	anon.Certificates = nil
	anonClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: anon}}
	if resp, err := anonClient.Get(srv.URL + "/v1/peers"); err == nil {
		resp.Body.Close()
		t.Fatal("a client without a certificate got the peer list")
	}
	if _, err := DecodePeers(bytes.NewReader([]byte(`{"peers":[{"name":"","addr":"1.2.3.4:5"}]}`))); err == nil {
		t.Error("a peer without a name decoded")
	}
}

func FuzzDecodePeers(f *testing.F) {
	f.Add([]byte(`{"peers":[{"name":"a","addr":"1.2.3.4:5","last_seen_ms_ago":3}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := DecodePeers(bytes.NewReader(b))
		if err == nil {
			for _, p := range ps {
				if p.Name == "" {
					t.Fatal("accepted a peer without a name")
				}
			}
		}
	})
}

// Serve answers over mutual TLS and returns once its context ends.
func TestServeGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	if err := ca.Init(dir, "cluster"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"127.0.0.1", "d"} {
		if err := ca.Issue(dir, dir, n); err != nil {
			t.Fatal(err)
		}
	}
	sn, _ := ca.Load(filepath.Join(dir, "ca.crt"), dir, "127.0.0.1")
	d, _ := ca.Load(filepath.Join(dir, "ca.crt"), dir, "d")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{Listen: "127.0.0.1:0", Creds: sn, Ready: func(a string) { ready <- a }})
	}()
	addr := <-ready
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: d.ClientConfig("127.0.0.1")}}
	resp, err := client.Post("https://"+addr+"/v1/register", "application/json", strings.NewReader(`{"addr":"10.0.0.4:7950"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("register: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// A supernode dialled by address alone must hold a certificate for that
// address: another member's certificate, valid in the cluster, is refused.
func TestDialByAddressChecksTheName(t *testing.T) {
	dir := t.TempDir()
	if err := ca.Init(dir, "cluster"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"127.0.0.1", "mallory", "d"} {
		if err := ca.Issue(dir, dir, n); err != nil {
			t.Fatal(err)
		}
	}
	load := func(n string) *ca.Credentials {
		c, err := ca.Load(filepath.Join(dir, "ca.crt"), dir, n)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	d := load("d")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serve := func(as string) string {
		ready := make(chan string, 1)
		go Serve(ctx, Config{Listen: "127.0.0.1:0", Creds: load(as), Ready: func(a string) { ready <- a }})
		return <-ready
	}
	if _, err := NewClient(d, "", serve("127.0.0.1")).Peers(ctx); err != nil {
		t.Errorf("a supernode whose certificate is its address's: %v", err)
	}
	if _, err := NewClient(d, "", serve("mallory")).Peers(ctx); err == nil {
		t.Error("a member's certificate taken for the supernode at an address")
	}
}
