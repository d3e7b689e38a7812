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
// progress are bounded per listener and per source, and their refusals are
// logged at a bounded rate.

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
// (either negative: no bound; the Unix socket has no bound per source).
type handshakeGate struct {
	max, perSource int

	mu       sync.Mutex
	total    int
	bySource map[string]int
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
	ok, suppressed := t.refusals.allow(source, time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		t.log.Warn(msg, "remote", remote, "err", err, "unlogged", suppressed)
		return
	}
	t.log.Warn(msg, "remote", remote, "err", err)
}
