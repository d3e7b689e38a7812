package daemon

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostRig is a registry directory shared by simulated daemons of one
// test process, each with a pid of its own; live says which run.
type hostRig struct {
	t   *testing.T
	dir string
	log *syncBuf

	mu   sync.Mutex
	live map[procID]bool
}

func newHostRig(t *testing.T) *hostRig {
	return &hostRig{t: t, dir: t.TempDir(), log: &syncBuf{}, live: map[procID]bool{}}
}

func (r *hostRig) alive(p procID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[p]
}

func (r *hostRig) setLive(p procID, live bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[p] = live
}

// daemon is the cores of a simulated daemon of pid on cores 0 to ncores-1,
// sharing them among slots processes.
func (r *hostRig) daemon(pid, ncores, slots int) *coreSets {
	r.t.Helper()
	self := procID{pid, 1000 + uint64(pid)}
	r.setLive(self, true)
	h, err := newHostCores(r.dir, self, r.alive, slog.New(slog.NewTextHandler(r.log, nil)))
	if err != nil {
		r.t.Fatal(err)
	}
	all := make([]int, ncores)
	for i := range all {
		all[i] = i
	}
	cs := newCoreSets(all, slots)
	cs.host = h
	return cs
}

// write puts a file named name holding text in the registry.
func (r *hostRig) write(name, text string) string {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// Two daemons sharing a registry give their jobs cores apart from each
// other's: the second daemon's first job gets the cores the first's job
// does not hold, and once the first gives its back they are the next
// job's; when there are too few, the least held are shared.
func TestHostCoresTwoDaemons(t *testing.T) {
	r := newHostRig(t)
	a, b := r.daemon(101, 8, 4), r.daemon(202, 8, 4) // 2 cores a slot each
	steps := []struct {
		who    *coreSets
		slots  int
		want   []int
		shared bool
	}{
		{a, 1, []int{0, 1}, false},
		{b, 1, []int{2, 3}, false},
		{a, 1, []int{4, 5}, false},
		{b, 2, []int{0, 1, 6, 7}, true}, // 6 and 7 free, then the lowest held once
	}
	var sets [][]int
	for i, s := range steps {
		got, shared := s.who.take(s.slots)
		if !slices.Equal(got, s.want) || shared != s.shared {
			t.Errorf("step %d: take(%d) = %v shared %v, want %v shared %v", i, s.slots, got, shared, s.want, s.shared)
		}
		sets = append(sets, got)
	}
	a.release(sets[0])
	b.release(sets[3])
	if got, shared := b.take(1); !slices.Equal(got, []int{0, 1}) || shared {
		t.Errorf("after releases, the other daemon's take(1) = %v shared %v, want the freed [0 1] of its own", got, shared)
	} else {
		b.release(got)
	}
	a.release(sets[2])
	b.release(sets[1])
	if names := r.files(); len(names) != 0 {
		t.Errorf("every job released, the registry still holds %v", names)
	}
	if strings.Contains(r.log.String(), "cannot be used") {
		t.Errorf("the registry failed:\n%s", r.log)
	}
}

// files lists the daemons' files in the registry.
func (r *hostRig) files() []string {
	r.t.Helper()
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != coresLockName {
			names = append(names, e.Name())
		}
	}
	return names
}

// A daemon's file records its running jobs' cores, one job a line.
func TestHostCoresFile(t *testing.T) {
	r := newHostRig(t)
	a := r.daemon(7, 8, 4)
	s1, _ := a.take(1)
	s2, _ := a.take(2)
	b, err := os.ReadFile(filepath.Join(r.dir, "daemon-7-1007"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "cohort-cores 1\n0-1\n2-5\n"; string(b) != want {
		t.Errorf("the daemon's file holds %q, want %q", b, want)
	}
	jobs, err := readCoresFile(filepath.Join(r.dir, "daemon-7-1007"))
	if err != nil || !slices.EqualFunc(jobs, [][]int{s1, s2}, slices.Equal) {
		t.Errorf("reading it back: %v, %v; want %v %v", jobs, err, s1, s2)
	}
}

// A daemon that is gone holds no cores: its file (and a temporary file it
// left) is ignored and removed, while a running daemon's is respected.
// A pid reused by a later process is a daemon gone.
func TestHostCoresDeadDaemon(t *testing.T) {
	r := newHostRig(t)
	dead := r.write("daemon-77-5", "cohort-cores 1\n0-3\n")
	tmp := r.write(".daemon-77-5.123456", "cohort-cores 1\n")
	r.setLive(procID{77, 6}, true) // pid 77 again, a later process
	live := r.write("daemon-78-5", "cohort-cores 1\n4-5\n")
	r.setLive(procID{78, 5}, true)
	a := r.daemon(1, 8, 4)
	if got, shared := a.take(1); !slices.Equal(got, []int{0, 1}) || shared {
		t.Errorf("take(1) = %v shared %v, want [0 1]: the dead daemon's cores are free", got, shared)
	}
	for _, p := range []string{dead, tmp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s of a dead daemon is still there (%v)", filepath.Base(p), err)
		}
	}
	if got, _ := a.take(2); !slices.Equal(got, []int{2, 3, 6, 7}) {
		t.Errorf("take(2) = %v, want [2 3 6 7]: the live daemon holds 4 and 5", got)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live daemon's file: %v", err)
	}
	if !strings.Contains(r.log.String(), "daemon that is gone") {
		t.Errorf("the log does not say the dead daemon's file was removed:\n%s", r.log)
	}
}

// What is not a daemon's file of the registry is ignored, never a crash,
// and logged once per file.
func TestHostCoresBadFiles(t *testing.T) {
	r := newHostRig(t)
	r.setLive(procID{50, 5}, true)
	r.setLive(procID{51, 5}, true)
	r.setLive(procID{52, 5}, true)
	r.write("daemon-50-5", "not a registry file\n0-7\n")
	r.write("daemon-51-5", "cohort-cores 1\n5-2\n")
	r.write("daemon-52-5", "cohort-cores 1\n0-99999999\n")
	r.write("notes.txt", "cohort-cores 1\n0-7\n")
	r.write("daemon-x-5", "cohort-cores 1\n0-7\n")
	if err := os.Mkdir(filepath.Join(r.dir, "daemon-53-5"), 0o700); err != nil {
		t.Fatal(err)
	}
	r.setLive(procID{53, 5}, true)
	a := r.daemon(1, 4, 2)
	for range 2 {
		set, shared := a.take(1)
		if !slices.Equal(set, []int{0, 1}) || shared {
			t.Errorf("take(1) = %v shared %v, want [0 1]: no file read holds a core", set, shared)
		}
		a.release(set)
	}
	log := r.log.String()
	for _, name := range []string{"daemon-50-5", "daemon-51-5", "daemon-52-5", "notes.txt", "daemon-x-5", "daemon-53-5"} {
		if n := strings.Count(log, name); n != 1 {
			t.Errorf("%s is logged %d times, want once:\n%s", name, n, log)
		}
	}
	if strings.Contains(log, "cannot be used") {
		t.Errorf("a bad file made the registry fail:\n%s", log)
	}
}

// A registry that cannot be used never stops a job: the daemon chooses
// from its own jobs' cores, says so once, and says when it works again.
func TestHostCoresUnusable(t *testing.T) {
	r := newHostRig(t)
	a := r.daemon(1, 4, 2)
	moved := r.dir + ".away"
	if err := os.Rename(r.dir, moved); err != nil {
		t.Fatal(err)
	}
	s1, _ := a.take(1)
	s2, shared := a.take(1)
	if !slices.Equal(s1, []int{0, 1}) || !slices.Equal(s2, []int{2, 3}) || shared {
		t.Errorf("without a registry, take(1) twice = %v, %v shared %v; want [0 1], [2 3]", s1, s2, shared)
	}
	a.release(s1)
	if n := strings.Count(r.log.String(), "cannot be used"); n != 1 {
		t.Errorf("the failing registry is logged %d times, want once:\n%s", n, r.log)
	}
	if err := os.Rename(moved, r.dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.take(1); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("registry back: take(1) = %v, want [0 1]", got)
	}
	if !strings.Contains(r.log.String(), "works again") {
		t.Errorf("the log does not say the registry works again:\n%s", r.log)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "daemon-1-1001")); err != nil {
		t.Errorf("the daemon's file, once the registry works again: %v", err)
	}
}

// A registry directory that others could write into, or that is no
// directory, is refused when the daemon opens it.
func TestHostCoresDirChecks(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	file := filepath.Join(dir, "file")
	link := filepath.Join(dir, "link")
	sticky := filepath.Join(dir, "sticky")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sticky, 0o700); err != nil {
		t.Fatal(err)
	}
	// Mkdir's mode passes through the umask.
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sticky, link); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	alive := func(procID) bool { return true }
	for _, bad := range []string{open, file, link, filepath.Join(dir, "missing")} {
		if _, err := newHostCores(bad, procID{1, 1}, alive, log); err == nil {
			t.Errorf("registry %s accepted", filepath.Base(bad))
		}
	}
	if _, err := newHostCores(sticky, procID{1, 1}, alive, log); err != nil {
		t.Errorf("a sticky directory open to all, as /tmp: %v", err)
	}
}

// Two daemons taking and giving back cores at once, from two goroutines,
// never hold a core together while enough are free: each holds at most
// two jobs of two cores, and the host has eight. COHORT_SEED replays a
// run; the test logs its seed.
func TestHostCoresConcurrent(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("COHORT_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("COHORT_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay: COHORT_SEED=%d go test ./p2p/daemon -run %s)", seed, seed, t.Name())
	r := newHostRig(t)
	const rounds = 1000
	var owner [8]atomic.Int32 // per core, the daemon holding it
	var wg sync.WaitGroup
	for d := range int32(2) {
		cs := r.daemon(int(d)+1, 8, 4)
		rng := rand.New(rand.NewPCG(seed, uint64(d)))
		wg.Go(func() {
			var held [][]int
			for i := range rounds {
				if len(held) == 2 || len(held) > 0 && rng.IntN(2) == 0 {
					k := rng.IntN(len(held))
					for _, c := range held[k] {
						owner[c].Store(0)
					}
					cs.release(held[k])
					held = slices.Delete(held, k, k+1)
					continue
				}
				set, shared := cs.take(1)
				if shared {
					t.Errorf("seed %d: daemon %d round %d: take(1) = %v shared, with enough free", seed, d+1, i, set)
				}
				for _, c := range set {
					if !owner[c].CompareAndSwap(0, d+1) {
						t.Errorf("seed %d: daemon %d round %d: core %d is daemon %d's too", seed, d+1, i, c, owner[c].Load())
					}
				}
				held = append(held, set)
			}
			for _, set := range held {
				for _, c := range set {
					owner[c].Store(0)
				}
				cs.release(set)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if strings.Contains(r.log.String(), "cannot be used") {
		t.Errorf("seed %d: the registry failed:\n%s", seed, r.log)
	}
	if names := r.files(); len(names) != 0 {
		t.Errorf("every job released, the registry still holds %v", names)
	}
}

// parseProcID reads back the names fileName writes, and no other.
func TestParseProcID(t *testing.T) {
	p := procID{4321, 98765}
	for _, name := range []string{p.fileName(), "." + p.fileName() + ".123"} {
		if got, ok := parseProcID(name); !ok || got != p {
			t.Errorf("parseProcID(%q) = %v %v, want %v", name, got, ok, p)
		}
	}
	for _, name := range []string{"lock", "daemon-", "daemon-1", "daemon-1-", "daemon--1-2", "daemon-0-1", "daemon-01-2",
		"daemon-1-02", "daemon-1-2.bak", "daemon-1-2-3", "xdaemon-1-2", "daemon-+1-2"} {
		if got, ok := parseProcID(name); ok {
			t.Errorf("parseProcID(%q) = %v, want no daemon", name, got)
		}
	}
}

// This process's start time is read from /proc, and a process with its
// pid but another start time is not it.
func TestProcAlive(t *testing.T) {
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Skipf("SKIP: no /proc here: %v", err)
	}
	if self := (procID{os.Getpid(), start}); !procAlive(self) {
		t.Errorf("procAlive(%v) = false for this process", self)
	}
	if other := (procID{os.Getpid(), start + 1}); procAlive(other) {
		t.Errorf("procAlive(%v) = true: another start time is another process", other)
	}
}

func TestParseCPUs(t *testing.T) {
	for _, set := range [][]int{{3}, {0, 1, 2, 3}, {0, 1, 4, 6, 7, 8}} {
		if got, err := parseCPUs(formatCPUs(set)); err != nil || !slices.Equal(got, set) {
			t.Errorf("parseCPUs(%q) = %v %v, want %v", formatCPUs(set), got, err, set)
		}
	}
	for _, s := range []string{"", "a", "3-1", "1,1", "2,1", "-1", "0-", "1-2-3", fmt.Sprint(maxCore), "0,,1"} {
		if got, err := parseCPUs(s); err == nil {
			t.Errorf("parseCPUs(%q) = %v, want an error", s, got)
		}
	}
}

// A daemon's registry is the directory cores_dir names, its file named
// by this process; "none" is no registry.
func TestOpenHostCores(t *testing.T) {
	if _, err := procStart(os.Getpid()); err != nil {
		t.Skipf("SKIP: no /proc here: %v", err)
	}
	log := slog.New(slog.DiscardHandler)
	if h, err := openHostCores("none", log); h != nil || err != nil {
		t.Errorf(`openHostCores("none") = %v, %v; want no registry`, h, err)
	}
	dir := t.TempDir()
	h, err := openHostCores(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if h.self.pid != os.Getpid() || !procAlive(h.self) {
		t.Errorf("the registry names this daemon %v, which is not this process (pid %d)", h.self, os.Getpid())
	}
	if _, err := openHostCores(filepath.Join(dir, "missing"), log); err == nil {
		t.Errorf("a registry directory that does not exist was accepted")
	}
}
