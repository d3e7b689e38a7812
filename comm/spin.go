package comm

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Polling before parking. A rank waiting for a message that is a few
// microseconds away loses more to parking its goroutine and being woken by
// the reader goroutine (a futex wake of an idle thread) than the wait
// itself; spinning briefly on the request instead keeps the goroutine
// running. It only pays when every rank has a core to itself: on an
// oversubscribed host the spinner takes the core the sender or the reader
// needs. So it is off by default.

// A blocking wait polls the transport too, where it can: a rank whose
// peers on its host talk to it over shared memory reads their frames on
// the waiting goroutine (transport/tcp's PollUntil) for the readers'
// polling time (COHORT_POLL, init.go), so that the message it waits for
// is not handed over by the connection's reader goroutine. It is not
// done on a replicated rank: the two masters of a replicated pair
// mostly share one CPU (a doorbell's wake-up places the woken process
// on the waker's), where a polling master holds the core its peer needs
// to answer (docs/PERFORMANCE.md, "Replication").
type progresser interface {
	PollUntil(word *atomic.Uint32, mask uint32, d time.Duration) bool
}

// MaxSpin bounds [Session.SetSpin].
const MaxSpin = 10 * time.Millisecond

// spinEnv names the environment variable Init and Local read: a duration
// ("20us"), "0" or "off", or "auto" (20 µs when the machine has at least
// two CPUs per rank of the job — the waiting goroutine and the reader
// goroutine that completes its request each need one — off otherwise).
// Measured on 2 cores with 2 ranks (processes), 20 µs of polling made the
// 8 B and 1 KiB ping-pong 1.7× slower than parking: the spinner takes the
// core its own reader needs.
const spinEnv = "COHORT_SPIN"

// autoSpin is the spin of "auto".
const autoSpin = 20 * time.Microsecond

// SetSpin sets how long a blocking wait (Recv, Send, Request.Wait, the
// collectives' steps) polls its request before parking: 0 turns polling
// off (the default unless COHORT_SPIN says otherwise). Use it only when
// each rank of this host has a core to itself. It returns an error for a
// negative value or one above MaxSpin.
func (s *Session) SetSpin(d time.Duration) error {
	if d < 0 || d > MaxSpin {
		return fmt.Errorf("%w: spin %v outside [0, %v]", ErrBadArg, d, MaxSpin)
	}
	s.spin.Store(int64(d))
	return nil
}

// Spin returns the current polling time of blocking waits.
func (s *Session) Spin() time.Duration { return time.Duration(s.spin.Load()) }

// parseSpin reads COHORT_SPIN's value for a job of size ranks.
func parseSpin(v string, size int) (time.Duration, error) {
	switch v {
	case "", "0", "off":
		return 0, nil
	case "auto":
		if runtime.NumCPU() >= 2*size {
			return autoSpin, nil
		}
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxSpin {
		return 0, fmt.Errorf("%w: %s=%q: want a duration in [0, %v], off or auto", ErrBadArg, spinEnv, v, MaxSpin)
	}
	return d, nil
}

// spinFromEnv applies COHORT_SPIN to s; a bad value is logged and ignored
// (polling stays off).
func (s *Session) spinFromEnv() {
	d, err := parseSpin(os.Getenv(spinEnv), s.size)
	if err != nil {
		s.log.Error("comm: ignoring "+spinEnv, "err", err)
		return
	}
	s.spin.Store(int64(d))
}

// poll spins on r for up to the session's spin time and reports whether r
// completed meanwhile.
func (r *Request) poll() bool {
	if r.s == nil {
		return false
	}
	if r.s.prog != nil && r.s.prog.PollUntil(&r.state, reqDone, r.s.progTime) {
		return true
	}
	d := time.Duration(r.s.spin.Load())
	if d <= 0 {
		return false
	}
	deadline := time.Now().Add(d)
	for !r.isDone() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}
