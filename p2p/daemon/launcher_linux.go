package daemon

import "golang.org/x/sys/unix"

// noNewPrivs sets no_new_privs on the calling thread: no exec may gain
// privileges (a set-user-ID program, file capabilities).
func noNewPrivs() error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }

// selfExe is the daemon's executable, even if its file was replaced since
// it started.
func selfExe() string { return "/proc/self/exe" }

// setAffinity makes the calling thread, and so the program it execs, run
// on cpus only.
func setAffinity(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return unix.SchedSetaffinity(0, &set)
}

// daemonCPUs lists the cores this process may run on (nil if unknown).
func daemonCPUs() []int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return nil
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
