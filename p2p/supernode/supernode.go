// Package supernode is the bootstrap registry of the peer-to-peer
// middleware (P2P-MPI §2: the supernode): peer daemons register their
// address and are kept with the time they were last seen; a registration
// not renewed within the expiry is dropped; anyone of the cluster asks for
// the list of live peers. Several supernodes may run for redundancy: a
// daemon registers with each and merges their lists ([Merge]).
//
// The protocol is HTTP/JSON over mutual TLS (package p2p/ca): the caller's
// certificate must chain to the cluster's CA, unexpired and, when the
// supernode watches the CA's revocation list, not revoked (checked at the
// handshake and on each request). A daemon may only register itself: the
// name it registers is the name of its certificate.
//
//	POST /v1/register  {"addr": "10.0.0.5:7950"}  → {"expires_in_ms": 30000}
//	GET  /v1/peers                                → {"peers": [{"name", "addr", "last_seen_ms_ago"}]}
//
// A daemon nobody can dial adds "dial_out_only": true to its registration;
// the peer list says so, and the supernode joins callers to it through
// connections the daemon opens (see tunnel.go's endpoints).
//
// Bodies are limited to 4 KiB; a malformed or oversized request gets 400
// with a message and changes nothing.
package supernode

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// DefaultExpiry is how long a registration lives without renewal.
const DefaultExpiry = 30 * time.Second

// maxBody bounds a request body.
const maxBody = 4 << 10

// Peer is a registered daemon.
type Peer struct {
	Name     string        `json:"name"`
	Addr     string        `json:"addr"`
	LastSeen time.Duration `json:"-"`
	// LastSeenMillisAgo is how long ago the peer last registered, in
	// milliseconds, as the supernode saw it.
	LastSeenMillisAgo int64 `json:"last_seen_ms_ago"`
	// DialOutOnly: nobody can dial the peer; it is reached through the
	// supernode that listed it ([Client.Connect]).
	DialOutOnly bool `json:"dial_out_only,omitempty"`
}

// Registry holds the registrations. It is safe for concurrent use; its
// clock is injected (now), so expiry is tested without sleeping.
type Registry struct {
	mu     sync.Mutex
	now    func() time.Time
	expiry time.Duration
	peers  map[string]entry
	tun    *tunnels
}

type entry struct {
	addr        string
	seen        time.Time
	dialOutOnly bool
}

// NewRegistry returns an empty registry with the given expiry (0: the
// default) and clock (nil: time.Now).
func NewRegistry(expiry time.Duration, now func() time.Time) *Registry {
	if expiry <= 0 {
		expiry = DefaultExpiry
	}
	if now == nil {
		now = time.Now
	}
	return &Registry{now: now, expiry: expiry, peers: map[string]entry{}, tun: newTunnels()}
}

// ErrBadAddr: a registration whose address is not host:port.
var ErrBadAddr = errors.New("supernode: bad address")

// Register records (or renews) name at addr.
func (r *Registry) Register(name, addr string) error { return r.register(name, addr, false) }

// RegisterDialOutOnly records (or renews) name at addr, as a daemon
// nobody can dial.
func (r *Registry) RegisterDialOutOnly(name, addr string) error { return r.register(name, addr, true) }

// dialOutOnly says whether name is live and registered as dial-out-only.
func (r *Registry) dialOutOnly(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.peers[name]
	return ok && e.dialOutOnly && r.now().Sub(e.seen) <= r.expiry
}

func (r *Registry) register(name, addr string, dialOutOnly bool) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" || port == "0" || len(addr) > 255 {
		return fmt.Errorf("%w: %q (want host:port)", ErrBadAddr, addr)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peers[name] = entry{addr: addr, seen: r.now(), dialOutOnly: dialOutOnly}
	return nil
}

// Peers returns the live registrations (expired ones are dropped), sorted
// by name.
func (r *Registry) Peers() []Peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []Peer
	for name, e := range r.peers {
		age := now.Sub(e.seen)
		if age > r.expiry {
			delete(r.peers, name)
			continue
		}
		out = append(out, Peer{Name: name, Addr: e.addr, LastSeen: age, LastSeenMillisAgo: age.Milliseconds(), DialOutOnly: e.dialOutOnly})
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Merge merges peer lists from several supernodes: one entry per name,
// the most recently seen one, sorted by name.
func Merge(lists ...[]Peer) []Peer {
	best := map[string]Peer{}
	for _, l := range lists {
		for _, p := range l {
			if b, ok := best[p.Name]; !ok || p.LastSeenMillisAgo < b.LastSeenMillisAgo {
				best[p.Name] = p
			}
		}
	}
	out := make([]Peer, 0, len(best))
	for _, p := range best {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Handler serves the registry's HTTP API. It must be served over TLS with
// client certificates (ca.Credentials.ServerConfig): the registering name
// is the client certificate's.
func Handler(r *Registry, log *slog.Logger) http.Handler {
	return handler(r, log, nil)
}

// handler is Handler counting into m (nil: no counting).
func handler(r *Registry, log *slog.Logger, m *snMetrics) http.Handler {
	if m == nil {
		m = newMetrics(r)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/register", func(w http.ResponseWriter, req *http.Request) {
		name := ""
		if req.TLS != nil {
			name = ca.PeerName(*req.TLS)
		}
		if name == "" {
			m.refused.Add(1)
			log.Warn("supernode: registration refused", "remote", req.RemoteAddr, "reason", "no verified client certificate")
			http.Error(w, "a client certificate of the cluster's CA is required", http.StatusUnauthorized)
			return
		}
		var body struct {
			Addr        string `json:"addr"`
			DialOutOnly bool   `json:"dial_out_only"`
		}
		dec := json.NewDecoder(io.LimitReader(req.Body, maxBody+1))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			m.refused.Add(1)
			log.Warn("supernode: registration refused", "peer", name, "reason", "malformed request", "err", err)
			http.Error(w, "malformed request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := r.register(name, body.Addr, body.DialOutOnly); err != nil {
			m.refused.Add(1)
			log.Warn("supernode: registration refused", "peer", name, "reason", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.registrations.Add(1)
		log.Info("supernode: registered", "peer", name, "addr", body.Addr, "dial_out_only", body.DialOutOnly)
		writeJSON(w, map[string]int64{"expires_in_ms": r.expiry.Milliseconds()})
	})
	mux.HandleFunc("GET /v1/peers", func(w http.ResponseWriter, req *http.Request) {
		m.peerLists.Add(1)
		writeJSON(w, map[string][]Peer{"peers": r.Peers()})
	})
	handleTunnel(mux, r, log)
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// DecodePeers decodes a /v1/peers answer; malformed or oversized input is
// an error.
func DecodePeers(rd io.Reader) ([]Peer, error) {
	var body struct {
		Peers []Peer `json:"peers"`
	}
	dec := json.NewDecoder(io.LimitReader(rd, 1<<20))
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("supernode: malformed peer list: %w", err)
	}
	for _, p := range body.Peers {
		if p.Name == "" {
			return nil, errors.New("supernode: malformed peer list: a peer without a name")
		}
		if _, _, err := net.SplitHostPort(p.Addr); err != nil {
			return nil, fmt.Errorf("supernode: malformed peer list: peer %s: %w", p.Name, err)
		}
	}
	return body.Peers, nil
}
