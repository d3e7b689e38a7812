package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// One process of a running job stopped (POST /v1/jobs/TOKEN/stop, a
// StopRequest): the submitter of a job asks for it when the others
// excluded that process from the job (their detectors took it for
// failed while it was stopped, starved or cut off) and have all ended,
// so that nobody is left to tell it (package launch, excluded.go). The
// daemon sends SIGTERM to the process's group, then SIGKILL if it still
// runs after the grace period, as it stops a whole job; the process's
// exit comes on the job's launch stream as any other. A process that has
// ended already is no error: its exit is on the stream, or on its way.
//
// Refused: a token this caller does not hold (unknown, or another
// submitter's), a job not launched, a job that ended or is stopping, a
// malformed request (a missing or out-of-range process number, unknown
// fields, anything after the request), a process the job does not have
// here.

// StopRequest asks a daemon to stop one process of a running job.
type StopRequest struct {
	// Rank is the process's number in the job (replica·N + rank, a spare's
	// or a restart's number), as in its LaunchRank.
	Rank int `json:"rank"`
}

// maxProcNumber bounds a process number: every process of the largest
// job, its spares included, and every restart.
const maxProcNumber = launch.MaxSize + launch.MaxNewcomers

// decodeStop reads a StopRequest: one JSON object with a rank in range
// and nothing else.
func decodeStop(body io.Reader) (StopRequest, error) {
	var raw struct {
		Rank *int `json:"rank"`
	}
	dec := json.NewDecoder(io.LimitReader(body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return StopRequest{}, fmt.Errorf("malformed stop request: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return StopRequest{}, errors.New("malformed stop request: data after the request")
	}
	switch {
	case raw.Rank == nil:
		return StopRequest{}, errors.New("malformed stop request: no process number (rank)")
	case *raw.Rank < 0 || *raw.Rank >= maxProcNumber:
		return StopRequest{}, fmt.Errorf("malformed stop request: process %d, want 0 to %d", *raw.Rank, maxProcNumber-1)
	}
	return StopRequest{Rank: *raw.Rank}, nil
}

func (d *Daemon) stopProc(w http.ResponseWriter, r *http.Request, name string) {
	token := r.PathValue("token")
	j, err := d.lookup(token, name)
	if err != nil {
		if why := d.endedFor(token, name); why != "" {
			d.refuse(w, r, http.StatusGone, "stop", fmt.Errorf("%w (%s)", errJobEnded, why))
			return
		}
		d.refuse(w, r, http.StatusNotFound, "stop", err)
		return
	}
	sr, err := decodeStop(r.Body)
	if err != nil {
		d.refuse(w, r, http.StatusBadRequest, "stop", err)
		return
	}
	status, err := j.stopOne(sr.Rank)
	if err != nil {
		d.refuse(w, r, status, "stop", err)
		return
	}
	d.log.Info("daemon: stopping one process", "submitter", name, "job", j.name, "rank", sr.Rank)
	writeJSON(w, struct{}{})
}

// stopOne stops process rank of the launched job j: SIGTERM now, SIGKILL
// after the grace period unless it ended (or the job's own stop took
// over). On a refusal it returns the HTTP status that says why.
func (j *job) stopOne(rank int) (int, error) {
	j.mu.Lock()
	var p *proc
	for _, q := range j.procs {
		if q.rank == rank {
			p = q
		}
	}
	switch {
	case j.why != "":
		j.mu.Unlock()
		return http.StatusGone, fmt.Errorf("%w (%s)", errJobEnded, j.why)
	case j.run == nil:
		j.mu.Unlock()
		return http.StatusConflict, errors.New("the job is not launched: only a running job's process is stopped")
	case p == nil:
		j.mu.Unlock()
		return http.StatusNotFound, fmt.Errorf("process %d is not the job's here", rank)
	}
	ended := j.ended
	j.mu.Unlock()
	select {
	case <-p.done:
		return 0, nil
	default:
	}
	signalGroup(p, syscall.SIGTERM)
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-ended: // the job's stop kills what is left
		case <-t.C:
			signalGroup(p, syscall.SIGKILL)
		}
	}()
	return 0, nil
}
