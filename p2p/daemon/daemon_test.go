package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/stage"
	"github.com/cohort-mp/cohort/p2p/supernode"
)

// syncBuf is a log sink safe for the daemon's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type rig struct {
	d         *Daemon
	dir, addr string
	log       *syncBuf
	creds     func(name string) *ca.Credentials
	stop      func()
}

// startDaemon runs a daemon named "d1" on loopback with a fresh CA, P = 2,
// J = 1, allowing only alice.
func startDaemon(t *testing.T, edit func(*Config)) *rig {
	t.Helper()
	dir := t.TempDir()
	if err := ca.Init(dir, "cluster"); err != nil {
		t.Fatal(err)
	}
	issued := map[string]*ca.Credentials{}
	creds := func(name string) *ca.Credentials {
		if c := issued[name]; c != nil {
			return c
		}
		if err := ca.Issue(dir, dir, name); err != nil {
			t.Fatal(err)
		}
		c, err := ca.Load(filepath.Join(dir, "ca.crt"), dir, name)
		if err != nil {
			t.Fatal(err)
		}
		issued[name] = c
		return c
	}
	creds("d1")
	cfg := DefaultConfig()
	cfg.Name, cfg.Listen, cfg.CA, cfg.Certs = "d1", "127.0.0.1:0", filepath.Join(dir, "ca.crt"), dir
	cfg.WorkDir = filepath.Join(dir, "work")
	// The host's registry of cores is the test's own.
	cfg.CoresDir = filepath.Join(dir, "cores")
	if err := os.Mkdir(cfg.CoresDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The test's directory is closed to other uids; TestJobConfined runs
	// jobs under uids of their own.
	cfg.JobUIDs = "none"
	cfg.ProcsPerJob, cfg.Allowed = 2, []string{"alice"}
	cfg.MaxFileMB, cfg.MaxJobMB = 1, 2
	if edit != nil {
		edit(&cfg)
	}
	log := &syncBuf{}
	d, err := New(cfg, slog.New(slog.NewJSONHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, func(a string) { ready <- a }) }()
	r := &rig{d: d, dir: dir, log: log, creds: creds}
	select {
	case r.addr = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	r.stop = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			r.stop()
		}
	})
	return r
}

// stagedJob reserves one slot as alice and stages script as program "p".
func (r *rig) stagedJob(t *testing.T, ctx context.Context, script string) (*Client, ReserveReply) {
	t.Helper()
	alice := NewClient(r.creds("alice"), "d1", r.addr)
	tok, err := alice.Reserve(ctx, "j", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Stage(ctx, tok.Token, fileOf("p", []byte(script), true), strings.NewReader(script)); err != nil {
		t.Fatal(err)
	}
	return alice, tok
}

func fileOf(path string, body []byte, exec bool) stage.File {
	s := sha256.Sum256(body)
	return stage.File{Path: path, Size: int64(len(body)), SHA256: hex.EncodeToString(s[:]), Exec: exec}
}

// A whole job on one daemon: reserve, stage a script, launch two ranks,
// their output and exits come back on the stream, the slots are free
// again afterwards.
func TestReserveStageLaunch(t *testing.T) {
	r := startDaemon(t, nil)
	c := NewClient(r.creds("alice"), "d1", r.addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, _, err := c.Ping(ctx)
	if err != nil || info.Name != "d1" || info.ProcsPerJob != 2 || info.FreeJobs != 1 {
		t.Fatalf("ping: %+v %v", info, err)
	}
	tok, err := c.Reserve(ctx, "job1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve(ctx, "job2", 1); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no free job slot") {
		t.Fatalf("a second job with J = 1: %v", err)
	}
	script := []byte("#!/bin/sh\necho \"rank $RANK of $SECRETISH says $1\"\necho oops >&2\nexit $RANK\n")
	if err := c.Stage(ctx, tok.Token, fileOf("prog.sh", script, true), bytes.NewReader(script)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	exits := map[int]int{}
	err = c.Launch(ctx, tok.Token, LaunchRequest{Program: "prog.sh", Args: []string{"hi"}, Env: []string{"SECRETISH=2"},
		Ranks: []LaunchRank{{Rank: 0, Env: []string{"RANK=0"}}, {Rank: 1, Env: []string{"RANK=1"}}}}, 5*time.Second,
		func(ev Event) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ev.Exited:
				exits[ev.Rank] = ev.Code
			case ev.Out != "":
				lines = append(lines, ev.Out)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(lines, "\n")
	for _, want := range []string{"rank 0 of 2 says hi", "rank 1 of 2 says hi", "oops"} {
		if !strings.Contains(joined, want) {
			t.Errorf("output %q lacks %q", joined, want)
		}
	}
	if exits[0] != 0 || exits[1] != 1 || len(exits) != 2 {
		t.Errorf("exits %v, want 0:0 1:1", exits)
	}
	// The job is over: its token, directory and slot are gone.
	if info, _, _ := c.Ping(ctx); info.FreeJobs != 1 {
		t.Errorf("after the job, %d free job slots, want 1", info.FreeJobs)
	}
	if ents, _ := os.ReadDir(filepath.Join(r.dir, "work")); len(ents) != 0 {
		t.Errorf("job directories left: %v", ents)
	}
	rec := httptest.NewRecorder()
	r.d.m.set.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{"cohort_daemon_reservations_granted_total 1\n", "cohort_daemon_reservations_refused_total 1\n",
		"cohort_daemon_launches_total 1\n", "cohort_daemon_processes_exited_total 2\n", fmt.Sprintf("cohort_daemon_staged_bytes_total %d\n", len(script)),
		"cohort_daemon_running_jobs 0\n"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, rec.Body.String())
		}
	}
}

// Every refusal is answered with its reason and logged: a submitter
// without a certificate, with another CA's, or not allowed; too many
// processes; staging that escapes the directory, is too large or has the
// wrong checksum; a launch of a program never staged; a token of another
// submitter; halting by someone else.
func TestRefusals(t *testing.T) {
	r := startDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// No certificate: the handshake fails.
	pool := r.creds("alice").Pool
	bare := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "d1"}}}
	if resp, err := bare.Get("https://" + r.addr + "/v1/ping"); err == nil {
		resp.Body.Close()
		t.Fatal("a client without a certificate was served")
	}
	// Another CA's certificate: the handshake fails too.
	other := t.TempDir()
	ca.Init(other, "other")
	ca.Issue(other, other, "alice")
	evil, err := ca.Load(filepath.Join(other, "ca.crt"), other, "alice")
	if err != nil {
		t.Fatal(err)
	}
	evil.Pool = pool // it trusts the daemon; the daemon does not trust it
	if _, _, err := NewClient(evil, "d1", r.addr).Ping(ctx); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}
	// A member of the cluster not allowed to submit.
	mallory := NewClient(r.creds("mallory"), "d1", r.addr)
	if _, err := mallory.Reserve(ctx, "j", 1); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("mallory's reservation: %v", err)
	}
	alice := NewClient(r.creds("alice"), "d1", r.addr)
	if _, err := alice.Reserve(ctx, "j", 3); err == nil || !strings.Contains(err.Error(), "accepts 2 per job") {
		t.Fatalf("3 processes with P = 2: %v", err)
	}
	tok, err := alice.Reserve(ctx, "j", 2)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("data")
	for _, c := range []struct {
		f    stage.File
		want string
	}{
		{fileOf("../escape", body, false), "outside"},
		{fileOf("/etc/passwd", body, false), "outside"},
		{fileOf("big", make([]byte, 2<<20), false), "too large"},
		{stage.File{Path: "bad", Size: 4, SHA256: strings.Repeat("0", 64)}, "checksum"},
	} {
		var rd bytes.Reader
		if c.f.Size == 4 {
			rd.Reset(body)
		} else {
			rd.Reset(make([]byte, c.f.Size))
		}
		if err := alice.Stage(ctx, tok.Token, c.f, &rd); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("staging %q: %v, want %q", c.f.Path, err, c.want)
		}
	}
	// A symbolic link planted in the job's directory is not followed.
	jobDirs, _ := filepath.Glob(filepath.Join(r.dir, "work", "job-*"))
	if len(jobDirs) != 1 {
		t.Fatalf("job directories %v", jobDirs)
	}
	os.Symlink("/tmp", filepath.Join(jobDirs[0], "link"))
	if err := alice.Stage(ctx, tok.Token, fileOf("link/x", body, false), bytes.NewReader(body)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("staging through a link: %v", err)
	}
	if err := mallory.Stage(ctx, tok.Token, fileOf("x", body, false), bytes.NewReader(body)); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("staging on alice's token by mallory: %v", err)
	}
	err = alice.Launch(ctx, tok.Token, LaunchRequest{Program: "never", Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(Event) {})
	if err == nil || !strings.Contains(err.Error(), "not staged") {
		t.Errorf("launching a program never staged: %v", err)
	}
	if err := alice.Halt(ctx); err == nil || !strings.Contains(err.Error(), "may not halt") {
		t.Errorf("halt by alice: %v", err)
	}
	logs := r.log.String()
	for _, want := range []string{"not allowed", "outside the job", "too large", "checksum", "may not halt", "certificate"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not give the reason %q:\n%s", want, logs)
		}
	}
	// The daemon itself may halt it.
	if err := NewClient(r.creds("d1"), "d1", r.addr).Halt(ctx); err != nil {
		t.Fatal(err)
	}
}

// A submitter that goes away mid-job: its processes are stopped and the
// slots freed.
func TestSubmitterGoneStopsJob(t *testing.T) {
	r := startDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, tok := r.stagedJob(t, ctx, "#!/bin/sh\necho started\nexec sleep 60\n")
	lctx, lcancel := context.WithCancel(ctx)
	go alice.Launch(lctx, tok.Token, LaunchRequest{Program: "p", Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(ev Event) {
		if ev.Out == "started" {
			lcancel()
		}
	})
	for {
		if info, _, err := alice.Ping(ctx); err == nil && info.FreeJobs == 1 {
			jobs, _ := alice.PS(ctx)
			if len(jobs) == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the job of a submitter gone was not stopped:\n%s", r.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.Contains(r.log.String(), "the submitter went away") {
		t.Errorf("the log does not say why the job stopped:\n%s", r.log.String())
	}
}

// The daemon registers with a supernode and lists the peers it learns,
// with a measured latency to the other daemon; a supernode given by a
// wrong name, or by an address its certificate does not carry, is refused
// (the daemon keeps going and says so).
func TestRegistersAndPings(t *testing.T) {
	dir := t.TempDir()
	ca.Init(dir, "cluster")
	for _, n := range []string{"sn", "d1", "d2"} {
		ca.Issue(dir, dir, n)
	}
	snCreds, err := ca.Load(filepath.Join(dir, "ca.crt"), dir, "sn")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snAddr := make(chan string, 1)
	go supernode.Serve(ctx, supernode.Config{Listen: "127.0.0.1:0", Creds: snCreds, Ready: func(a string) { snAddr <- a }})
	sa := <-snAddr
	// Both daemons need the supernode's CA: build them on dir's CA.
	mk := func(name string, sns ...string) *rig {
		cfg := DefaultConfig()
		cfg.Name, cfg.Listen, cfg.CA, cfg.Certs = name, "127.0.0.1:0", filepath.Join(dir, "ca.crt"), dir
		cfg.WorkDir, cfg.JobUIDs = filepath.Join(t.TempDir(), "w"), "none"
		cfg.Supernodes = sns
		cfg.Refresh, cfg.Ping = Duration{100 * time.Millisecond}, Duration{100 * time.Millisecond}
		log := &syncBuf{}
		d, err := New(cfg, slog.New(slog.NewJSONHandler(log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ready := make(chan string, 1)
		go d.Serve(ctx, func(a string) { ready <- a })
		return &rig{addr: <-ready, log: log}
	}
	a := mk("d1", "sn@"+sa)
	b := mk("d2", "sn@"+sa, "wrongname@"+sa, sa)
	creds, _ := ca.Load(filepath.Join(dir, "ca.crt"), dir, "d1")
	c := NewClient(creds, "d1", a.addr)
	defer c.Close()
	for {
		peers, err := c.Peers(ctx)
		if err == nil && len(peers) == 2 && peers[1].Name == "d2" && peers[1].RTTMicros > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("d1 never listed d2 with a latency: %+v %v", peers, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, want := range []string{"not wrongname", "validate certificate for 127.0.0.1"} {
		if !strings.Contains(b.log.String(), want) {
			t.Errorf("d2 does not say that the supernode was refused (%s):\n%s", want, b.log.String())
		}
	}
}

// A daemon shutting down (SIGTERM: Serve's context done) tells its running
// jobs on their streams and stops their processes: none is orphaned.
func TestShutdownTellsJobs(t *testing.T) {
	r := startDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pidFile := filepath.Join(r.dir, "pid")
	alice, tok := r.stagedJob(t, ctx, "#!/bin/sh\necho $$ > "+pidFile+"\necho started\nexec sleep 60\n")
	var told string
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- alice.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(ev Event) {
			switch {
			case ev.Out == "started":
				go func() { r.stop(); close(stopped) }()
			case ev.Error != "":
				told = ev.Error
			}
		})
	}()
	err := <-done
	<-stopped
	if err == nil {
		t.Fatal("the stream ended as if the job had finished")
	}
	if !strings.Contains(told, "shutting down") {
		t.Errorf("the job was told %q, want that the daemon is shutting down", told)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("no pid written (%q)", b)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d of the job still runs after the daemon's shutdown", pid)
	}
}

// The work directory defaults to the daemon's state directory, and one
// that is a symbolic link or open to others is refused at start.
func TestWorkDirChecked(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip(err)
	}
	want := filepath.Join(home, ".cohort", "work")
	if os.Geteuid() == 0 {
		want = "/var/lib/cohort/work"
	}
	if got := DefaultConfig().WorkDir; got != want {
		t.Errorf("default work_dir = %s, want %s", got, want)
	}
	dir := t.TempDir()
	ca.Init(dir, "cluster")
	ca.Issue(dir, dir, "d1")
	cfg := DefaultConfig()
	cfg.Name, cfg.CA, cfg.Certs = "d1", filepath.Join(dir, "ca.crt"), dir
	cfg.JobUIDs = "none" // the test's directory is closed to other uids

	cfg.WorkDir = filepath.Join(dir, "new", "work")
	if _, err := New(cfg, nil); err != nil {
		t.Fatalf("a missing work_dir: %v", err)
	}
	if st, err := os.Lstat(cfg.WorkDir); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Errorf("the work_dir made: %v %v, want a directory of mode 0700", st.Mode(), err)
	}

	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o755)
	cfg.WorkDir = open
	if _, err := New(cfg, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("a work_dir of mode 0755: %v, want a refusal saying chmod 700", err)
	}

	link := filepath.Join(dir, "link")
	os.Symlink(filepath.Join(dir, "new", "work"), link)
	cfg.WorkDir = link
	if _, err := New(cfg, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a work_dir that is a symbolic link: %v, want a refusal", err)
	}
}

// A job's directory swapped for a symbolic link while its files are being
// staged: the next file is refused with a clear reason and nothing lands
// at the link's target.
func TestStagingThroughSwappedJobDir(t *testing.T) {
	r := startDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := NewClient(r.creds("alice"), "d1", r.addr)
	defer alice.Close()
	tok, err := alice.Reserve(ctx, "j", 1)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("data")
	if err := alice.Stage(ctx, tok.Token, fileOf("a", body, false), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	jobDir := filepath.Join(r.d.cfg.WorkDir, "job-"+tok.Token[:16])
	target := t.TempDir()
	if err := os.Rename(jobDir, jobDir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, jobDir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"b", "sub/b"} {
		err := alice.Stage(ctx, tok.Token, fileOf(p, body, false), bytes.NewReader(body))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("staging %s through the swapped directory: %v, want a refusal naming the link", p, err)
		}
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("staged files landed at the link's target: %v", ents)
	}
}

// A file that trickles in does not hold its job up: while its upload is
// in progress, ps answers and the job can be released, which cuts the
// upload short.
func TestSlowUploadHoldsNothing(t *testing.T) {
	r := startDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := NewClient(r.creds("alice"), "d1", r.addr)
	defer alice.Close()
	tok, err := alice.Reserve(ctx, "j", 1)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 64<<10)
	half := len(body) / 2
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) }) // before the daemon's stop
	staged := make(chan error, 1)
	go func() { staged <- alice.Stage(ctx, tok.Token, fileOf("big", body, false), pr) }()
	if _, err := pw.Write(body[:half]); err != nil {
		t.Fatal(err)
	}
	// The daemon has begun writing the file: its first half is on disk.
	jobDir := filepath.Join(r.d.cfg.WorkDir, "job-"+tok.Token[:16])
	for written := false; !written; {
		ents, _ := os.ReadDir(jobDir)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Size() >= int64(half) {
				written = true
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the first half of the file never reached the job's directory: %v", ents)
		case <-time.After(10 * time.Millisecond):
		}
	}
	jobs, err := alice.PS(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].Job != "j" {
		t.Fatalf("ps during the upload: %+v %v", jobs, err)
	}
	if err := alice.Release(ctx, tok.Token); err != nil {
		t.Fatalf("release during the upload: %v", err)
	}
	if err := <-staged; err == nil {
		t.Errorf("the upload of a released job: %v, want it refused", err)
	}
	if _, err := os.Stat(jobDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the released job's directory is still there: %v", err)
	}
}

// A client that keeps a connection open and idle, or sends a request's
// body and then stalls, has it closed by the daemon after the configured
// timeouts. The read timeout also bounds the TLS handshake, which under
// -race on a loaded machine can take longer than a few hundred
// milliseconds.
func TestIdleAndStalledConnectionsClosed(t *testing.T) {
	r := startDaemon(t, func(c *Config) {
		c.IdleTimeout, c.ReadTimeout = Duration{time.Second}, Duration{time.Second}
	})
	dial := func(t *testing.T) *tls.Conn {
		conn, err := tls.Dial("tcp", r.addr, r.creds("alice").ClientConfig("d1"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// The bound of a failure, not a measure: the server closes long before.
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		return conn
	}
	closed := func(t *testing.T, conn *tls.Conn) {
		t.Helper()
		buf := make([]byte, 4096)
		for {
			_, err := conn.Read(buf)
			if err == nil {
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the daemon kept the connection open")
			}
			return
		}
	}
	t.Run("idle", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprintf(conn, "GET /v1/ping HTTP/1.1\r\nHost: d1\r\n\r\n")
		closed(t, conn)
	})
	t.Run("stalled body", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprintf(conn, "POST /v1/reserve HTTP/1.1\r\nHost: d1\r\nContent-Length: 100\r\n\r\n{")
		closed(t, conn)
	})
}

// A launch stream lives as long as its job, well past the read and write
// timeouts that bound ordinary requests. The timeouts are still long
// enough for the ordinary requests before it (a TLS handshake and a
// request each) under -race on a loaded machine.
func TestLaunchOutlivesRequestTimeouts(t *testing.T) {
	r := startDaemon(t, func(c *Config) {
		c.ReadTimeout, c.WriteTimeout = Duration{time.Second}, Duration{time.Second}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, tok := r.stagedJob(t, ctx, "#!/bin/sh\nsleep 2.5\necho finished\n")
	var out []string
	err := alice.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(ev Event) {
		if ev.Out != "" || ev.Error != "" {
			out = append(out, ev.Out+ev.Error)
		}
	})
	if err != nil || len(out) != 1 || out[0] != "finished" {
		t.Errorf("a job longer than the request timeouts: %q %v, want it finished", out, err)
	}
}

// Submitters are kept apart: job names are each submitter's own, and ps
// shows a submitter its own jobs only, every job to the daemon and its
// admins.
func TestSubmittersSeparated(t *testing.T) {
	r := startDaemon(t, func(c *Config) {
		c.Jobs, c.Allowed, c.Admins = 2, []string{"alice", "bob"}, []string{"carol"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(name string) *Client {
		c := NewClient(r.creds(name), "d1", r.addr)
		t.Cleanup(c.Close)
		return c
	}
	alice, bob := client("alice"), client("bob")
	if _, err := alice.Reserve(ctx, "j", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Reserve(ctx, "j", 1); err != nil {
		t.Fatalf("bob's job named like alice's: %v", err)
	}
	for _, tc := range []struct {
		who  string
		want []string
	}{{"alice", []string{"alice"}}, {"bob", []string{"bob"}}, {"carol", []string{"alice", "bob"}}, {"d1", []string{"alice", "bob"}}, {"mallory", nil}} {
		jobs, err := client(tc.who).PS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, j.Submitter)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s's ps shows the jobs of %v, want %v", tc.who, got, tc.want)
		}
	}
}

// An empty allowed list lets no one submit, with a reason saying how to
// allow them; allow_all trusts every certificate holder, and cannot be
// combined with a list.
func TestAllowedExplicit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := startDaemon(t, func(c *Config) { c.Allowed = nil })
	_, err := NewClient(r.creds("alice"), "d1", r.addr).Reserve(ctx, "j", 1)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "allow_all = true") {
		t.Errorf("a reservation with allowed empty: %v, want a refusal saying how to allow submitters", err)
	}
	r = startDaemon(t, func(c *Config) { c.Allowed, c.AllowAll = nil, true })
	if _, err := NewClient(r.creds("mallory"), "d1", r.addr).Reserve(ctx, "j", 1); err != nil {
		t.Errorf("a reservation with allow_all: %v", err)
	}
	cfg := r.d.cfg
	cfg.Allowed = []string{"alice"}
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("allowed and allow_all together: %v, want ErrConfig", err)
	}
}

// Bad confinement settings are refused by their key.
func TestConfineConfig(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.JobUIDs = "61000" }, "job_uids"},
		{func(c *Config) { c.JobUIDs = "62000-61000" }, "job_uids"},
		{func(c *Config) { c.JobUIDs = "0-10" }, "job_uids"},
		{func(c *Config) { c.JobUIDs = "" }, "job_uids"},
		{func(c *Config) { c.JobUIDs, c.Jobs = "61000-61001", 3 }, "fewer than jobs"},
		{func(c *Config) { c.JobPids = 3 }, "job_pids"},
		{func(c *Config) { c.JobMemoryMB = 0 }, "job_memory_mb"},
		{func(c *Config) { c.CoresDir = "run/cohort" }, "cores_dir"},
	} {
		cfg := DefaultConfig()
		cfg.Name = "d1"
		tc.edit(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("job_uids %q, jobs %d, job_pids %d, job_memory_mb %d: %v, want an error naming %s",
				cfg.JobUIDs, cfg.Jobs, cfg.JobPids, cfg.JobMemoryMB, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.JobUIDs = "d1", "none"
	if err := cfg.Validate(); err != nil {
		t.Errorf("job_uids = \"none\": %v", err)
	}
	for _, dir := range []string{"none", "/run/cohort"} {
		if cfg.CoresDir = dir; cfg.Validate() != nil {
			t.Errorf("cores_dir = %q: %v", dir, cfg.Validate())
		}
	}
}

// A job on a root daemon runs under a uid of the range, in its own
// cgroup, with no_new_privs; a process it detaches into a session of its
// own is killed when the job ends, and the submitter told. Without
// cgroups, its uid alone finds that process. (The attempts of a job to
// break out are internal/multihost's TestJobEscape.)
func TestJobConfined(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: jobs run as the daemon's user, with no uid of their own")
	}
	t.Run("cgroup", func(t *testing.T) { testJobConfined(t, true) })
	t.Run("uid alone", func(t *testing.T) {
		withoutCgroups = true
		defer func() { withoutCgroups = false }()
		testJobConfined(t, false)
	})
}

func testJobConfined(t *testing.T, cgroups bool) {
	work, err := os.MkdirTemp("", "cohort-confine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	os.Chmod(work, 0o711)
	r := startDaemon(t, func(c *Config) { c.WorkDir, c.JobUIDs = filepath.Join(work, "w"), "62000-62099" })
	if cgroups && r.d.conf.cg.version == 0 {
		t.Skipf("SKIP: no cgroup: %s", r.d.conf.cg.why)
	}
	t.Logf("cgroups: %s", r.d.conf.cg.why)
	if st, err := os.Stat(filepath.Join(work, "w")); err != nil || st.Mode().Perm() != 0o711 {
		t.Errorf("work_dir with job uids: %v %v, want mode 0711", st.Mode(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, tok := r.stagedJob(t, ctx, `#!/bin/sh
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"
grep NoNewPrivs /proc/self/status
grep -E ':(pids|memory):' /proc/self/cgroup || grep '^0::' /proc/self/cgroup
setsid sleep 300 </dev/null >/dev/null 2>&1 &
# Wait until it leads a session of its own (field 6 of its stat).
until [ "$(cut -d' ' -f6 /proc/$!/stat)" = "$!" ]; do :; done
echo "detached=$!"
`)
	var out []string
	err = c.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(ev Event) {
		if ev.Out != "" {
			out = append(out, ev.Out)
		}
	})
	text := strings.Join(out, "\n")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	id := regexp.MustCompile(`uid=(\d+) gid=(\d+) groups=(\d+)\n`).FindStringSubmatch(text + "\n")
	if id == nil || id[1] != id[2] || id[1] != id[3] || id[1] < "62000" || id[1] > "62099" {
		t.Errorf("the job's ids: %q, want one uid of 62000-62099 as uid, gid and only group", id)
	}
	if !strings.Contains(text, "NoNewPrivs:\t1") {
		t.Errorf("no no_new_privs: %s", text)
	}
	if cgroups && !strings.Contains(text, "/job-"+tok.Token[:16]) {
		t.Errorf("the job is not in its cgroup job-%s: %s", tok.Token[:16], text)
	}
	m := regexp.MustCompile(`detached=(\d+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no detached process: %s", text)
	}
	pid, _ := strconv.Atoi(m[1])
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !regexp.MustCompile(`\) Z `).Match(stat) {
		t.Errorf("the detached process %d outlived its job: %s", pid, stat)
	}
	if !strings.Contains(text, "1 processes of the job outlived its ranks and were killed") {
		t.Errorf("the submitter was not told of the process killed: %s", text)
	}
	if !strings.Contains(r.log.String(), "jobs confined by") || !strings.Contains(r.log.String(), "a uid of its own per job") {
		t.Errorf("the log does not say how jobs are confined:\n%s", r.log.String())
	}
}

// A job that grows past job_memory_mb is killed by the kernel in its
// cgroup, and the submitter is told why on the job's stream.
func TestJobMemoryLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: no cgroup of its own for the job")
	}
	r := startDaemon(t, func(c *Config) { c.JobMemoryMB = 16 })
	if r.d.conf.cg.version == 0 || (r.d.conf.cg.version == 1 && r.d.conf.cg.base["memory"] == "") {
		t.Skipf("SKIP: no memory cgroup: %s", r.d.conf.cg.why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 64 MiB held in a shell variable: four times the limit.
	c, tok := r.stagedJob(t, ctx, "#!/bin/sh\nx=$(head -c 67108864 /dev/zero | tr '\\0' a)\necho survived ${#x}\n")
	var out []string
	var exit Event
	err := c.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(ev Event) {
		switch {
		case ev.Exited:
			exit = ev
		case ev.Out != "":
			out = append(out, ev.Out)
		}
	})
	text := strings.Join(out, "\n")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if strings.Contains(text, "survived 67108864") {
		t.Errorf("the job held 64 MiB with job_memory_mb = 16: %s", text)
	}
	if !strings.Contains(text, "reached its memory limit of 16 MiB") {
		t.Errorf("the submitter was not told of the memory limit (exit %+v): %s", exit, text)
	}
}

// A dial-out-only daemon registers so and is reached only through the
// supernode: a client that never dials the daemon's address (the one
// given is unroutable) pings, reserves, stages and launches through it,
// and the ranks are told to dial out (launch.EnvDialOutOnly), whatever
// the submitter's environment said.
func TestDialOutOnlyThroughSupernode(t *testing.T) {
	dir := t.TempDir()
	ca.Init(dir, "cluster")
	for _, n := range []string{"sn", "d1", "alice"} {
		ca.Issue(dir, dir, n)
	}
	load := func(n string) *ca.Credentials {
		c, err := ca.Load(filepath.Join(dir, "ca.crt"), dir, n)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snAddr := make(chan string, 1)
	go supernode.Serve(ctx, supernode.Config{Listen: "127.0.0.1:0", Creds: load("sn"), Ready: func(a string) { snAddr <- a }})
	sa := <-snAddr
	cfg := DefaultConfig()
	cfg.Name, cfg.Listen, cfg.CA, cfg.Certs = "d1", "127.0.0.1:0", filepath.Join(dir, "ca.crt"), dir
	cfg.Advertise = "192.0.2.1:7950"
	cfg.WorkDir, cfg.JobUIDs = filepath.Join(t.TempDir(), "w"), "none"
	cfg.Supernodes, cfg.Allowed, cfg.DialOutOnly = []string{"sn@" + sa}, []string{"alice"}, true
	cfg.Refresh = Duration{100 * time.Millisecond}
	log := &syncBuf{}
	d, err := New(cfg, slog.New(slog.NewJSONHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	dctx, dstop := context.WithCancel(ctx)
	go func() { served <- d.Serve(dctx, nil) }()
	defer func() {
		dstop()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()

	alice := load("alice")
	sn := supernode.NewClient(alice, "sn", sa)
	defer sn.Close()
	for {
		peers, err := sn.Peers(ctx)
		if err == nil && len(peers) == 1 && peers[0].DialOutOnly {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the supernode never listed d1 as dial-out-only: %+v %v", peers, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	c := NewClientVia(alice, "d1", cfg.Advertise, sn)
	defer c.Close()
	if info, _, err := c.Ping(ctx); err != nil || info.Name != "d1" {
		t.Fatalf("ping through the supernode: %+v %v", info, err)
	}
	tok, err := c.Reserve(ctx, "j", 1)
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"dial out only: $COHORT_DIAL_OUT_ONLY\"\n"
	if err := c.Stage(ctx, tok.Token, fileOf("p", []byte(script), true), strings.NewReader(script)); err != nil {
		t.Fatal(err)
	}
	var out []string
	err = c.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Env: []string{"COHORT_DIAL_OUT_ONLY=0"}, Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second,
		func(ev Event) {
			if ev.Out != "" {
				out = append(out, ev.Out)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0] != "dial out only: 1" {
		t.Errorf("the rank printed %q, want [\"dial out only: 1\"]", out)
	}
}
