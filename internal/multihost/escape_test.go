package multihost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/netlab"
	"github.com/cohort-mp/cohort/p2p/daemon"
	"github.com/cohort-mp/cohort/p2p/stage"
)

// escapePids is the rig's job_pids in TestJobEscape: small, so that the
// fork bomb meets it soon.
const escapePids = 64

// A job on a daemon run as root tries to break out (testdata/escape): read
// the daemon's key and environment, another job's environment, directory
// and files, list the work directory, signal the daemon, trace and kill
// another job's process, gain privileges, outlive its job in a session of
// its own, and exceed its cgroup's pids.max. Each attempt must be refused
// (the job's own output says so) or its process killed, and the limit and
// the killed process are reported to the submitter on the job's stream.
func TestJobEscape(t *testing.T) {
	if err := netlab.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	if !cgroupsWritable() {
		t.Skip("SKIP: no writable pids cgroup (v1 or v2): the fork bomb would not be bounded")
	}
	bin := t.TempDir()
	goBuild(t, filepath.Join(bin, "cohort"), "./cmd/cohort")
	goBuild(t, filepath.Join(bin, "escape"), "./internal/multihost/testdata/escape")
	rig, err := StartWith(context.Background(), 1, 1, filepath.Join(bin, "cohort"), fmt.Sprintf("job_pids = %d", escapePids))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var pids []int
		for _, p := range rig.procs {
			pids = append(pids, p.Process.Pid)
		}
		if err := rig.Close(); err != nil {
			t.Error(err)
		}
		// A daemon that shut down left no cgroup of its own or its jobs'.
		if left := cgroupsLeft(pids); len(left) > 0 {
			t.Errorf("the rig's daemons left cgroups behind: %q", left)
		}
	})
	log := rig.DaemonLog(0)
	if i := strings.Index(log, "jobs confined by"); i >= 0 {
		t.Logf("daemon: %s", strings.SplitN(log[i:], "\n", 2)[0])
	}
	prog, err := os.ReadFile(filepath.Join(bin, "escape"))
	if err != nil {
		t.Fatal(err)
	}
	c := daemon.NewClient(rig.Creds, DaemonName(0), rig.DaemonAddr(0))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	staged := func(job string) string {
		tok, err := c.Reserve(ctx, job, 1)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(prog)
		f := stage.File{Path: "escape", Size: int64(len(prog)), SHA256: hex.EncodeToString(sum[:]), Exec: true}
		if err := c.Stage(ctx, tok.Token, f, strings.NewReader(string(prog))); err != nil {
			t.Fatal(err)
		}
		return tok.Token
	}

	// The victim: a job with a secret in its environment and directory.
	victimTok := staged("victim")
	victimCtx, stopVictim := context.WithCancel(ctx)
	defer stopVictim()
	victimLine := make(chan string, 1)
	var victimOut strings.Builder
	var victimMu sync.Mutex
	victimDone := make(chan error, 1)
	go func() {
		victimDone <- c.Launch(victimCtx, victimTok, daemon.LaunchRequest{Program: "escape", Args: []string{"victim"},
			Env: []string{"VICTIM_SECRET=hunter2"}, Ranks: []daemon.LaunchRank{{Rank: 0}}}, 10*time.Second,
			func(ev daemon.Event) {
				victimMu.Lock()
				defer victimMu.Unlock()
				fmt.Fprintf(&victimOut, "%+v\n", ev)
				if strings.HasPrefix(ev.Out, "VICTIM ") {
					victimLine <- ev.Out
				}
			})
	}()
	var vline string
	select {
	case vline = <-victimLine:
	case err := <-victimDone:
		t.Fatalf("the victim ended before it started: %v\n%s\ndaemon: %s", err, victimOut.String(), rig.DaemonLog(0))
	case <-ctx.Done():
		t.Fatalf("the victim never started\ndaemon: %s", rig.DaemonLog(0))
	}
	v := fields(vline)
	victimPid, _ := strconv.Atoi(v["pid"])

	// The attacker, on the same daemon.
	attackTok := staged("attack")
	var out []string
	code := -1
	err = c.Launch(ctx, attackTok, daemon.LaunchRequest{Program: "escape",
		Args:  []string{"attack", v["pid"], v["dir"], filepath.Join(rig.Dir, DaemonName(0)+".key")},
		Ranks: []daemon.LaunchRank{{Rank: 0}}}, 10*time.Second,
		func(ev daemon.Event) {
			switch {
			case ev.Exited:
				code = ev.Code
				if ev.Signal != "" {
					out = append(out, "killed by "+ev.Signal)
				}
			case ev.Out != "":
				out = append(out, ev.Out)
			}
		})
	text := strings.Join(out, "\n")
	if err != nil {
		t.Fatalf("the attacker's launch: %v\n%s", err, text)
	}
	t.Logf("the attacker's output:\n%s", text)
	if code != 0 || !strings.Contains(text, "ATTEMPTS DONE") {
		t.Errorf("the attacker ended with %d before its last attempt", code)
	}

	a := fields(lineWith(out, "ATTACKER "))
	uid := func(s string) int { n, _ := strconv.Atoi(s); return n }
	if va, vv := uid(a["uid"]), uid(v["uid"]); va < 61000 || va > 61099 || vv < 61000 || vv > 61099 || va == vv {
		t.Errorf("job uids: attacker %d, victim %d: want two of 61000-61099", va, vv)
	}
	attempts := map[string]string{}
	for _, l := range out {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "ATTEMPT" {
			attempts[f[1]] = f[2]
		}
	}
	for _, name := range []string{"daemon-key", "victim-environ", "victim-file", "victim-dir", "work-dir",
		"daemon-environ", "signal-daemon", "ptrace-victim", "kill-victim", "new-privileges", "fork-bomb"} {
		switch attempts[name] {
		case "REFUSED":
		case "":
			t.Errorf("attempt %s: not made", name)
		default:
			t.Errorf("attempt %s: %s", name, lineWith(out, "ATTEMPT "+name+" "))
		}
	}
	if !strings.Contains(text, fmt.Sprintf("reached its limit of %d processes", escapePids)) {
		t.Errorf("the submitter was not told of the pids limit")
	}

	// The detached process was killed when its job ended, and the
	// submitter told.
	d := fields(lineWith(out, "DETACHED "))
	if detached, err := strconv.Atoi(d["pid"]); err != nil {
		t.Errorf("no detached process: %v", err)
	} else if alive(detached, uid(a["uid"])) {
		t.Errorf("the detached process %d outlived its job", detached)
	}
	if !regexp.MustCompile(`\d+ processes of the job outlived its ranks and were killed`).MatchString(text) {
		t.Errorf("the submitter was not told of the processes killed after the ranks")
	}

	// The victim ran on unharmed until its submitter let it go.
	if !alive(victimPid, uid(v["uid"])) {
		t.Errorf("the victim (pid %d) died", victimPid)
	}
	stopVictim()
	<-victimDone
	for deadline := time.Now().Add(15 * time.Second); alive(victimPid, uid(v["uid"])); {
		if time.Now().After(deadline) {
			t.Fatalf("the victim (pid %d) outlived its job", victimPid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fields parses the "key=value" words of a line.
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			m[k] = v
		}
	}
	return m
}

func lineWith(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// alive says whether pid runs under uid (a pid reused by another user's
// process is not the one sought).
func alive(pid, uid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	var st syscall.Stat_t
	if syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st) != nil {
		return false
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && strings.HasPrefix(string(b[i:]), ") Z") {
		return false // a zombie, not yet reaped
	}
	return int(st.Uid) == uid
}

// cgroupsWritable says whether a pids controller this process could use
// is mounted (v1, or v2 with pids available).
func cgroupsWritable() bool {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for l := range strings.Lines(string(mi)) {
		_, post, _ := strings.Cut(l, " - ")
		f := strings.Fields(post)
		if len(f) < 3 {
			continue
		}
		dir := strings.Fields(l)[4]
		switch {
		case f[0] == "cgroup" && strings.Contains(","+f[2]+",", ",pids,"):
			return true
		case f[0] == "cgroup2":
			if b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil && strings.Contains(string(b), "pids") {
				return true
			}
		}
	}
	return false
}

// cgroupsLeft lists the base cgroups (cohort-daemon-PID-N) of the daemons
// of pids found in the hierarchies a daemon of this machine uses, under
// this process's own cgroup in each (where the rig's daemons make theirs).
func cgroupsLeft(pids []int) []string {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var left []string
	for l := range strings.Lines(string(mi)) {
		pre, post, _ := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		for ol := range strings.Lines(string(own)) {
			c := strings.SplitN(strings.TrimSpace(ol), ":", 3)
			if len(c) != 3 || (g[0] == "cgroup2") != (c[0] == "0") {
				continue
			}
			if g[0] == "cgroup" && !strings.Contains(","+g[2]+",", ","+c[1]+",") {
				continue
			}
			rel, err := filepath.Rel(f[3], c[2])
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			for _, pid := range pids {
				m, _ := filepath.Glob(filepath.Join(f[4], rel, fmt.Sprintf("cohort-daemon-%d-*", pid)))
				left = append(left, m...)
			}
		}
	}
	return left
}
