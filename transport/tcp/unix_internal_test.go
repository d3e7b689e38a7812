package tcp

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// The Unix socket names: the listener's and the dialer's agree, a listener
// on every address is named by its port, non-local and host-name addresses
// are not tried, and no name exceeds sun_path.
func TestUnixNames(t *testing.T) {
	const job = "job-test"
	name := func(hostPort string) string { return unixName(job, hostPort) }
	for _, tc := range []struct {
		listen string // the listener's address
		dial   string // the address dialled
		want   []string
	}{
		{"127.0.0.1:7000", "127.0.0.1:7000", []string{name("127.0.0.1:7000"), name("*:7000")}},
		{"[::1]:7000", "[::1]:7000", []string{name("[::1]:7000"), name("*:7000")}},
		{"[::]:7000", "127.0.0.1:7000", []string{name("127.0.0.1:7000"), name("*:7000")}},
		{"0.0.0.0:7000", "0.0.0.0:7000", []string{name("*:7000")}},
		{"127.0.0.1:7000", "192.0.2.1:7000", nil}, // TEST-NET-1: not ours
		{"127.0.0.1:7000", "localhost:7000", nil}, // not resolved
	} {
		got := dialNames(job, tc.dial)
		if !slices.Equal(got, tc.want) {
			t.Errorf("dialNames(%q) = %q, want %q", tc.dial, got, tc.want)
		}
		l := listenName(job, netip.MustParseAddrPort(tc.listen))
		if tc.want != nil && !slices.Contains(got, l) {
			t.Errorf("listener on %s is %q, not among the names dialled for %s %q", tc.listen, l, tc.dial, got)
		}
	}
	if a, b := unixName("a", "127.0.0.1:1"), unixName("b", "127.0.0.1:1"); a == b {
		t.Errorf("two jobs share the name %q", a)
	}
	if n := name("127.0.0.1:1"); strings.Contains(n, job) {
		t.Errorf("name %q shows the job id", n)
	}
	long := unixName(strings.Repeat("j", 255), "[fe80::1%"+strings.Repeat("z", 120)+"]:65535")
	if len(long) > maxUnixName || !strings.HasPrefix(long, "@cohort/") {
		t.Errorf("name %q: %d bytes, limit %d", long, len(long), maxUnixName)
	}
}
