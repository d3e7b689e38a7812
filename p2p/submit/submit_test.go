package submit

import (
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/place"
)

// TestConfigEnv: Env entries must be NAME=value without a NUL byte; a bad
// one is refused before anything is asked of a supernode, and named.
func TestConfigEnv(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string // "" = accepted; else a part of the error
	}{
		{nil, ""},
		{[]string{"A=1", "COHORT_EVENTS=/tmp/x", "EMPTY="}, ""},
		{[]string{"A=b=c"}, ""},
		{[]string{"NOEQUALS"}, `"NOEQUALS": want NAME=value`},
		{[]string{"=value"}, `"=value": want NAME=value`},
		{[]string{"A=1", "B=x\x00y"}, "NUL byte"},
	} {
		cfg := Config{N: 2, Strategy: place.Spread, Supernodes: []string{"sn@127.0.0.1:7940"}, Creds: &ca.Credentials{}, Program: "prog", Env: tc.env}
		err := cfg.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Env %q: %v, want accepted", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Env %q: error %v, want one with %q", tc.env, err, tc.want)
		}
	}
}

// TestConfigSpares: spares count among the processes, are never
// negative, and do not go with replicas.
func TestConfigSpares(t *testing.T) {
	for _, tc := range []struct {
		n, replicas, spares int
		want                string // "" = accepted; else a part of the error
	}{
		{4, 0, 2, ""},
		{4, 1, 1, ""},
		{4, 0, -1, "-1 spares for 4 ranks"},
		{4, 2, 1, "spares and replicas do not go together"},
		{1 << 20, 0, 1, "at most 1048576 processes"},
	} {
		cfg := Config{N: tc.n, Replicas: tc.replicas, Spares: tc.spares, Strategy: place.Spread, Supernodes: []string{"sn@127.0.0.1:7940"}, Creds: &ca.Credentials{}, Program: "prog"}
		err := cfg.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("-n %d -r %d --spares %d: %v, want accepted", tc.n, tc.replicas, tc.spares, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("-n %d -r %d --spares %d: error %v, want one with %q", tc.n, tc.replicas, tc.spares, err, tc.want)
		}
	}
}
