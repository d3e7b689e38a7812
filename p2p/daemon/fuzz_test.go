package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	f.Add("name = \"n\"\njob_uids = \"61000-61999\"\njob_pids = 64\njob_memory_mb = 512\n")
	f.Add("name = \"n\"\njob_uids = \"9-1\"\njob_pids = -1\n")
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

// Arbitrary request bodies (reserve, release, launch): a clear refusal
// or a checked request, never a panic.
func FuzzRequests(f *testing.F) {
	f.Add([]byte(`{"program":"p","args":["a"],"env":["A=1"],"ranks":[{"rank":0,"env":["COHORT_RANK=0"]}]}`))
	f.Add([]byte(`{"job":"j","procs":2}`))
	f.Add([]byte(`{"rank":3}`))
	f.Add([]byte(`{"program":"../x","ranks":[{"rank":-1}]}`))
	f.Add([]byte(`{"ranks":[{"rank":0},{"rank":0}],"program":"p"}`))
	root := f.TempDir()
	os.WriteFile(filepath.Join(root, "p"), []byte("x"), 0o700)
	j := &job{dir: stage.Dir{Root: root, MaxFile: 1 << 20, MaxTotal: 1 << 20}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/reserve", bytes.NewReader(body))
		var rr ReserveRequest
		_ = decode(r, &rr)
		r = httptest.NewRequest("POST", "/v1/release", bytes.NewReader(body))
		var rel struct {
			Token string `json:"token"`
		}
		_ = decode(r, &rel)
		if sr, err := decodeStop(bytes.NewReader(body)); err == nil && (sr.Rank < 0 || sr.Rank >= maxProcNumber) {
			t.Fatalf("stop request %q accepted with process %d out of range", body, sr.Rank)
		}
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

// Arbitrary staging requests through the daemon's handler: the query
// (path, size, sha256, exec) and body as a client sends them. The answer
// is a success or a refusal, never a panic; whatever lands is a regular
// file or directory beneath the job's directory, and the job's limit
// holds.
func FuzzStageRequest(f *testing.F) {
	body := []byte("hello\n")
	sum := sha256.Sum256(body)
	f.Add("path=a/b.txt&size=6&sha256="+hex.EncodeToString(sum[:]), body)
	f.Add("path=p&size=6&exec=1&sha256="+hex.EncodeToString(sum[:]), body)
	f.Add("path=../x&size=1&sha256=00", []byte("x"))
	f.Add("path=a&size=-1", []byte{})
	f.Add("path=%00&size=99999999999999999999", []byte{})
	f.Add("path=a/./b//c&size=0&sha256="+hex.EncodeToString(make([]byte, 32)), []byte{})
	root := f.TempDir()
	work, err := openWorkDir(filepath.Join(root, "work"), false)
	if err != nil {
		f.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.MaxFileMB, cfg.MaxJobMB = "d1", 1, 1
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), work: work, jobs: map[string]*job{}}
	d.m = newMetrics(d)
	jobDir := filepath.Join(root, "work", "job-x")
	f.Fuzz(func(t *testing.T, query string, body []byte) {
		os.RemoveAll(jobDir)
		if err := os.Mkdir(jobDir, 0o700); err != nil {
			t.Fatal(err)
		}
		j := &job{d: d, token: "t", submitter: "alice", ended: make(chan struct{}),
			dir: stage.Dir{Root: jobDir, Anchor: work, MaxFile: 1 << 20, MaxTotal: 1 << 20}}
		d.jobs["t"] = j
		r := &http.Request{Method: "PUT", URL: &url.URL{Path: "/v1/jobs/t/files", RawQuery: query},
			Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		r = r.WithContext(context.Background())
		r.SetPathValue("token", "t")
		w := httptest.NewRecorder()
		d.stageFile(w, r, "alice")
		if w.Code != http.StatusOK && w.Body.Len() == 0 {
			t.Fatalf("refusal %d without a reason", w.Code)
		}
		var total int64
		err := filepath.WalkDir(jobDir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			if !info.IsDir() && !info.Mode().IsRegular() {
				t.Errorf("staged %s, of mode %v", p, info.Mode())
			}
			total += info.Size()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if total > 1<<20 {
			t.Errorf("%d bytes staged past the job's limit", total)
		}
		if ents, _ := os.ReadDir(filepath.Join(root, "work")); len(ents) != 1 {
			t.Errorf("the work directory holds %d entries, want the job's alone", len(ents))
		}
	})
}
