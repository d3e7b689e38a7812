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
