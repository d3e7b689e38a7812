package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/launch"
)

// TestHostsJobCarriesTheJob checks that a job run with --hosts is the job
// the flags describe: --encrypt, -r, --fanout and the rest reach the peers'
// submission as they reach a job on one machine.
func TestHostsJobCarriesTheJob(t *testing.T) {
	cfg := launch.Config{
		N: 6, Replicas: 2, Program: "/bin/prog", Args: []string{"-n", "16"},
		Env: []string{"A=1"}, Fanout: 4, Detector: "heartbeat", Prefix: true, Encrypt: true,
	}
	sc := hostsJob(cfg)
	if !sc.Encrypt {
		t.Error("--encrypt was not passed to the peers' job")
	}
	if sc.N != 6 || sc.Replicas != 2 || sc.Program != "/bin/prog" || len(sc.Args) != 2 ||
		len(sc.Env) != 1 || sc.Fanout != 4 || sc.Detector != "heartbeat" || !sc.Prefix {
		t.Errorf("hostsJob(%+v) = %+v: a setting of the job was lost", cfg, sc)
	}
	cfg = launch.Config{N: 4, Spares: 1, Respawn: 2, Program: "/bin/prog"}
	if sc := hostsJob(cfg); sc.Spares != 1 || sc.Respawn != 2 {
		t.Errorf("hostsJob(%+v) = %+v: --spares or --respawn was lost", cfg, sc)
	}
}

// --dial-out-only takes daemon names and goes with --hosts.
func TestDialOutOnlyFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"d1", []string{"d1"}, true},
		{"d1, d3", []string{"d1", "d3"}, true},
		{"d1,", nil, false},
		{"d1@10.0.0.5:7950", nil, false},
	} {
		got, err := parseDialOutOnly(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("parseDialOutOnly(%q) = %q, %v; want %q (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	code, _, stderr := run(t, "run", "-n", "2", "--dial-out-only", "d1", "/bin/true")
	if code != 2 || !strings.Contains(stderr, "--dial-out-only names daemons: it goes with --hosts") {
		t.Errorf("--dial-out-only without --hosts: exit %d, %q", code, stderr)
	}
}
