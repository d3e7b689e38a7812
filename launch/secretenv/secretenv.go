// Package secretenv reads secrets from the environment once. A variable
// read with [Take] from this process's environment is removed from it at
// once, so that no process this one starts inherits it (a rank's children,
// a job's helpers), and its value is kept for the rest of the process: a
// program that reads its bootstrap itself and then lets a library read it
// again still finds the secret.
package secretenv

import (
	"os"
	"sync"
)

var taken struct {
	sync.Mutex
	m map[string]string
}

// Take returns the value of variable name as getenv reads it (os.Getenv
// in a process; tests pass a fake). If that value is the process's own,
// the variable is removed from the environment and the value kept; if
// getenv finds nothing, Take returns the value it kept from an earlier
// call, if any.
func Take(getenv func(string) string, name string) string {
	v := getenv(name)
	taken.Lock()
	defer taken.Unlock()
	if v == "" {
		return taken.m[name]
	}
	if real, ok := os.LookupEnv(name); ok && real == v {
		os.Unsetenv(name)
		if taken.m == nil {
			taken.m = map[string]string{}
		}
		taken.m[name] = v
	}
	return v
}

// Forget drops the values Take kept (for tests that set the environment
// again).
func Forget() {
	taken.Lock()
	defer taken.Unlock()
	taken.m = nil
}
