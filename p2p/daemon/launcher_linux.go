package daemon

import "golang.org/x/sys/unix"

// noNewPrivs sets no_new_privs on the calling thread: no exec may gain
// privileges (a set-user-ID program, file capabilities).
func noNewPrivs() error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }

// selfExe is the daemon's executable, even if its file was replaced since
// it started.
func selfExe() string { return "/proc/self/exe" }
