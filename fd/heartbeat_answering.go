package fd

import (
	"time"

	"github.com/cohort-mp/cohort/core"
)

// A suspect whose link answers ([core.PeerHint] with Answering). On a
// host with more runnable threads than cores the kernel may leave a whole
// process unscheduled for several hundred milliseconds: on 2 cores at a
// load of 13 to 17, the ranks of a 2-rank job were seen starved 60 to
// 210 ms at a time, every few seconds, and now and then long enough for
// the other rank's monitor, running on time, to suspect it and declare
// it failed after the job's T_interval + T_timeout + T_broken of 300 ms
// and its margins. Silence cannot tell that from a crash; the transport
// can: the suspect's host still acknowledges what this process sends it,
// and its process still holds the connection open, which a crashed one
// does not (its host closes its connections, and refuses the next); or,
// for a suspect on this host, its process exists, holds its socket open
// and is runnable or waiting, neither stopped nor a zombie. So
// while the transport says so, the verdict waits for the suspect to
// refute, as long as the stall memory's settling allows and no longer
// than answeringStallMax past T_broken: at most min((1 +
// LocalHealthMax)·T_broken + 2·stallCap, T_broken + answeringStallMax)
// after the suspicion began. The second term keeps the slow presets'
// settling limit (100 s with the default timings) from holding the
// verdict on a stopped or hung process for that long: how long a kernel
// leaves a runnable process waiting does not grow with the detector's
// periods. A process that is only stopped is declared by then (on this
// host, with no hold: the transport does not hint a stopped process); a
// crash shows as a refused connection, a closed socket, or a link that
// stops answering, and the hold ends T_interval + T_timeout after the
// last hint. A host that crashed or was cut off sends no acknowledgement,
// so no hint: its bound is unchanged.
// LocalHealthMax = 0 (the papers' fixed timeouts) ignores the hints.

// answering records a hint that id's link answers, if id is suspected
// (not from a refused connection), and moves its verdict.
func (h *HeartbeatDetector) answering(id core.NodeID) {
	r := h.find(id)
	if r == nil || r.state != HeartbeatSuspected || r.flags&hbRefused != 0 || !h.health.on() {
		return
	}
	r.answeredAt = h.env.Now()
	h.schedule(r)
}

// answeringStallMax is the longest scheduling stall an answering link's
// hold covers beyond T_broken: overloaded hosts were seen leaving a
// process off the processor for up to 2 s.
const answeringStallMax = 2 * time.Second

// answerHold is the time before which suspected r is not declared
// failed because its link answered lately (0: no hold): T_interval +
// T_timeout after the last hint of this suspicion, the time for the next
// to come, within the settling limit after the suspicion began.
func (h *HeartbeatDetector) answerHold(r *hbPeer) time.Duration {
	if r.answeredAt <= 0 || r.answeredAt < r.mark || r.flags&hbRefused != 0 || !h.health.on() {
		return 0
	}
	limit := r.mark + min(h.cfg.Broken*time.Duration(1+h.cfg.LocalHealthMax)+2*h.stallCap(), h.cfg.Broken+answeringStallMax)
	return min(r.answeredAt+h.cfg.Interval+h.cfg.Timeout, limit)
}
