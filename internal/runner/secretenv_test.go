package runner

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/launch/secretenv"
)

// printEnvVar makes the test binary, started as a child by the test of
// this file, print its environment and exit (before TestMain, which would
// run the cohort command).
const printEnvVar = "COHORT_TEST_PRINT_ENV"

func init() {
	if os.Getenv(printEnvVar) == "1" {
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		os.Exit(0)
	}
}

// TestSecretLeavesTheEnvironment checks that a node's job secret is
// removed from the process's environment as soon as LoadBootstrap reads
// it: a child process started afterwards does not find it, while the
// other variables stay; a second read in the process still finds it.
func TestSecretLeavesTheEnvironment(t *testing.T) {
	for k, v := range goodEnv() {
		t.Setenv(k, v)
	}
	t.Cleanup(secretenv.Forget)
	b, err := LoadBootstrap(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, ok := env[EnvSecret]; ok {
		t.Errorf("a child of the node inherits %s", EnvSecret)
	}
	if env[EnvJobID] == "" || env[EnvNodes] == "" {
		t.Errorf("the variables that are no secret are gone from the child's environment")
	}
	again, err := LoadBootstrap(os.Getenv)
	if err != nil || !bytes.Equal(again.Secret, b.Secret) {
		t.Fatalf("a second read: %v, secret %x, want %x", err, again.Secret, b.Secret)
	}
}
