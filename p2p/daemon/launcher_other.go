//go:build !linux

package daemon

import "os"

// noNewPrivs does nothing where there is no no_new_privs.
func noNewPrivs() error { return nil }

// selfExe is the daemon's executable.
func selfExe() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}

// setAffinity does nothing where affinity is not set.
func setAffinity(cpus []int) error { return nil }

// daemonCPUs knows no cores here: jobs get no set of their own.
func daemonCPUs() []int { return nil }
