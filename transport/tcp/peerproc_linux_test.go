package tcp

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseProcStat(t *testing.T) {
	tail := " 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 20 21\n"
	for _, tc := range []struct {
		name, line string
		want       procStat
		bad        bool
	}{
		{"plain", "123 (cohort) S" + tail, procStat{'S', 4242, 6}, false},
		{"spaces and parentheses in the name", "123 (a) R (b c)) Z" + tail, procStat{'Z', 4242, 6}, false},
		{"stopped", "7 (x) T" + tail, procStat{'T', 4242, 6}, false},
		{"flags not a number", "123 (cohort) S 1 2 3 4 5 x 7 8 9 10 11 12 13 14 15 16 17 18 4242 20 21", procStat{}, true},
		{"no name", "123 cohort S" + tail, procStat{}, true},
		{"cut short", "123 (cohort) S 1 2 3", procStat{}, true},
		{"start time not a number", "123 (cohort) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20", procStat{}, true},
		{"state of two letters", "123 (cohort) SS" + tail, procStat{}, true},
	} {
		got, err := parseProcStat([]byte(tc.line))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: got %+v, want an error", tc.name, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestProcStatRuns(t *testing.T) {
	for state, want := range map[byte]bool{'R': true, 'S': true, 'D': true, 'T': false, 't': false, 'Z': false, 'X': false} {
		if got := (procStat{state: state}).runs(); got != want {
			t.Errorf("state %c: runs %v, want %v", state, got, want)
		}
	}
}

// A zombie, a dead process and an exiting one have ended; a stopped one
// and a starved one (runnable) have not.
func TestProcStatEnded(t *testing.T) {
	for _, tc := range []struct {
		st   procStat
		want bool
	}{
		{procStat{state: 'R'}, false},
		{procStat{state: 'S', flags: 0x400040}, false},
		{procStat{state: 'T'}, false},
		{procStat{state: 't'}, false},
		{procStat{state: 'D'}, false},
		{procStat{state: 'Z'}, true},
		{procStat{state: 'X'}, true},
		{procStat{state: 'R', flags: pfExiting}, true},
		{procStat{state: 'D', flags: 0x400000 | pfExiting}, true},
	} {
		if got := tc.st.ended(); got != tc.want {
			t.Errorf("%+v: ended %v, want %v", tc.st, got, tc.want)
		}
	}
}

// This process reads as alive, with a start time; a child that ended
// reads as a zombie until it is reaped, then as no process at all.
func TestReadProcStat(t *testing.T) {
	self, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// (The state is that of the process's first thread, which may wait.)
	if !self.runs() || self.start == 0 {
		t.Errorf("this process: %+v, want it running and a start time", self)
	}
	if _, err := readProcStat(0); err == nil {
		t.Error("process 0: no error")
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	child, err := readProcStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if child.start < self.start {
		t.Errorf("the child started at %d, before this process (%d)", child.start, self.start)
	}
	// The child ends on its own; not reaped, it stays a zombie.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := readProcStat(pid)
		if err != nil {
			t.Fatalf("child not reaped yet: %v", err)
		}
		if st.state == 'Z' {
			if st.runs() || st.start != child.start {
				t.Errorf("zombie child: %+v, runs %v; want it not running, start %d", st, st.runs(), child.start)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child still in state %c after 30 s", st.state)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Wait()
	if _, err := readProcStat(pid); !errors.Is(err, errNoProc) {
		t.Errorf("reaped child: error %v, want %v", err, errNoProc)
	}
}

// unixPair returns the two ends of a Unix stream socket pair, both held by
// this process (each end's SO_PEERCRED is this process).
func unixPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ends [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = nc.(*net.UnixConn)
		t.Cleanup(func() { ends[i].Close() })
	}
	return ends[0], ends[1]
}

// A peer process that holds its socket open and runs is alive, and not
// gone; one whose id now names a process started at another time (its
// id reused) is not alive, and is gone; one whose socket is closed is
// not alive, nor gone while it exists (a live process closes
// connections too).
func TestPeerProcessLives(t *testing.T) {
	a, b := unixPair(t)
	c := &conn{nc: &rightsConn{UnixConn: a}, unix: true}
	c.proc = peerProcOf(c.nc)
	if c.proc.pid != os.Getpid() || c.proc.start == 0 {
		t.Fatalf("peer %+v, want this process (%d) and its start time", c.proc, os.Getpid())
	}
	if !peerProcessLives(c) || peerProcessGone(c) {
		t.Fatal("live peer (this process), socket open: not alive, or gone")
	}
	reused := &conn{nc: c.nc, unix: true, proc: c.proc}
	reused.proc.start++ // the id as another process, started later, holds it
	if peerProcessLives(reused) || !peerProcessGone(reused) {
		t.Error("the peer's id taken by a process of another start time: alive or not gone, want gone")
	}
	unknown := &conn{nc: c.nc, unix: true}
	if peerProcessLives(unknown) || peerProcessGone(unknown) {
		t.Error("peer process not known: alive or gone, want neither")
	}
	b.Close() // what the kernel does to the sockets of a process that ends
	if peerProcessLives(c) {
		t.Error("peer's socket closed: alive, want not")
	}
	if peerProcessGone(c) {
		t.Error("peer's socket closed, its process alive: gone, want not")
	}
	if p := peerProcOf(c.nc); p.pid != 0 {
		t.Errorf("socket closed at the first look: peer %+v, want none known", p)
	}
}
