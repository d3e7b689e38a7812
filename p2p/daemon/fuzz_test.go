package daemon

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/cohort-mp/cohort/p2p/stage"
)

// Arbitrary configuration files: Load returns a configuration or an error
// wrapping ErrConfig, never panics, and what it accepts validates.
func FuzzConfig(f *testing.F) {
	f.Add("name = \"n1\"\nlisten = \"10.0.0.1:7950\"\njobs = 2\nprocs_per_job = 4\nhold = \"10s\"\nsupernodes = [\"sn@10.0.0.2:7940\"]\n")
	f.Add("name = 3\n")
	f.Add("hold = \"-1s\"\nname=\"x\"")
	f.Add("[table]\nx = 1")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(dir, "c.toml")
		os.WriteFile(p, []byte(text), 0o600)
		cfg, err := Load(p)
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("Load accepted a configuration Validate refuses: %v", verr)
			}
		}
	})
}

// Arbitrary request bodies and launch requests: a clear refusal or a
// checked request, never a panic.
func FuzzRequests(f *testing.F) {
	f.Add([]byte(`{"program":"p","args":["a"],"env":["A=1"],"ranks":[{"rank":0,"env":["COHORT_RANK=0"]}]}`))
	f.Add([]byte(`{"job":"j","procs":2}`))
	f.Add([]byte(`{"program":"../x","ranks":[{"rank":-1}]}`))
	f.Add([]byte(`{"ranks":[{"rank":0},{"rank":0}],"program":"p"}`))
	root := f.TempDir()
	os.WriteFile(filepath.Join(root, "p"), []byte("x"), 0o700)
	j := &job{dir: stage.Dir{Root: root, MaxFile: 1 << 20, MaxTotal: 1 << 20}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/reserve", bytes.NewReader(body))
		var rr ReserveRequest
		_ = decode(r, &rr)
		r = httptest.NewRequest("POST", "/v1/jobs/x/launch", bytes.NewReader(body))
		var lr LaunchRequest
		if decode(r, &lr) != nil {
			return
		}
		path, err := j.checkLaunch(&lr, 4)
		if err != nil {
			return
		}
		if filepath.Dir(path) != root && !bytes.HasPrefix([]byte(path), []byte(root+"/")) {
			t.Fatalf("checked program %q outside the job's directory %q", path, root)
		}
		if _, err := json.Marshal(lr); err != nil {
			t.Fatal(err)
		}
	})
}
