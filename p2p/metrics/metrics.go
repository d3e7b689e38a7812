// Package metrics is the little the middleware's daemons need of
// Prometheus: named counters and gauges, served in Prometheus's text
// exposition format (version 0.0.4) on /metrics. No client library: a
// handful of integers does not justify one.
package metrics

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
)

// Set is a set of metrics, safe for concurrent use.
type Set struct {
	mu      sync.Mutex
	entries []entry
}

type entry struct {
	name, help, kind string
	value            func() int64
}

// Counter adds a counter (a name ending in _total, by Prometheus's
// conventions) and returns it.
func (s *Set) Counter(name, help string) *atomic.Int64 {
	c := new(atomic.Int64)
	s.add(entry{name, help, "counter", c.Load})
	return c
}

// Gauge adds a gauge read from value when served.
func (s *Set) Gauge(name, help string, value func() int64) {
	s.add(entry{name, help, "gauge", value})
}

func (s *Set) add(e entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, e)
}

// Handler serves the set on GET /metrics.
func (s *Set) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		s.mu.Lock()
		entries := append([]entry(nil), s.entries...)
		s.mu.Unlock()
		for _, e := range entries {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", e.name, e.help, e.name, e.kind, e.name, e.value())
		}
	})
	return mux
}
