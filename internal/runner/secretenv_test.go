package runner

import (
	"bytes"
	"os"
	"testing"

	"github.com/cohort-mp/cohort/launch/secretenv"
	"github.com/cohort-mp/cohort/launch/secretenv/secretenvtest"
)

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
	env := secretenvtest.ChildEnv(t)
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
