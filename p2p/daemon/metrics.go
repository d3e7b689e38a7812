package daemon

import (
	"sync/atomic"

	"github.com/cohort-mp/cohort/p2p/metrics"
)

// daemonMetrics are the daemon's counters (served on the configuration's
// metrics address).
type daemonMetrics struct {
	set                                                     metrics.Set
	registrations, reservationsGranted, reservationsRefused *atomic.Int64
	launches, exited, stagedBytes                           *atomic.Int64
}

func newMetrics(d *Daemon) *daemonMetrics {
	m := &daemonMetrics{}
	m.registrations = m.set.Counter("cohort_daemon_registrations_total", "Successful registrations with a supernode.")
	m.reservationsGranted = m.set.Counter("cohort_daemon_reservations_granted_total", "Reservations granted.")
	m.reservationsRefused = m.set.Counter("cohort_daemon_reservations_refused_total", "Reservations refused.")
	m.launches = m.set.Counter("cohort_daemon_launches_total", "Jobs launched.")
	m.exited = m.set.Counter("cohort_daemon_processes_exited_total", "Processes of jobs that ended.")
	m.stagedBytes = m.set.Counter("cohort_daemon_staged_bytes_total", "Bytes of staged files.")
	m.set.Gauge("cohort_daemon_running_jobs", "Jobs with processes now.", func() int64 { return int64(d.running()) })
	return m
}
