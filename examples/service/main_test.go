package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// replica is one running copy of the service with its output lines.
type replica struct {
	cmd   *exec.Cmd
	lines chan string
}

// startReplica starts replica id listening on a port the kernel chooses
// (a port picked by the test and freed before the replica binds it could be
// taken by another test in between) and returns it with its group address,
// read from the line it prints once it runs.
func startReplica(t *testing.T, bin string, id int, join string) (*replica, string) {
	t.Helper()
	args := []string{"-name", fmt.Sprint("n", id), "-http", "127.0.0.1:0", "-bind", "127.0.0.1:0"}
	if join != "" {
		args = append(args, "-seeds", join)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "COHORT_GROUP_SECRET=service-test-secret-0123456789")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return r, r.groupAddr(t, id)
}

// groupAddr reads lines up to "replica nN: group ADDR, HTTP …" and returns
// ADDR.
func (r *replica) groupAddr(t *testing.T, id int) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	prefix := fmt.Sprintf("replica n%d: group ", id)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("replica %d exited before printing its group address", id)
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				addr, _, _ := strings.Cut(rest, ",")
				if _, _, err := net.SplitHostPort(addr); err != nil {
					t.Fatalf("replica %d: bad group address in %q: %v", id, l, err)
				}
				return addr
			}
		case <-deadline:
			t.Fatalf("replica %d printed no group address within 30 s", id)
		}
	}
}

// viewMembers returns the sorted member list of a "view …" line, or nil.
func viewMembers(line string) []string {
	if !strings.HasPrefix(line, "view ") {
		return nil
	}
	i, j := strings.Index(line, "["), strings.Index(line, "]")
	if i < 0 || j < i {
		return nil
	}
	ms := strings.Fields(line[i+1 : j])
	slices.Sort(ms)
	return ms
}

// waitView returns the first view line whose members are want (in any
// order: the view order is the join order).
func (r *replica) waitView(t *testing.T, id int, want ...string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("replica %d exited before printing a view of %v", id, want)
			}
			if slices.Equal(viewMembers(l), want) {
				return l
			}
		case <-deadline:
			t.Fatalf("replica %d printed no view of %v within 30 s", id, want)
		}
	}
}

// TestThreeReplicasKillOne starts three replicas on loopback, kills one
// with SIGKILL, and checks that the other two print the same new view.
func TestThreeReplicasKillOne(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := filepath.Join(t.TempDir(), "service")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	first, seed := startReplica(t, bin, 1, "")
	rs := []*replica{first}
	rs[0].waitView(t, 1, "n1")
	for i := 1; i < 3; i++ {
		r, _ := startReplica(t, bin, i+1, seed)
		rs = append(rs, r)
	}
	for i, r := range rs {
		r.waitView(t, i+1, "n1", "n2", "n3")
	}

	rs[1].cmd.Process.Signal(syscall.SIGKILL)
	a := rs[0].waitView(t, 1, "n1", "n3")
	b := rs[2].waitView(t, 3, "n1", "n3")
	// The same view: epoch, members in order and leader (what changed since
	// each one's previous view may differ if one saw a view the other
	// skipped).
	va, _, _ := strings.Cut(a, " joined")
	vb, _, _ := strings.Cut(b, " joined")
	if va != vb {
		t.Fatalf("the survivors print different views:\n  %s\n  %s", a, b)
	}
	if !strings.Contains(a, "departed [n2]") || !strings.Contains(a, "left []") {
		t.Errorf("view line %q: want n2 departed (a crash, not a leave)", a)
	}
	t.Logf("both survivors: %s", a)
}
