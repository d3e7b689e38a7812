package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// peerCred returns the user and process ids of the other end of a Unix
// socket (SO_PEERCRED: for a dialled socket, the listener's, as of its
// listen call).
func peerCred(nc net.Conn) (uid, pid int, ok bool) {
	uc, isUnix := nc.(*net.UnixConn)
	if !isUnix {
		return 0, 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, 0, false
	}
	return int(cred.Uid), int(cred.Pid), true
}

// procStat is what /proc/PID/stat says of a process of this host: its
// scheduling state (R running or runnable, S sleeping, D in an
// uninterruptible wait, T stopped, t stopped by a tracer, Z a zombie, X
// dead, ...) and its start time in clock ticks after boot. A process id
// and its start time name a process for good: a later process given the
// same id starts later.
type procStat struct {
	state byte
	start uint64
	flags uint64 // the kernel's PF_ flags of its first thread
}

// pfExiting is the kernel's PF_EXITING flag: the thread is in its exit.
const pfExiting = 0x4

// runs reports whether the process will run again with no one's help:
// it is runnable (R) or waiting (S, D). A stopped one (T, t) waits for
// someone to resume it, a zombie (Z) or a dead one (X) is gone.
func (s procStat) runs() bool {
	switch s.state {
	case 'R', 'S', 'D':
		return true
	}
	return false
}

// ended reports whether the process is gone though its entry stays: a
// zombie (Z), dead (X), or exiting.
func (s procStat) ended() bool {
	return s.state == 'Z' || s.state == 'X' || s.flags&pfExiting != 0
}

// errNoProc: no process has that id (it ended and was reaped).
var errNoProc = errors.New("tcp: no such process")

// readProcStat reads /proc/pid/stat.
func readProcStat(pid int) (procStat, error) {
	if pid <= 0 {
		return procStat{}, fmt.Errorf("tcp: process id %d", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return procStat{}, errNoProc
	}
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// parseProcStat decodes a /proc/PID/stat line: "pid (comm) state ppid
// ...", the flags its 9th field, the start time its 22nd. The command
// name may hold spaces and parentheses, so the fields are counted from
// its last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("tcp: /proc stat: no command name")
	}
	fields := bytes.Fields(b[i+1:])
	const stateField, flagsField, startField = 0, 9 - 3, 22 - 3 // numbered from the state, the 3rd
	if len(fields) <= startField || len(fields[stateField]) != 1 {
		return procStat{}, fmt.Errorf("tcp: /proc stat: %d fields after the command name, want more than %d", len(fields), startField)
	}
	start, err := strconv.ParseUint(string(fields[startField]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("tcp: /proc stat: start time: %w", err)
	}
	flags, err := strconv.ParseUint(string(fields[flagsField]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("tcp: /proc stat: flags: %w", err)
	}
	return procStat{state: fields[stateField][0], start: start, flags: flags}, nil
}
