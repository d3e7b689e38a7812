package comm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport/tcp"
)

func TestParseOff(t *testing.T) {
	for _, c := range []struct {
		v      string
		noUnix bool
		bad    bool
	}{
		{"", false, false}, {"on", false, false}, {"1", false, false},
		{"off", true, false}, {"OFF", true, false}, {"0", true, false}, {"no", true, false},
		{"maybe", false, true},
	} {
		off, err := parseOff(shmEnv, c.v)
		if off != c.noUnix || c.bad != (err != nil) || (err != nil && !errors.Is(err, ErrBadArg)) {
			t.Errorf("parseOff(%q) = %v, %v; want %v, error %v", c.v, off, err, c.noUnix, c.bad)
		}
		if err != nil && !strings.Contains(err.Error(), shmEnv) {
			t.Errorf("parseOff's error %q does not name %s", err, shmEnv)
		}
	}
}

// COHORT_UNIX chooses how ranks of one host connect: by default every
// connection of the job runs over the transport's Unix sockets, with "off"
// none does (loopback TCP); messages flow either way.
func TestUnixEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		unix bool
	}{{"", true}, {"off", false}} {
		t.Run(unixEnv+"="+c.env, func(t *testing.T) {
			t.Setenv(unixEnv, c.env)
			ss := tcpJob(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := ss[0].World().Send(ctx, []byte("ping"), 1, 5); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 8)
			if st, err := ss[1].World().Recv(ctx, buf, 0, 5); err != nil || string(buf[:st.Count]) != "ping" {
				t.Fatalf("Recv = %v, %v (%q)", st, err, buf)
			}
			for r, s := range ss {
				// A connection carries frames a moment before the
				// transport counts it: wait for the count, bounded.
				var st tcp.Stats
				for {
					st = s.tr.(*tcp.Transport).Stats()
					if st.Established > 0 || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Millisecond)
				}
				want := st.Established
				if !c.unix {
					want = 0
				}
				if st.Established == 0 || st.Unix != want {
					t.Fatalf("rank %d: %d of %d connections over Unix, want %d", r, st.Unix, st.Established, want)
				}
			}
		})
	}
}

// A connection's reader polls only when every rank of the host has a
// core: otherwise it would take the core another rank needs.
func TestReaderSpinFor(t *testing.T) {
	for _, c := range []struct {
		cpus, local int
		want        time.Duration
	}{{2, 1, readerSpin}, {2, 2, readerSpin}, {2, 3, 0}, {8, 16, 0}, {16, 16, readerSpin}} {
		if got := readerSpinFor(c.cpus, c.local); got != c.want {
			t.Errorf("readerSpinFor(%d cpus, %d ranks) = %v, want %v", c.cpus, c.local, got, c.want)
		}
	}
}

// COHORT_POLL: auto (the default) follows readerSpinFor, off and
// durations are taken as they are, anything else is refused with a clear
// error.
func TestParsePoll(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
		bad  bool
	}{
		{"", readerSpin, false}, {"auto", readerSpin, false}, {"off", 0, false}, {"0", 0, false},
		{"200us", 200 * time.Microsecond, false}, {"10ms", 10 * time.Millisecond, false},
		{"11ms", 0, true}, {"-1us", 0, true}, {"soon", 0, true},
	} {
		got, err := parsePoll(c.v, 2, 2)
		if got != c.want || c.bad != (err != nil) || (err != nil && (!errors.Is(err, ErrBadArg) || !strings.Contains(err.Error(), pollEnv))) {
			t.Errorf("parsePoll(%q) = %v, %v; want %v, error %v", c.v, got, err, c.want, c.bad)
		}
	}
	if got, _ := parsePoll("", 2, 3); got != 0 {
		t.Errorf("parsePoll auto with 3 ranks on 2 cores = %v, want 0", got)
	}
}
