package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func noPMI() (net.Conn, error) { return nil, errors.New("the test opens no PMI connection") }

// TestSlurmSecret: the job secret needs the user's, from the environment
// or a private file; it differs between steps and is the same for every
// task of one.
func TestSlurmSecret(t *testing.T) {
	dir := t.TempDir()
	env := slurmEnv(0, 1)
	delete(env, EnvUserSecret)
	env["HOME"] = dir
	sys := fakeSystem(env, noPMI)

	_, err := userSecret(sys)
	if !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "openssl rand") {
		t.Fatalf("no secret: got %v, want ErrNoSecret saying the file does not exist and how to make one", err)
	}
	env[EnvUserSecret] = "short"
	if _, err := userSecret(sys); !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("short secret: got %v", err)
	}
	delete(env, EnvUserSecret)

	path := filepath.Join(dir, ".cohort", "secret")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := userSecret(sys); !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "read by others") {
		t.Fatalf("secret file of mode 0644: got %v, want a refusal", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := userSecret(sys)
	if err != nil || string(got) != "0123456789abcdef0123" {
		t.Fatalf("secret file: got %q, %v", got, err)
	}
	sys.uid = os.Getuid() + 1
	if _, err := userSecret(sys); !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "belongs to uid") {
		t.Fatalf("someone else's file: got %v", err)
	}
	sys.uid = os.Getuid()
	env[EnvSecretFile] = filepath.Join(dir, "elsewhere")
	if _, err := userSecret(sys); !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "elsewhere") {
		t.Fatalf("%s: got %v", EnvSecretFile, err)
	}

	user := []byte("0123456789abcdef0123")
	a, b := deriveSecret(user, "c", "7", "0"), deriveSecret(user, "c", "7", "1")
	if len(a) < MinSecretLen || bytes.Equal(a, b) || !bytes.Equal(a, deriveSecret(user, "c", "7", "0")) {
		t.Fatal("the job secret must be per step and the same for every task of one")
	}
	if bytes.Equal(a, deriveSecret([]byte("another user's secret"), "c", "7", "0")) {
		t.Fatal("the job secret must depend on the user's")
	}

	// A task without a secret refuses to start, before talking to PMI.
	if _, err := fromSLURM(context.Background(), sys); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("fromSLURM without a secret: %v", err)
	}
}

// TestSlurmSizeMismatch: PMI and SLURM's environment disagree on the size
// or the rank: the task refuses to start and says which.
func TestSlurmSizeMismatch(t *testing.T) {
	srv := newFakePMI(4)
	defer srv.stop()
	for _, tc := range []struct{ key, value, want string }{
		{"SLURM_STEP_NUM_TASKS", "5", "PMI says 4 tasks, SLURM_STEP_NUM_TASKS says 5"},
		{"SLURM_PROCID", "2", "PMI says rank 1, SLURM_PROCID says 2"},
	} {
		env := slurmEnv(1, 4)
		env[tc.key] = tc.value
		sys := fakeSystem(env, func() (net.Conn, error) {
			a, b := net.Pipe()
			go srv.serve(b, 1)
			return a, nil
		})
		_, err := fromSLURM(context.Background(), sys)
		if !errors.Is(err, ErrBootstrap) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: got %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
}

// TestSlurmEnvErrors: what is missing is named.
func TestSlurmEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		change map[string]string
		want   string
	}{
		{map[string]string{"PMI_FD": ""}, "--mpi=pmi2"},
		{map[string]string{"PMI_RANK": "x"}, "PMI_RANK"},
		{map[string]string{"SLURM_JOB_ID": ""}, "SLURM_JOB_ID"},
		{map[string]string{EnvSlurmTimeout: "soon"}, EnvSlurmTimeout},
		{map[string]string{EnvFanout: "three"}, EnvFanout},
	} {
		env := slurmEnv(0, 2)
		for k, v := range tc.change {
			env[k] = v
		}
		_, err := fromSLURM(context.Background(), fakeSystem(env, noPMI))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error naming %q", tc.change, err, tc.want)
		}
	}
}

// TestListenHost: the override wins; one node listens on loopback;
// several nodes listen on an address of this node's name, or of an
// interface, or fail with what to set.
func TestListenHost(t *testing.T) {
	env := slurmEnv(0, 2)
	sys := fakeSystem(env, noPMI)
	ctx := context.Background()
	check := func(want string) {
		t.Helper()
		got, err := listenHost(ctx, sys)
		if err != nil || got != want {
			t.Errorf("got %q, %v; want %q", got, err, want)
		}
	}
	check("127.0.0.1")
	env[EnvListenHost] = "10.9.8.7"
	check("10.9.8.7")
	delete(env, EnvListenHost)
	env["SLURM_STEP_NUM_NODES"] = "2"
	env["SLURMD_NODENAME"] = "n1"
	sys.lookupIP = func(_ context.Context, host string) ([]net.IP, error) {
		if host == "n1" {
			return []net.IP{net.ParseIP("127.0.1.1"), net.ParseIP("192.0.2.10")}, nil
		}
		return nil, errors.New("unknown host")
	}
	check("192.0.2.10")
	sys.lookupIP = func(context.Context, string) ([]net.IP, error) { return []net.IP{net.ParseIP("127.0.1.1")}, nil }
	sys.ifaceAddrs = func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("127.0.0.1")}, &net.IPNet{IP: net.ParseIP("fe80::1")}, &net.IPNet{IP: net.ParseIP("198.51.100.3")}}, nil
	}
	check("198.51.100.3")
	sys.ifaceAddrs = func() ([]net.Addr, error) { return nil, nil }
	if _, err := listenHost(ctx, sys); err == nil || !strings.Contains(err.Error(), EnvListenHost) {
		t.Errorf("no address: got %v, want an error naming %s", err, EnvListenHost)
	}
}

// TestDetect: cohort run's variables win; SLURM's are used without them;
// with neither, ErrNotLaunched.
func TestDetect(t *testing.T) {
	ctx := context.Background()
	if _, err := Detect(ctx, func(string) string { return "" }); !errors.Is(err, ErrNotLaunched) {
		t.Errorf("empty environment: %v", err)
	}
	cohort := Bootstrap{JobID: "j", Rank: 1, Size: 2, Rendezvous: "127.0.0.1:9", Secret: make([]byte, 16)}.Environ()
	env := slurmEnv(0, 2)
	for _, kv := range cohort {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	b, err := Detect(ctx, func(k string) string { return env[k] })
	if err != nil || b.Source != "cohort run" || b.Rank != 1 {
		t.Errorf("cohort run inside a SLURM job: %+v, %v", b, err)
	}
	// What a user exports before srun (fan-out, detector, spares) does
	// not make the task look started by cohort run.
	env = slurmEnv(1, 4)
	delete(env, "PMI_FD")
	for k, v := range map[string]string{"SLURM_STEP_NODELIST": "n1", "SLURM_STEP_TASKS_PER_NODE": "4", "SLURM_STEP_NUM_NODES": "1",
		"SLURM_NODEID": "0", "SLURM_LOCALID": "1", EnvPortBase: "30000"} {
		env[k] = v
	}
	env[EnvSpares], env[EnvDetector], env[EnvFanout] = "1", "heartbeat", "4"
	if b, err := Detect(ctx, func(k string) string { return env[k] }); err != nil || b.Source == "cohort run" || b.Spares != 1 || b.Detector != "heartbeat" {
		t.Errorf("srun with COHORT_SPARES, COHORT_DETECTOR and COHORT_FANOUT exported: %+v, %v", b, err)
	}
	env = slurmEnv(0, 2)
	delete(env, "PMI_FD")
	if !UnderSLURM(func(k string) string { return env[k] }) {
		t.Error("SLURM's step variables without PMI_FD are still SLURM")
	}
	delete(env, "SLURM_STEP_ID")
	if UnderSLURM(func(k string) string { return env[k] }) {
		t.Error("a batch script (no step) is not a task of a step")
	}
}

func TestExpandHostList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"vm", "vm"},
		{"n[1-3,7]", "n1 n2 n3 n7"},
		{"n[08-11]", "n08 n09 n10 n11"},
		{"a1,b[2-3],c", "a1 b2 b3 c"},
		{"r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2"},
		{"x[3]-ib", "x3-ib"},
	} {
		got, err := expandHostList(tc.in)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("expandHostList(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "n[", "n[1-", "n[3-1]", "n]", "n[a]", ",", "n[1-2]]", "n[[1]]", "n[0-99999999999]"} {
		if got, err := expandHostList(bad); err == nil {
			t.Errorf("expandHostList(%q) = %q, want an error", bad, got)
		}
	}
	got, err := expandTasksPerNode("2(x3),1")
	if err != nil || fmt.Sprint(got) != "[2 2 2 1]" {
		t.Errorf("expandTasksPerNode: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "2(x0)", "2(3)", "2(x3", "x", "1,,1"} {
		if _, err := expandTasksPerNode(bad); err == nil {
			t.Errorf("expandTasksPerNode(%q) succeeded", bad)
		}
	}
}

// TestSlurmEnvLayout: without PMI, the addresses are computed from the
// node list and tasks per node (block distribution); a task placed
// otherwise refuses.
func TestSlurmEnvLayout(t *testing.T) {
	env := slurmEnv(4, 5)
	delete(env, "PMI_FD")
	for k, v := range map[string]string{
		"SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "3,2", "SLURM_STEP_NUM_NODES": "2",
		"SLURM_NODEID": "1", "SLURM_LOCALID": "1", EnvPortBase: "30000",
	} {
		env[k] = v
	}
	var notice strings.Builder
	sys := fakeSystem(env, noPMI)
	sys.notice = &notice
	b, err := fromSLURM(context.Background(), sys)
	if err != nil {
		t.Fatal(err)
	}
	if b.Rank != 4 || b.Size != 5 || b.ListenAddr() != "0.0.0.0:30001" || b.Spares != 0 {
		t.Errorf("rank %d size %d listen %s spares %d", b.Rank, b.Size, b.ListenAddr(), b.Spares)
	}
	// COHORT_SPARES, exported before srun, makes the last tasks spares.
	env[EnvSpares] = "2"
	if b, err := fromSLURM(context.Background(), sys); err != nil || b.Spares != 2 || !b.IsSpare() || b.Ranks() != 3 {
		t.Errorf("with %s=2: %+v, %v; want task 4 a spare of a job of 3 ranks", EnvSpares, b, err)
	}
	for _, bad := range []string{"two", "5", "-1"} {
		env[EnvSpares] = bad
		if _, err := fromSLURM(context.Background(), sys); !errors.Is(err, ErrBootstrap) || !strings.Contains(err.Error(), EnvSpares) {
			t.Errorf("%s=%s: %v, want an error naming it", EnvSpares, bad, err)
		}
	}
	delete(env, EnvSpares)
	reg, err := b.Register(context.Background(), "0.0.0.0:30001")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if got, want := strings.Join(reg.Addrs, " "), "n1:30000 n1:30001 n1:30002 n2:30000 n2:30001"; got != want {
		t.Errorf("addresses %q, want %q", got, want)
	}
	if notice.Len() != 0 {
		t.Errorf("rank 4 printed a notice: %q", notice.String())
	}
	env["SLURM_LOCALID"] = "0"
	if _, err := fromSLURM(context.Background(), sys); err == nil || !strings.Contains(err.Error(), "block distribution") {
		t.Errorf("a task off the block layout: %v", err)
	}
	env["SLURM_LOCALID"], env["SLURM_DISTRIBUTION"] = "1", "cyclic"
	if _, err := fromSLURM(context.Background(), sys); err == nil || !strings.Contains(err.Error(), "SLURM_DISTRIBUTION=cyclic") {
		t.Errorf("cyclic over two nodes: %v", err)
	}
	env["SLURM_DISTRIBUTION"], env["SLURM_STEP_TASKS_PER_NODE"] = "", "3,3"
	if _, err := fromSLURM(context.Background(), sys); err == nil || !strings.Contains(err.Error(), "6 tasks in all") {
		t.Errorf("tasks per node that do not add up: %v", err)
	}
}

// FuzzExpandHostList: any host list expands or fails, never panics, and
// stays within its bound.
func FuzzExpandHostList(f *testing.F) {
	for _, s := range []string{"vm", "n[1-3,7]", "r[1-2]n[01-02]", "a,b[2-3]", "n[", "n[9-1]", "2(x3),1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if hosts, err := expandHostList(s); err == nil && (len(hosts) == 0 || len(hosts) > maxHostList) {
			t.Fatalf("%q expanded to %d hosts", s, len(hosts))
		}
		if n, err := expandTasksPerNode(s); err == nil && (len(n) == 0 || len(n) > maxHostList) {
			t.Fatalf("%q expanded to %d entries", s, len(n))
		}
	})
}

// tableServer is a pmiServer whose key-value space is a map (for the
// table decoder's fuzz test).
type tableServer struct{ kv map[string]string }

func (s *tableServer) Init(context.Context, int, string) error    { return nil }
func (s *tableServer) Size() int                                  { return 0 }
func (s *tableServer) Put(_ context.Context, k, v string) error   { s.kv[k] = v; return nil }
func (s *tableServer) Fence(context.Context, time.Duration) error { return nil }
func (s *tableServer) Finalize(context.Context) error             { return nil }
func (s *tableServer) Close() error                               { return nil }
func (s *tableServer) Get(_ context.Context, k string) (string, bool, error) {
	v, ok := s.kv[k]
	return v, ok, nil
}

// FuzzPMITable: whatever task 0's table holds (count and chunks), a task
// reading it gets an error or exactly size valid addresses with its own
// in its place; never a panic.
func FuzzPMITable(f *testing.F) {
	f.Add("1", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "")
	f.Add("2", "127.0.0.1:1,127.0.0.1:2", "127.0.0.1:3")
	f.Add("2", "127.0.0.1:1", "")
	f.Add("x", "", "")
	f.Add("3", ",,", "[::1]:5")
	f.Fuzz(func(t *testing.T, count, c0, c1 string) {
		srv := &tableServer{kv: map[string]string{pmiTableCount: count, pmiTableKey(0): c0, pmiTableKey(1): c1}}
		e := &pmiExchange{srv: srv, rank: 1, size: 3, fence: time.Second}
		addrs, err := e.readTable(context.Background(), "127.0.0.1:2")
		if err != nil {
			return
		}
		if len(addrs) != 3 || addrs[1] != "127.0.0.1:2" {
			t.Fatalf("table %q %q %q gave %q", count, c0, c1, addrs)
		}
		for _, a := range addrs {
			if checkAddr(a) != nil {
				t.Fatalf("accepted the address %q", a)
			}
		}
	})
}
