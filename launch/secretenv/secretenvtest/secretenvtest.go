// Package secretenvtest lets a test see the environment a child of its
// process inherits: importing it makes the test binary, started again as
// a child by ChildEnv, print its environment and exit before any test
// (or TestMain) runs.
package secretenvtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// printEnvVar marks the child that must print its environment.
const printEnvVar = "COHORT_TEST_PRINT_ENV"

func init() {
	if os.Getenv(printEnvVar) == "1" {
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		os.Exit(0)
	}
}

// ChildEnv starts the test binary as a child process, inheriting this
// process's environment, and returns the environment the child finds.
func ChildEnv(t testing.TB) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), printEnvVar+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child: %v", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	if env[printEnvVar] != "1" {
		t.Fatalf("the child printed no environment:\n%s", out)
	}
	return env
}
