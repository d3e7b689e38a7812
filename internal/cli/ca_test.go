package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	if code, _, _ := run(t, "ca", "frobnicate"); code != exitUsage {
		t.Errorf("unknown subcommand: exit %d, want %d", code, exitUsage)
	}
}

// Issue and renew say when the certificate expires; --days sets its
// lifetime within bounds; list shows each certificate issued.
func TestCALifetimes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if code, out, errs := run(t, "ca", "init", "--dir", dir); code != exitOK {
		t.Fatalf("init: exit %d\n%s%s", code, out, errs)
	}
	in := func(days int) string {
		return time.Now().Add(time.Duration(days) * 24 * time.Hour).UTC().Format("2006-01-02")
	}
	code, out, errs := run(t, "ca", "issue", "--dir", dir, "node1")
	if code != exitOK || !strings.Contains(out, "expires "+in(90)) {
		t.Fatalf("issue: exit %d, %q %q; want expiry %s", code, out, errs, in(90))
	}
	code, out, errs = run(t, "ca", "issue", "--dir", dir, "--days", "7", "alice")
	if code != exitOK || !strings.Contains(out, "expires "+in(7)) {
		t.Fatalf("issue --days 7: exit %d, %q %q", code, out, errs)
	}
	for _, bad := range []string{"0", "-1", "1096", "x"} {
		if code, _, errs := run(t, "ca", "issue", "--dir", dir, "--days", bad, "bob"); code != exitUsage {
			t.Errorf("--days %s: exit %d (%s), want %d", bad, code, errs, exitUsage)
		}
	}
	if code, _, errs := run(t, "ca", "renew", "--dir", dir, "bob"); code != exitFailure || !strings.Contains(errs, "no certificate to renew") {
		t.Errorf("renewing what was never issued: exit %d, %q", code, errs)
	}
	code, out, errs = run(t, "ca", "renew", "--dir", dir, "--days", "30", "alice")
	if code != exitOK || !strings.Contains(out, "expires "+in(30)) {
		t.Fatalf("renew: exit %d, %q %q", code, out, errs)
	}
	code, out, errs = run(t, "ca", "list", "--dir", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 4 || !strings.HasPrefix(lines[1], "alice") || !strings.Contains(lines[1], "valid, 6d left") ||
		!strings.Contains(lines[2], "valid, 29d left") || !strings.HasPrefix(lines[3], "node1") {
		t.Fatalf("list: exit %d, %q %q", code, out, errs)
	}
}

// Revoke puts a member's certificates, or a serial, on the CA's list, and
// says where the list is; list shows them revoked; a supernode refuses to
// start on a list that is missing where named or is another CA's.
func TestCARevoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	other := filepath.Join(t.TempDir(), "other")
	for _, args := range [][]string{
		{"ca", "init", "--dir", dir}, {"ca", "issue", "--dir", dir, "alice"}, {"ca", "issue", "--dir", dir, "bob"},
		{"ca", "issue", "--dir", dir, "sn1"}, {"ca", "init", "--dir", other}, {"ca", "issue", "--dir", other, "x"},
	} {
		if code, out, errs := run(t, args...); code != exitOK {
			t.Fatalf("%q: exit %d\n%s%s", args, code, out, errs)
		}
	}
	code, out, errs := run(t, "ca", "revoke", "--dir", dir, "alice")
	if code != exitOK || !strings.Contains(out, "revoked alice (serial ") || !strings.Contains(out, filepath.Join(dir, "ca.crl")) {
		t.Fatalf("revoke alice: exit %d, %q %q", code, out, errs)
	}
	_, list, _ := run(t, "ca", "list", "--dir", dir)
	bob := strings.Fields(strings.Split(list, "\n")[2])
	if len(bob) < 2 || bob[0] != "bob" {
		t.Fatalf("list: %q", list)
	}
	if code, out, errs := run(t, "ca", "revoke", "--dir", dir, "--serial", bob[1]); code != exitOK || !strings.Contains(out, "serial "+bob[1]) {
		t.Fatalf("revoke --serial: exit %d, %q %q", code, out, errs)
	}
	_, list, _ = run(t, "ca", "list", "--dir", dir)
	if strings.Count(list, "revoked 20") != 2 || !strings.Contains(list, "valid") {
		t.Errorf("list after revoking alice and bob:\n%s", list)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ca", "revoke", "--dir", dir}, exitUsage, "missing the NAME"},
		{[]string{"ca", "revoke", "--dir", dir, "--serial", "ab", "bob"}, exitUsage, "not both"},
		{[]string{"ca", "revoke", "--dir", dir, "--serial", "xyz"}, exitUsage, "bad serial"},
		{[]string{"ca", "revoke", "--dir", dir, "carol"}, exitFailure, `no certificate issued to "carol"`},
		{[]string{"supernode", "--name", "sn1", "--ca", filepath.Join(dir, "ca.crt"), "--certs", dir, "--crl", filepath.Join(dir, "none.crl")}, exitFailure, "none.crl: no such file"},
		{[]string{"supernode", "--name", "sn1", "--ca", filepath.Join(dir, "ca.crt"), "--certs", dir, "--crl", filepath.Join(other, "x.crt")}, exitFailure, "not an X509 CRL"},
	} {
		if code, _, errs := run(t, c.args...); code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q; want %d saying %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// A missing CA certificate or member certificate is named, with the
// command that makes it.
func TestMissingCredentialsSayHow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	query := []string{"peers", "--daemon", "node1@127.0.0.1:1", "--ca", filepath.Join(dir, "ca.crt"), "--certs", dir, "--name", "alice"}
	code, _, stderr := run(t, query...)
	want := "the cluster CA's certificate " + filepath.Join(dir, "ca.crt") + " is missing: make the CA with 'cohort ca init'"
	if code != exitFailure || !strings.Contains(stderr, want) {
		t.Fatalf("no CA: exit %d, stderr %q; want %q", code, stderr, want)
	}
	if code, out, errs := run(t, "ca", "init", "--dir", dir); code != exitOK {
		t.Fatalf("init: exit %d\n%s%s", code, out, errs)
	}
	code, _, stderr = run(t, query...)
	want = filepath.Join(dir, "alice.crt") + " is missing: issue alice's certificate with 'cohort ca issue alice'"
	if code != exitFailure || !strings.Contains(stderr, want) {
		t.Fatalf("no member certificate: exit %d, stderr %q; want %q", code, stderr, want)
	}
	code, _, stderr = run(t, "supernode", "--name", "sn1", "--ca", filepath.Join(dir, "ca.crt"), "--certs", dir)
	want = filepath.Join(dir, "sn1.crt") + " is missing: issue sn1's certificate with 'cohort ca issue sn1'"
	if code != exitFailure || !strings.Contains(stderr, want) {
		t.Fatalf("supernode without its certificate: exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// The default --name falls back from $USER to the next answer given.
func TestFirstName(t *testing.T) {
	none := func() string { return "" }
	host := func() string { return "host1" }
	login := func() string { return "alice" }
	for _, c := range []struct {
		env       string
		fallbacks []func() string
		want      string
	}{
		{"bob", []func() string{login, host}, "bob"},
		{"", []func() string{login, host}, "alice"},
		{"", []func() string{none, host}, "host1"},
		{"", []func() string{none, none}, ""},
	} {
		if got := firstName(c.env, c.fallbacks...); got != c.want {
			t.Errorf("firstName(%q, …) = %q, want %q", c.env, got, c.want)
		}
	}
	t.Setenv("USER", "")
	if defaultName() == "" {
		t.Error("with $USER empty, the default name is empty (want the login or host name)")
	}
}
