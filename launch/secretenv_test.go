package launch

import (
	"bytes"
	"os"
	"testing"

	"github.com/cohort-mp/cohort/launch/secretenv"
	"github.com/cohort-mp/cohort/launch/secretenv/secretenvtest"
)

// setenv sets the process's variable name for the test, which removes it
// at the end (whether read or not) and forgets what secretenv kept.
func setenv(t *testing.T, name, value string) {
	t.Helper()
	t.Setenv(name, value)
	t.Cleanup(secretenv.Forget)
}

// TestSecretsLeaveTheEnvironment checks that a rank's secrets, the job
// secret and the TLS key, and the SLURM user's secret, are removed from
// the process's environment as soon as the bootstrap reads them: a child
// process started afterwards finds none of them, while the variables that
// are no secret (the job id, the certificate, the secret file's path)
// stay. A second read in the process still finds the secrets.
func TestSecretsLeaveTheEnvironment(t *testing.T) {
	cert, key, err := NewJobTLS("job-1")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range validEnv() {
		setenv(t, k, v)
	}
	setenv(t, EnvTLSCert, string(cert))
	setenv(t, EnvTLSKey, string(key))
	setenv(t, EnvUserSecret, "the user's secret, 16+ characters")
	setenv(t, EnvSecretFile, "/nonexistent/secret")
	if env := secretenvtest.ChildEnv(t); env[EnvSecret] == "" || env[EnvTLSKey] == "" {
		t.Fatal("the test's own child does not see the variables it set")
	}

	b, err := FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	user, err := userSecret(realSystem(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	env := secretenvtest.ChildEnv(t)
	for _, name := range []string{EnvSecret, EnvTLSKey, EnvUserSecret} {
		if _, ok := env[name]; ok {
			t.Errorf("a child of the rank inherits %s", name)
		}
	}
	for _, name := range []string{EnvJobID, EnvTLSCert, EnvSecretFile} {
		if env[name] == "" {
			t.Errorf("%s, no secret, is gone from the child's environment", name)
		}
	}

	again, err := FromEnv(os.Getenv)
	if err != nil {
		t.Fatalf("a second read of the bootstrap: %v", err)
	}
	if !bytes.Equal(again.Secret, b.Secret) || !bytes.Equal(again.TLSKey, b.TLSKey) || len(b.TLSKey) == 0 {
		t.Fatal("a second read of the bootstrap found other secrets")
	}
	if u, err := userSecret(realSystem(os.Getenv)); err != nil || !bytes.Equal(u, user) {
		t.Fatalf("a second read of the user's secret: %q, %v", u, err)
	}
}
