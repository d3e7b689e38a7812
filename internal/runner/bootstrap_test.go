package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/internal/tracker"

	"github.com/cohort-mp/cohort/core"
)

const goodSecret = "00112233445566778899aabbccddeeff"

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func goodEnv() map[string]string {
	return map[string]string{
		EnvJobID:  "job-1",
		EnvNodeID: "1",
		EnvNodes:  "0=127.0.0.1:7000, 1=127.0.0.1:7001,2=localhost:7002",
		EnvSecret: goodSecret,
	}
}

func TestLoadBootstrap(t *testing.T) {
	b, err := LoadBootstrap(env(goodEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if b.JobID != "job-1" || b.Self != 1 || len(b.Secret) != 16 || b.Addr(1) != "127.0.0.1:7001" || b.Addr(2) != "localhost:7002" {
		t.Fatalf("got %+v", b)
	}
	if got := FormatNodes(b.Peers); got != "0=127.0.0.1:7000,1=127.0.0.1:7001,2=localhost:7002" {
		t.Fatalf("FormatNodes = %q", got)
	}
	// Environ round-trips.
	m := map[string]string{}
	for _, kv := range b.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	b2, err := LoadBootstrap(env(m))
	if err != nil || b2.Self != b.Self || FormatNodes(b2.Peers) != FormatNodes(b.Peers) || string(b2.Secret) != string(b.Secret) {
		t.Fatalf("round trip: %+v, %v", b2, err)
	}
}

func TestLoadBootstrapFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nodes")
	text := "# the job's nodes\n0=127.0.0.1:7000   # the root\n\n1=127.0.0.1:7001\r\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	e := goodEnv()
	e[EnvNodes] = path
	b, err := LoadBootstrap(env(e))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.IDs(); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("ids %v", got)
	}
}

// TestLoadBootstrapErrors: every malformed environment is an error that
// wraps ErrBootstrap and names the variable or the entry at fault.
func TestLoadBootstrapErrors(t *testing.T) {
	cases := []struct {
		name, key, value, want string
	}{
		{"no job", EnvJobID, "", "COHORT_JOB_ID is not set"},
		{"long job", EnvJobID, strings.Repeat("j", 300), "COHORT_JOB_ID is 300 bytes long"},
		{"no id", EnvNodeID, "", "COHORT_NODE_ID is not set"},
		{"bad id", EnvNodeID, "one", `COHORT_NODE_ID="one"`},
		{"reserved id", EnvNodeID, "4294967295", "reserved"},
		{"unknown id", EnvNodeID, "7", "COHORT_NODE_ID=7 is not listed in COHORT_NODES (listed: n0–n2)"},
		{"no nodes", EnvNodes, "", "COHORT_NODES is not set"},
		{"missing file", EnvNodes, "/nonexistent/nodes", "names no readable file"},
		{"no port", EnvNodes, "0=127.0.0.1,1=127.0.0.1:2", "missing port"},
		{"port zero", EnvNodes, "0=127.0.0.1:0,1=127.0.0.1:2", `port "0"`},
		{"no host", EnvNodes, "0=:80,1=127.0.0.1:2", "no host"},
		{"dup", EnvNodes, "1=127.0.0.1:1,1=127.0.0.1:2", "listed twice"},
		{"no eq", EnvNodes, "1=127.0.0.1:1 2:127.0.0.1:2", "want id=host:port"},
		{"no secret", EnvSecret, "", "COHORT_SECRET is not set"},
		{"bad hex", EnvSecret, "zz112233445566778899aabbccddeeff", "COHORT_SECRET is not hex"},
		{"short secret", EnvSecret, "0011", "COHORT_SECRET has 2 bytes, want at least 16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := goodEnv()
			e[c.key] = c.value
			_, err := LoadBootstrap(env(e))
			if !errors.Is(err, ErrBootstrap) {
				t.Fatalf("err = %v, want ErrBootstrap", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestFormatIDs(t *testing.T) {
	for _, c := range []struct {
		ids  []core.NodeID
		want string
	}{
		{nil, ""},
		{[]core.NodeID{3}, "n3"},
		{[]core.NodeID{5, 4}, "n4 n5"},
		{[]core.NodeID{9, 0, 1, 2, 3, 5, 7, 8}, "n0–n3 n5 n7–n9"},
	} {
		if got := tracker.FormatIDs(c.ids); got != c.want {
			t.Errorf("tracker.FormatIDs(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
}
