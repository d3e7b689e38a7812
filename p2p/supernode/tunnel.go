package supernode

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// A daemon on a host nobody can dial (behind a NAT or a firewall that
// drops inbound connections) registers as dial-out-only and is reached
// through the supernode: it keeps asking the supernode whether someone
// wants it (a long poll), and when someone does, it opens a connection of
// its own to the supernode, which joins the two byte streams. The caller
// then runs its TLS with the daemon end to end inside that stream, exactly
// as over a direct connection: the supernode sees only ciphertext, cannot
// pose as the daemon (it holds no certificate of the daemon's name) and
// decides nothing about who may submit.
//
//	GET  /v1/tunnel/wait             (the daemon)   → {"id": "…"}, or 204 after tunnelHold
//	POST /v1/tunnel/accept?id=ID     (the daemon)   → 101, then the caller's byte stream
//	POST /v1/tunnel/connect?to=NAME  (any member)   → 101 once the daemon accepted, then the daemon's
//
// A connect is refused (404) for a name that is not registered as
// dial-out-only, and fails (504) when the daemon has not accepted within
// tunnelAccept.

const (
	// tunnelHold is how long a wait is held before the supernode answers
	// that nobody called: under the client's and the server's timeouts
	// (10 s by default), and the longest a call waits for the daemon's
	// next poll.
	tunnelHold = 5 * time.Second
	// tunnelAccept bounds a connect's wait for the daemon's accept.
	tunnelAccept = tunnelHold + 3*time.Second
	// tunnelQueue bounds the calls waiting for one daemon's poll.
	tunnelQueue = 64
	// maxTunnels bounds the streams a supernode joins at once.
	maxTunnels = 1024
	// tunnelProto is the Upgrade token of the tunnel's requests.
	tunnelProto = "cohort-tunnel"
)

// ErrTunnel wraps a failure to reach a daemon through a supernode.
var ErrTunnel = errors.New("supernode: tunnel")

// tunnels pairs the calls for dial-out-only daemons with their accepts.
type tunnels struct {
	mu     sync.Mutex
	queues map[string]chan string // daemon name → ids of calls waiting for its poll
	calls  map[string]*call       // by id, until accepted or given up
	open   int                    // streams joined now
}

// call is a connect waiting for the daemon to accept it.
type call struct {
	to   string
	conn chan net.Conn // the daemon's side, once accepted (room for one)
	gone chan struct{} // closed when the caller gave up
}

func newTunnels() *tunnels {
	return &tunnels{queues: map[string]chan string{}, calls: map[string]*call{}}
}

// queue returns the queue of calls for name, made on first use.
func (t *tunnels) queue(name string) chan string {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[name]
	if q == nil {
		q = make(chan string, tunnelQueue)
		t.queues[name] = q
	}
	return q
}

// handleTunnel adds the tunnel's endpoints to mux.
func handleTunnel(mux *http.ServeMux, r *Registry, log *slog.Logger) {
	t := r.tun
	mux.HandleFunc("GET /v1/tunnel/wait", func(w http.ResponseWriter, req *http.Request) {
		name := callerName(req)
		if name == "" {
			http.Error(w, "a client certificate of the cluster's CA is required", http.StatusUnauthorized)
			return
		}
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(tunnelHold + 5*time.Second))
		timer := time.NewTimer(tunnelHold)
		defer timer.Stop()
		select {
		case id := <-t.queue(name):
			writeJSON(w, map[string]string{"id": id})
		case <-timer.C:
			w.WriteHeader(http.StatusNoContent)
		case <-req.Context().Done():
		}
	})
	mux.HandleFunc("POST /v1/tunnel/connect", func(w http.ResponseWriter, req *http.Request) {
		name, to := callerName(req), req.URL.Query().Get("to")
		if name == "" {
			http.Error(w, "a client certificate of the cluster's CA is required", http.StatusUnauthorized)
			return
		}
		if !r.dialOutOnly(to) {
			http.Error(w, fmt.Sprintf("no daemon %q is registered here as dial-out-only", to), http.StatusNotFound)
			return
		}
		idb := make([]byte, 16)
		rand.Read(idb)
		id := hex.EncodeToString(idb)
		c := &call{to: to, conn: make(chan net.Conn, 1), gone: make(chan struct{})}
		t.mu.Lock()
		full := t.open >= maxTunnels
		if !full {
			t.calls[id] = c
		}
		t.mu.Unlock()
		if full {
			http.Error(w, "too many tunnels open", http.StatusServiceUnavailable)
			return
		}
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(tunnelAccept + 5*time.Second))
		forget := func() {
			t.mu.Lock()
			delete(t.calls, id)
			t.mu.Unlock()
			close(c.gone)
		}
		select {
		case t.queue(to) <- id:
		default:
			forget()
			http.Error(w, fmt.Sprintf("daemon %s has too many calls waiting", to), http.StatusServiceUnavailable)
			return
		}
		timer := time.NewTimer(tunnelAccept)
		defer timer.Stop()
		var theirs net.Conn
		select {
		case theirs = <-c.conn:
		case <-timer.C:
		case <-req.Context().Done():
		}
		if theirs == nil {
			forget()
			log.Warn("supernode: tunnel not accepted", "peer", name, "to", to)
			http.Error(w, fmt.Sprintf("daemon %s did not answer through the supernode within %v", to, tunnelAccept), http.StatusGatewayTimeout)
			return
		}
		mine, rw, err := upgrade(w)
		if err != nil {
			theirs.Close()
			forget()
			return
		}
		t.mu.Lock()
		t.open++
		t.mu.Unlock()
		log.Info("supernode: tunnel open", "peer", name, "to", to)
		splice(mine, rw.Reader, theirs, theirs)
		t.mu.Lock()
		t.open--
		t.mu.Unlock()
	})
	mux.HandleFunc("POST /v1/tunnel/accept", func(w http.ResponseWriter, req *http.Request) {
		name, id := callerName(req), req.URL.Query().Get("id")
		t.mu.Lock()
		c := t.calls[id]
		if c != nil && c.to == name {
			delete(t.calls, id)
		}
		t.mu.Unlock()
		switch {
		case c == nil:
			http.Error(w, "no such call (it was given up)", http.StatusNotFound)
			return
		case c.to != name:
			http.Error(w, "this call is for another daemon", http.StatusForbidden)
			return
		}
		conn, rw, err := upgrade(w)
		if err != nil {
			return
		}
		select {
		case c.conn <- &readConn{Conn: conn, r: rw.Reader}:
		case <-c.gone:
			conn.Close()
		}
	})
}

// callerName is the verified name of req's client certificate ("" if none).
func callerName(req *http.Request) string {
	if req.TLS == nil {
		return ""
	}
	return ca.PeerName(*req.TLS)
}

// upgrade answers 101 and takes the connection from the HTTP server, with
// no deadline left on it (the stream lives as long as its ends).
func upgrade(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, err
	}
	conn.SetDeadline(time.Time{})
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + tunnelProto + "\r\n\r\n"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, rw, nil
}

// splice copies a's input (read through ar) to b and b's (through br) to
// a until either side ends, then closes both.
func splice(a net.Conn, ar io.Reader, b net.Conn, br io.Reader) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(b, ar); done <- struct{}{} }()
	go func() { io.Copy(a, br); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}

// readConn is a connection whose first bytes were read into r already.
type readConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// WaitTunnel waits (up to a few seconds) for someone to call the daemon
// this client's certificate names; it returns the call's id, or "" when
// nobody called meanwhile. Only a daemon registered as dial-out-only is
// called.
func (c *Client) WaitTunnel(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+c.Addr+"/v1/tunnel/wait", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("supernode %s: %w", c.Addr, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return "", nil
	case http.StatusOK:
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return "", fmt.Errorf("%w: supernode %s: %s (%s)", ErrTunnel, c.Addr, strings.TrimSpace(string(msg)), resp.Status)
	}
	var body struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&body); err != nil || body.ID == "" {
		return "", fmt.Errorf("%w: supernode %s: malformed answer to a wait (%v)", ErrTunnel, c.Addr, err)
	}
	return body.ID, nil
}

// AcceptTunnel takes the call id (from WaitTunnel) and returns the
// caller's byte stream: the daemon serves its TLS on it.
func (c *Client) AcceptTunnel(ctx context.Context, id string) (net.Conn, error) {
	return c.upgrade(ctx, "/v1/tunnel/accept?id="+url.QueryEscape(id))
}

// Connect returns a byte stream to the dial-out-only daemon named to,
// through the supernode; the caller runs its TLS with the daemon on it.
func (c *Client) Connect(ctx context.Context, to string) (net.Conn, error) {
	conn, err := c.upgrade(ctx, "/v1/tunnel/connect?to="+url.QueryEscape(to))
	if err != nil {
		return nil, fmt.Errorf("daemon %s through %w", to, err)
	}
	return conn, nil
}

// upgrade opens a connection of its own to the supernode, asks for path
// as an upgrade and returns the connection once it was granted. The wait
// is bounded by ctx and by tunnelAccept and a few seconds.
func (c *Client) upgrade(ctx context.Context, path string) (net.Conn, error) {
	fail := func(err error) (net.Conn, error) {
		return nil, fmt.Errorf("%w: supernode %s: %w", ErrTunnel, c.Addr, err)
	}
	cfg := c.tls.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(tunnelAccept + 5*time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	raw.SetDeadline(deadline)
	conn := tls.Client(raw, cfg)
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return fail(err)
	}
	req, err := http.NewRequest("POST", "https://"+c.Addr+path, nil)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", tunnelProto)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return fail(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		conn.Close()
		return fail(fmt.Errorf("%s (%s)", strings.TrimSpace(string(msg)), resp.Status))
	}
	if !stop() {
		conn.Close()
		return fail(ctx.Err())
	}
	raw.SetDeadline(time.Time{})
	return &readConn{Conn: conn, r: br}, nil
}
