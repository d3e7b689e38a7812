package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// entry is a stored value with its version: the epoch it was written in
// and the owner's write counter. Only the owner of a key in an epoch
// writes it, so versions order a key's writes, and a copy handed off late
// never overwrites a newer value.
type entry struct {
	Value string `json:"v"`
	Epoch uint64 `json:"e"`
	Seq   uint64 `json:"s"`
}

func (e entry) newer(than entry) bool {
	return e.Epoch > than.Epoch || e.Epoch == than.Epoch && e.Seq > than.Seq
}

// Headers of forwarded and internal requests.
const (
	hdrEpoch = "X-Kv-Epoch" // the epoch the sender acts in
	hdrFrom  = "X-Kv-From"  // the sender's name
)

// node is one replica: its membership, its store, and what it knows of
// the hand-offs of its current epoch.
type node struct {
	g      *group.Group
	name   string
	log    *log.Logger
	client *http.Client

	mu      sync.Mutex
	changed chan struct{}              // closed and renewed when view or ready change
	view    group.View                 // the view delivered last
	ready   bool                       // every other member's hand-off of view.Epoch arrived
	got     map[uint64]map[string]bool // epoch → members whose hand-off arrived
	maxSeen uint64                     // the highest epoch of a hand-off received
	data    map[string]entry
	seq     uint64
	closed  bool
}

func newNode(g *group.Group, logger *log.Logger) *node {
	return &node{
		g: g, name: g.Name(), log: logger,
		client:  &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		changed: make(chan struct{}),
		got:     map[uint64]map[string]bool{},
		data:    map[string]entry{},
	}
}

// placement returns the owner and the backup of key in v: the first and
// second members in rendezvous order (the backup is the owner of key in
// the view without the owner), so that when the owner departs, its
// backup, which holds its keys, becomes their owner.
func placement(v group.View, key string) (owner, backup string) {
	o := v.Owner(key)
	rest := group.View{Epoch: v.Epoch}
	for _, m := range v.Members {
		if m.Name != o.Name {
			rest.Members = append(rest.Members, m)
		}
	}
	return o.Name, rest.Owner(key).Name
}

// httpBase is a member's HTTP address, from its metadata.
func httpBase(m group.Member) string { return string(m.Meta) }

// signalLocked wakes the requests waiting for a view or for readiness.
func (n *node) signalLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// run installs the views of n's group as they come, until the channel
// closes.
func (n *node) run() {
	for v := range n.g.Views() {
		n.install(v)
	}
}

// install makes v the current view: n stops serving the previous epoch,
// hands every other member the keys it owns or backs in v, and serves
// again once every other member's hand-off of v arrived.
func (n *node) install(v group.View) {
	n.mu.Lock()
	var names []string
	for _, m := range v.Members {
		names = append(names, m.Name)
	}
	n.log.Printf("view epoch=%d members=%s", v.Epoch, joinNames(names))
	n.view, n.ready = v, false
	for e := range n.got {
		if e < v.Epoch {
			delete(n.got, e)
		}
	}
	batches := map[string]map[string]entry{}
	for _, m := range v.Members {
		if m.Name != n.name {
			batches[m.Name] = map[string]entry{}
		}
	}
	for k, e := range n.data {
		o, b := placement(v, k)
		for _, to := range []string{o, b} {
			if to != n.name && to != "" {
				batches[to][k] = e
			}
		}
	}
	n.checkReadyLocked()
	n.signalLocked()
	n.mu.Unlock()
	go n.handOff(v, batches)
}

// checkReadyLocked starts serving the current epoch once every other
// member's hand-off of it arrived.
func (n *node) checkReadyLocked() {
	if n.ready {
		return
	}
	for _, m := range n.view.Members {
		if m.Name != n.name && !n.got[n.view.Epoch][m.Name] {
			return
		}
	}
	n.ready = true
	n.log.Printf("ready epoch=%d keys=%d", n.view.Epoch, len(n.data))
	n.signalLocked()
}

// handOff sends each member of v its batch until it is taken or v is
// replaced, then drops the keys n neither owns nor backs in v, unless a
// hand-off of a later epoch brought keys meanwhile (they belong to a view
// n has not installed yet).
func (n *node) handOff(v group.View, batches map[string]map[string]entry) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for _, m := range v.Members {
		batch, ok := batches[m.Name]
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(batch)
			for {
				err := n.post(httpBase(m)+"/internal/handoff", v.Epoch, body)
				if err == nil {
					mu.Lock()
					sent++
					mu.Unlock()
					return
				}
				if !n.waitEpoch(v.Epoch, 100*time.Millisecond) {
					return // replaced by a later view, which hands off anew
				}
			}
		}()
	}
	wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.view.Epoch != v.Epoch || sent != len(batches) || n.maxSeen > v.Epoch {
		return
	}
	dropped := 0
	for k := range n.data {
		if o, b := placement(v, k); o != n.name && b != n.name {
			delete(n.data, k)
			dropped++
		}
	}
	n.log.Printf("handed-off epoch=%d dropped=%d", v.Epoch, dropped)
}

// waitEpoch waits up to d and reports whether the current epoch is still
// epoch.
func (n *node) waitEpoch(epoch uint64, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		n.mu.Lock()
		same, ch := n.view.Epoch == epoch && !n.closed, n.changed
		n.mu.Unlock()
		if !same {
			return false
		}
		select {
		case <-ch:
		case <-t.C:
			return true
		}
	}
}

// post sends body to an internal endpoint as n, acting in epoch.
func (n *node) post(u string, epoch uint64, body []byte) error {
	req, err := http.NewRequest("POST", u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(hdrEpoch, strconv.FormatUint(epoch, 10))
	req.Header.Set(hdrFrom, n.name)
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", u, resp.Status, msg)
	}
	return nil
}

// merge keeps the newer of each key's entries.
func (n *node) mergeLocked(batch map[string]entry) {
	for k, e := range batch {
		if old, ok := n.data[k]; !ok || e.newer(old) {
			n.data[k] = e
		}
	}
}

// handler serves the key-value API and the replicas' internal endpoints.
func (n *node) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key}", func(w http.ResponseWriter, r *http.Request) { n.serveKey(w, r, r.PathValue("key"), "") })
	mux.HandleFunc("PUT /kv/{key}", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
		if err != nil || len(b) > 1<<20 {
			http.Error(w, "kv: a value is at most 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		n.serveKey(w, r, r.PathValue("key"), string(b))
	})
	mux.HandleFunc("POST /internal/handoff", n.takeHandOff)
	mux.HandleFunc("POST /internal/backup", n.takeBackup)
	mux.HandleFunc("GET /members", func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		v, ready := n.view, n.ready
		n.mu.Unlock()
		fmt.Fprintf(w, "%v ready=%v\n", v, ready)
	})
	return mux
}

// epochOf reads the epoch header of r (0 if absent).
func epochOf(r *http.Request) (uint64, error) {
	s := r.Header.Get(hdrEpoch)
	if s == "" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// takeHandOff merges a member's hand-off of an epoch: refused if n
// already installed a later view (the sender installs it too and hands
// off anew), counted for readiness otherwise.
func (n *node) takeHandOff(w http.ResponseWriter, r *http.Request) {
	epoch, err := epochOf(r)
	from := r.Header.Get(hdrFrom)
	if err != nil || epoch == 0 || from == "" {
		http.Error(w, "kv: a hand-off needs its epoch and sender", http.StatusBadRequest)
		return
	}
	var batch map[string]entry
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<30)).Decode(&batch); err != nil {
		http.Error(w, "kv: malformed hand-off: "+err.Error(), http.StatusBadRequest)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if epoch < n.view.Epoch {
		http.Error(w, fmt.Sprintf("kv: epoch %d is past (now %d)", epoch, n.view.Epoch), http.StatusConflict)
		return
	}
	n.mergeLocked(batch)
	n.maxSeen = max(n.maxSeen, epoch)
	if n.got[epoch] == nil {
		n.got[epoch] = map[string]bool{}
	}
	n.got[epoch][from] = true
	if epoch == n.view.Epoch {
		n.checkReadyLocked()
	}
}

// takeBackup stores the owner's copy of a write made in the current
// epoch.
func (n *node) takeBackup(w http.ResponseWriter, r *http.Request) {
	epoch, err := epochOf(r)
	if err != nil || epoch == 0 {
		http.Error(w, "kv: a backup needs its epoch", http.StatusBadRequest)
		return
	}
	var batch map[string]entry
	if err := json.NewDecoder(io.LimitReader(r.Body, 2<<20)).Decode(&batch); err != nil {
		http.Error(w, "kv: malformed backup: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !n.await(r.Context(), epoch, false) {
		http.Error(w, "kv: not in epoch "+strconv.FormatUint(epoch, 10), http.StatusServiceUnavailable)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.view.Epoch != epoch {
		http.Error(w, fmt.Sprintf("kv: epoch %d is past (now %d)", epoch, n.view.Epoch), http.StatusConflict)
		return
	}
	n.mergeLocked(batch)
}

// await waits until n's epoch is at least epoch (and, with ready, n
// serves it) or ctx is done.
func (n *node) await(ctx context.Context, epoch uint64, ready bool) bool {
	for {
		n.mu.Lock()
		ok, closed, ch := n.view.Epoch >= epoch && (n.ready || !ready), n.closed, n.changed
		n.mu.Unlock()
		if ok || closed {
			return ok && !closed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

var errRetry = errors.New("kv: the view changed; retry")

// serveKey answers a read (value "") or a write of key: as its owner in
// the current epoch, or by forwarding to the owner. A request waits
// (within its deadline) for this replica to serve the current epoch, and
// for a newer view when the owner is unreachable or acts in a later
// epoch.
func (n *node) serveKey(w http.ResponseWriter, r *http.Request, key, value string) {
	write := r.Method == "PUT"
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	minEpoch, err := epochOf(r)
	if err != nil {
		http.Error(w, "kv: bad epoch header", http.StatusBadRequest)
		return
	}
	forwarded := r.Header.Get(hdrFrom) != ""
	for {
		if !n.await(ctx, minEpoch, true) {
			http.Error(w, "kv: no view to serve "+key+" in", http.StatusServiceUnavailable)
			return
		}
		n.mu.Lock()
		v := n.view
		owner, backup := placement(v, key)
		if owner != n.name {
			n.mu.Unlock()
			if forwarded { // the forwarder's view is older than ours
				w.Header().Set(hdrEpoch, strconv.FormatUint(v.Epoch, 10))
				http.Error(w, "kv: not the owner of "+key, http.StatusConflict)
				return
			}
			status, body, hdr, err := n.forward(ctx, r, v, owner, value)
			if err == nil && status != http.StatusConflict && status != http.StatusServiceUnavailable {
				w.WriteHeader(status)
				w.Write(body)
				return
			}
			minEpoch = max(v.Epoch+1, hdr) // wait for a view that changes the answer
			continue
		}
		n.log.Printf("serve epoch=%d key=%s", v.Epoch, key)
		if !write {
			e, ok := n.data[key]
			n.mu.Unlock()
			if !ok {
				http.Error(w, "kv: no key "+key, http.StatusNotFound)
				return
			}
			io.WriteString(w, e.Value)
			return
		}
		n.seq++
		e := entry{Value: value, Epoch: v.Epoch, Seq: n.seq}
		n.data[key] = e
		n.mu.Unlock()
		if err := n.backUp(v, backup, key, e); err != nil {
			if forwarded {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			minEpoch = v.Epoch + 1
			continue
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
}

// backUp copies a write to the key's backup in v.
func (n *node) backUp(v group.View, backup, key string, e entry) error {
	if backup == "" {
		return nil // a view of one
	}
	m, _ := memberNamed(v, backup)
	body, _ := json.Marshal(map[string]entry{key: e})
	if err := n.post(httpBase(m)+"/internal/backup", v.Epoch, body); err != nil {
		return fmt.Errorf("%w: %v", errRetry, err)
	}
	return nil
}

// forward sends the request to owner, acting in v's epoch, and returns
// its answer, and the owner's epoch when it answers that it is not the
// owner.
func (n *node) forward(ctx context.Context, r *http.Request, v group.View, owner, value string) (int, []byte, uint64, error) {
	m, _ := memberNamed(v, owner)
	var body io.Reader
	if r.Method == "PUT" {
		body = bytes.NewReader([]byte(value))
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, httpBase(m)+"/kv/"+url.PathEscape(r.PathValue("key")), body)
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set(hdrEpoch, strconv.FormatUint(v.Epoch, 10))
	req.Header.Set(hdrFrom, n.name)
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20+1))
	their, _ := strconv.ParseUint(resp.Header.Get(hdrEpoch), 10, 64)
	return resp.StatusCode, b, their, err
}

func memberNamed(v group.View, name string) (group.Member, bool) {
	for _, m := range v.Members {
		if m.Name == name {
			return m, true
		}
	}
	return group.Member{}, false
}

// close stops n from serving: waiting requests give up.
func (n *node) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	n.signalLocked()
}

func joinNames(names []string) string {
	var b bytes.Buffer
	for i, s := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}
