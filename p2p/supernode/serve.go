package supernode

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/metrics"
)

// Config configures a running supernode.
type Config struct {
	// Listen is the TCP address to serve on.
	Listen string
	// Creds are the supernode's credentials (its certificate and the
	// cluster's CA). Clients on the CA's revocation list are refused if
	// the credentials watch it (ca.Credentials.WatchRevocations, called
	// before Serve).
	Creds *ca.Credentials
	// Expiry is how long a registration lives without renewal (0: 30 s).
	Expiry time.Duration
	// Logger receives the JSON logs; nil discards them.
	Logger *slog.Logger
	// Ready, if not nil, receives the address served on once listening.
	Ready func(addr string)
	// Metrics, if not empty, is a host:port where Prometheus metrics are
	// served (plain HTTP, /metrics): registrations, refusals, peer lists
	// served, live peers.
	Metrics string
	// The HTTP server's timeouts (0: the default in brackets): a
	// request's headers (5 s), a whole request (10 s: every request is a
	// small JSON body), an answer (10 s), a kept-alive connection
	// between requests (60 s). A client that sends slowly or holds
	// connections idle thus holds nothing for long.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// withDefaults fills the timeouts left at 0.
func (c Config) withDefaults() Config {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.ReadHeaderTimeout, 5 * time.Second}, {&c.ReadTimeout, 10 * time.Second}, {&c.WriteTimeout, 10 * time.Second}, {&c.IdleTimeout, 60 * time.Second}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	return c
}

// server is an http.Server with cfg's timeouts.
func (c Config) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout}
}

// snMetrics are a supernode's counters.
type snMetrics struct {
	set                               metrics.Set
	registrations, refused, peerLists *atomic.Int64
}

func newMetrics(r *Registry) *snMetrics {
	m := &snMetrics{}
	m.registrations = m.set.Counter("cohort_supernode_registrations_total", "Registrations and renewals accepted.")
	m.refused = m.set.Counter("cohort_supernode_registrations_refused_total", "Registrations refused.")
	m.peerLists = m.set.Counter("cohort_supernode_peer_lists_total", "Peer lists served.")
	m.set.Gauge("cohort_supernode_peers", "Live registrations.", func() int64 { return int64(len(r.Peers())) })
	return m
}

// Serve runs a supernode until ctx is done, then shuts down gracefully
// (requests in flight finish, within 5 s).
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Creds == nil {
		return errors.New("supernode: no credentials")
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("supernode: %w", err)
	}
	reg := NewRegistry(cfg.Expiry, nil)
	m := newMetrics(reg)
	if cfg.Metrics != "" {
		mln, err := net.Listen("tcp", cfg.Metrics)
		if err != nil {
			ln.Close()
			return fmt.Errorf("supernode: metrics: %w", err)
		}
		msrv := cfg.server(m.set.Handler())
		go msrv.Serve(mln)
		defer msrv.Close()
	}
	srv := cfg.server(revocationGate(cfg.Creds, log, handler(reg, log, m)))
	srv.TLSConfig = cfg.Creds.ServerConfig(nil)
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn) // refused handshakes, with their reason
	log.Info("supernode: serving", "addr", ln.Addr().String())
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log.Info("supernode: shutting down")
	return srv.Shutdown(sctx)
}

// revocationGate refuses, with 403, a request whose client was put on the
// CA's revocation list after its connection's handshake (which refuses a
// client revoked before): a kept-alive connection does not outlive its
// peer's revocation.
func revocationGate(creds *ca.Credentials, log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.TLS != nil {
			if err := creds.CheckRevoked(*req.TLS); err != nil {
				log.Warn("supernode: request refused", "peer", ca.PeerName(*req.TLS), "remote", req.RemoteAddr, "reason", err)
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, req)
	})
}

// Client speaks to a supernode: a daemon registers through it, a
// submitter asks it for peers.
type Client struct {
	// Addr is the supernode's host:port.
	Addr string
	hc   *http.Client
	tls  *tls.Config
}

// NewClient returns a client of the supernode at addr, authenticated with
// creds. name is the name the supernode's certificate must carry; with ""
// it must carry addr's host (a supernode given by address has a
// certificate issued for that address). Any certificate of the cluster
// would not do: every member holds one, and a member posing as a
// supernode could hand out a peer list of its choosing.
func NewClient(creds *ca.Credentials, name, addr string) *Client {
	if name == "" {
		name, _, _ = net.SplitHostPort(addr)
	}
	tr := &http.Transport{TLSClientConfig: creds.ClientConfig(name), TLSHandshakeTimeout: 5 * time.Second, MaxIdleConnsPerHost: 1}
	return &Client{Addr: addr, hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, tls: creds.ClientConfig(name)}
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Register registers (or renews) the caller, under its certificate's name,
// at addr.
func (c *Client) Register(ctx context.Context, addr string) error {
	return c.register(ctx, map[string]any{"addr": addr})
}

// RegisterDialOutOnly is Register for a daemon nobody can dial: the
// supernode lists it so (Peer.DialOutOnly), and callers reach it through
// the supernode (Connect) while it waits for them (WaitTunnel).
func (c *Client) RegisterDialOutOnly(ctx context.Context, addr string) error {
	return c.register(ctx, map[string]any{"addr": addr, "dial_out_only": true})
}

func (c *Client) register(ctx context.Context, fields map[string]any) error {
	body, _ := json.Marshal(fields)
	req, err := http.NewRequestWithContext(ctx, "POST", "https://"+c.Addr+"/v1/register", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("supernode %s: %w", c.Addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("supernode %s refused the registration: %s (%s)", c.Addr, strings.TrimSpace(string(msg)), resp.Status)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return nil
}

// Peers returns the supernode's list of live peers.
func (c *Client) Peers(ctx context.Context) ([]Peer, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+c.Addr+"/v1/peers", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("supernode %s: %w", c.Addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("supernode %s: %s (%s)", c.Addr, strings.TrimSpace(string(msg)), resp.Status)
	}
	return DecodePeers(resp.Body)
}
