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

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startReplica(t *testing.T, bin string, id int, bind, join string) *replica {
	t.Helper()
	args := []string{"-id", fmt.Sprint(id), "-http", "127.0.0.1:0", "-bind", bind}
	if join != "" {
		args = append(args, "-join", join)
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
	return r
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
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	rs := []*replica{startReplica(t, bin, 1, addrs[0], "")}
	rs[0].waitView(t, 1, "n1")
	for i := 1; i < 3; i++ {
		rs = append(rs, startReplica(t, bin, i+1, addrs[i], addrs[0]))
	}
	for i, r := range rs {
		r.waitView(t, i+1, "n1", "n2", "n3")
	}

	rs[1].cmd.Process.Signal(syscall.SIGKILL)
	a := rs[0].waitView(t, 1, "n1", "n3")
	b := rs[2].waitView(t, 3, "n1", "n3")
	// The same view: epoch, members in order and root (what changed since
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
