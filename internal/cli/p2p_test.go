package cli

import (
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
}
