package tcp

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Admission of inbound connections before their handshake: a connection
// that has not proved the secret costs a goroutine and a socket until its
// handshake ends (at most Config.HandshakeTimeout), so the handshakes in
// progress are bounded per listener and per source, the refusals of a
// listener are bounded per second, and they are logged at a bounded rate.

// sourceOf names where an accepted connection comes from, for the bound
// per source and the logs: its IP over TCP (any port), its user over a
// Unix socket.
func sourceOf(nc net.Conn) string {
	if _, ok := nc.(*net.UnixConn); ok {
		if uid, _, ok := peerCred(nc); ok {
			return "uid " + strconv.Itoa(uid)
		}
		return "unix"
	}
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap().String()
	}
	return nc.RemoteAddr().String()
}

// handshakeGate counts one listener's handshakes in progress, in all and
// per source, against Config.MaxHandshakes and MaxHandshakesPerSource
// (either negative: no bound; the Unix socket has no bound per source),
// and keeps its budget of refusals. Its accept loop and the goroutines of
// its handshakes share it.
type handshakeGate struct {
	max, perSource int

	mu       sync.Mutex
	total    int
	bySource map[string]int
	budget   refusalBudget
}

func newHandshakeGate(cfg Config) *handshakeGate {
	return &handshakeGate{max: cfg.MaxHandshakes, perSource: cfg.MaxHandshakesPerSource, bySource: map[string]int{}}
}

// enter counts a handshake from source, unless a bound is reached; it
// reports whether it did. A counted handshake is given back by leave.
func (g *handshakeGate) enter(source string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max >= 0 && g.total >= g.max {
		return false
	}
	if g.perSource >= 0 && g.bySource[source] >= g.perSource {
		return false
	}
	g.total++
	g.bySource[source]++
	return true
}

// refused spends a refusal of the listener's budget at now: a connection
// enter refused, or whose handshake failed.
func (g *handshakeGate) refused(now time.Time) {
	g.mu.Lock()
	g.budget.take(now)
	g.mu.Unlock()
}

// pause returns how long the listener waits, from now, before it accepts
// another connection: 0 while its budget of refusals allows one more.
func (g *handshakeGate) pause(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.budget.wait(now)
}

// refusal describes the bounds, for the log of a connection enter refused.
func (g *handshakeGate) refusal() error {
	var bounds []string
	if g.max >= 0 {
		bounds = append(bounds, fmt.Sprintf("%d in all", g.max))
	}
	if g.perSource >= 0 {
		bounds = append(bounds, fmt.Sprintf("%d from one source", g.perSource))
	}
	return fmt.Errorf("%w: at most %s handshakes in progress", ErrHandshake, strings.Join(bounds, " and "))
}

// leave gives back a handshake from source that enter counted.
func (g *handshakeGate) leave(source string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if n := g.bySource[source] - 1; n > 0 {
		g.bySource[source] = n
	} else {
		delete(g.bySource, source)
	}
}

// refusalLogInterval is the least time between two logged refusals of one
// source: a source that keeps failing handshakes (or keeps being turned
// away by the bounds) costs one log line per interval, which says how many
// refusals were not logged since the previous one. Stats counts them all.
const refusalLogInterval = 10 * time.Second

// maxLogSources bounds the sources whose refusals logLimiter tracks; past
// it, the sources whose interval has passed are forgotten, and if that is
// not enough, every other source shares one entry (many sources at once
// are an attack whose details the count tells well enough).
const maxLogSources = 1024

// otherSources is the shared entry of the sources beyond maxLogSources.
const otherSources = "(other sources)"

// logLimiter decides which refusals are logged: at most one per source
// per refusalLogInterval.
type logLimiter struct {
	mu      sync.Mutex
	sources map[string]*logState
}

type logState struct {
	next       time.Time // when the next refusal may be logged
	suppressed int       // refusals not logged since the last line
}

// allow reports whether a refusal of source at now is logged and, if it
// is, how many of its refusals were not since the previous line.
func (l *logLimiter) allow(source string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources == nil {
		l.sources = map[string]*logState{}
	}
	s := l.sources[source]
	if s == nil {
		if len(l.sources) >= maxLogSources {
			for k, v := range l.sources {
				if !now.Before(v.next) && v.suppressed == 0 {
					delete(l.sources, k)
				}
			}
		}
		if len(l.sources) >= maxLogSources {
			source = otherSources
			s = l.sources[source]
		}
		if s == nil {
			s = &logState{}
			l.sources[source] = s
		}
	}
	if now.Before(s.next) {
		s.suppressed++
		return false, 0
	}
	suppressed = s.suppressed
	s.next, s.suppressed = now.Add(refusalLogInterval), 0
	return true, suppressed
}

// logRefusal logs the refusal of a connection from source (remote
// describes it) at Warn, at most once per source per refusalLogInterval.
func (t *Transport) logRefusal(msg, source, remote string, err error) {
	t.logRefusalOf(msg, source, func() (string, error) { return remote, err })
}

// logRefusalOf is logRefusal with the connection described by describe,
// called only for a line that is logged: under a flood nearly every
// refusal goes unlogged, and its description would be built in vain.
func (t *Transport) logRefusalOf(msg, source string, describe func() (remote string, err error)) {
	ok, suppressed := t.refusals.allow(source, time.Now())
	if !ok {
		return
	}
	remote, err := describe()
	if suppressed > 0 {
		t.log.Warn(msg, "remote", remote, "err", err, "unlogged", suppressed)
		return
	}
	t.log.Warn(msg, "remote", remote, "err", err)
}

// refusalRate is how many connections a second one listener refuses at
// most, shed or refused at their handshake, after a burst of
// refusalBurst: at a few tens of microseconds each (an accept and a reset,
// or a handshake up to its proof's check), a few percent of a core
// whatever a flood's rate. While the budget is spent the listener accepts
// nothing, and connections wait in the kernel's accept queue (acceptLoop).
const (
	refusalRate  = 200
	refusalBurst = 64
)

// refusalInterval is the budget's time per refusal.
const refusalInterval = time.Second / refusalRate

// refusalBudget is a listener's budget of refusals, a token bucket kept as
// the time at which it would be full again (the generic cell rate
// algorithm): a refusal at now is within it while
// full - now ≤ (refusalBurst-1)·refusalInterval.
type refusalBudget struct {
	full time.Time // the zero time: full now
}

// wait returns how long to wait, from now, for a refusal to be within the
// budget: 0 if one is.
func (b *refusalBudget) wait(now time.Time) time.Duration {
	if !b.full.After(now) {
		return 0 // and full.Sub(now) may be too far back to be a Duration
	}
	if d := b.full.Sub(now) - (refusalBurst-1)*refusalInterval; d > 0 {
		return d
	}
	return 0
}

// take spends a refusal at now (wait may have said to wait first; take
// spends it anyway, and the next wait is longer).
func (b *refusalBudget) take(now time.Time) {
	if b.full.Before(now) {
		b.full = now
	}
	b.full = b.full.Add(refusalInterval)
}
