package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCAInitIssue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if code, out, errs := run(t, "ca", "init", "--dir", dir); code != exitOK {
		t.Fatalf("init: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run(t, "ca", "issue", "--dir", dir, "node1"); code != exitOK {
		t.Fatalf("issue: exit %d\n%s%s", code, out, errs)
	}
	if st, err := os.Stat(filepath.Join(dir, "node1.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("node1.key: %v %v", st, err)
	}
	if code, _, _ := run(t, "ca", "issue", "--dir", dir, "node1"); code != exitFailure {
		t.Errorf("issuing twice: exit %d, want %d", code, exitFailure)
	}
	if code, _, _ := run(t, "ca", "issue", "--dir", dir); code != exitUsage {
		t.Errorf("issue without a name: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := run(t, "ca", "revoke"); code != exitUsage {
		t.Errorf("unknown subcommand: exit %d, want %d", code, exitUsage)
	}
}
