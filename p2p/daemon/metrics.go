package daemon

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// metrics are the daemon's counters, served in Prometheus's text format.
type metrics struct {
	registrations, reservationsGranted, reservationsRefused atomic.Int64
	launches, exited, stagedBytes                           atomic.Int64
}

func newMetrics() *metrics { return &metrics{} }

func (m *metrics) add(c *atomic.Int64, n int64) { c.Add(n) }

// handler serves /metrics.
func (m *metrics) handler(d *Daemon) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, c := range []struct {
			name, help string
			v          int64
			gauge      bool
		}{
			{"cohort_daemon_registrations_total", "Successful registrations with a supernode.", m.registrations.Load(), false},
			{"cohort_daemon_reservations_granted_total", "Reservations granted.", m.reservationsGranted.Load(), false},
			{"cohort_daemon_reservations_refused_total", "Reservations refused.", m.reservationsRefused.Load(), false},
			{"cohort_daemon_launches_total", "Jobs launched.", m.launches.Load(), false},
			{"cohort_daemon_processes_exited_total", "Processes of jobs that ended.", m.exited.Load(), false},
			{"cohort_daemon_staged_bytes_total", "Bytes of staged files.", m.stagedBytes.Load(), false},
			{"cohort_daemon_running_jobs", "Jobs with processes now.", int64(d.running()), true},
		} {
			kind := "counter"
			if c.gauge {
				kind = "gauge"
			}
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", c.name, c.help, c.name, kind, c.name, c.v)
		}
	})
	return mux
}
