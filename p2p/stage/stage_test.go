package stage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func file(path string, data []byte) File {
	s := sha256.Sum256(data)
	return File{Path: path, Size: int64(len(data)), SHA256: hex.EncodeToString(s[:])}
}

func newDir(t *testing.T) *Dir {
	return &Dir{Root: t.TempDir(), MaxFile: 1 << 10, MaxTotal: 3 << 10}
}

func TestReceive(t *testing.T) {
	d := newDir(t)
	prog := []byte("#!/bin/sh\necho hi\n")
	f := file("bin/prog", prog)
	f.Exec = true
	if err := d.Receive(f, bytes.NewReader(prog)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(d.Root, "bin", "prog"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("prog: %v %v", st, err)
	}
	if err := d.Receive(file("in.txt", []byte("data")), bytes.NewReader([]byte("data"))); err != nil {
		t.Fatal(err)
	}
	// Over an existing file: refused, the file intact.
	if err := d.Receive(file("in.txt", []byte("evil")), bytes.NewReader([]byte("evil"))); err == nil {
		t.Error("overwrote in.txt")
	}
	if b, _ := os.ReadFile(filepath.Join(d.Root, "in.txt")); string(b) != "data" {
		t.Errorf("in.txt = %q", b)
	}
}

// Paths outside the job's directory are refused: absolute, "..",
// through a symbolic link; nothing is written.
func TestPathEscapes(t *testing.T) {
	d := newDir(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(d.Root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "a/../b", "..", ".", "link/x", "link", `a\b`} {
		err := d.Receive(file(p, []byte("x")), bytes.NewReader([]byte("x")))
		if !errors.Is(err, ErrPath) {
			t.Errorf("path %q: %v, want ErrPath", p, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("files written outside: %v", ents)
	}
}

// Too large (a file, the job) and wrong checksums are refused, and the
// partial file removed.
func TestLimitsAndChecksums(t *testing.T) {
	d := newDir(t)
	big := make([]byte, 2<<10)
	if err := d.Receive(file("big", big), bytes.NewReader(big)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a file over the limit: %v", err)
	}
	part := make([]byte, 1<<10)
	for i, name := range []string{"a", "b", "c"} {
		if err := d.Receive(file(name, part), bytes.NewReader(part)); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	if err := d.Receive(file("d", []byte("x")), bytes.NewReader([]byte("x"))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the job's limit: %v", err)
	}
	d = newDir(t)
	f := file("x", []byte("right"))
	if err := d.Receive(f, bytes.NewReader([]byte("wrong"))); !errors.Is(err, ErrChecksum) {
		t.Errorf("wrong bytes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Root, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the bad file was kept: %v", err)
	}
	if err := d.Receive(f, bytes.NewReader([]byte("righ"))); !errors.Is(err, ErrChecksum) {
		t.Errorf("truncated: %v", err)
	}
	f.SHA256 = "zz"
	if err := d.Receive(f, bytes.NewReader([]byte("right"))); !errors.Is(err, ErrChecksum) {
		t.Errorf("a checksum that is not hex: %v", err)
	}
}

// The job's directory, or the work directory holding it, swapped for a
// symbolic link after the job began: the file is refused and nothing
// lands at the link's target.
func TestSwappedDirectoryRefused(t *testing.T) {
	data := []byte("x")
	swap := func(t *testing.T, path string) (target string) {
		t.Helper()
		target = t.TempDir()
		if err := os.Rename(path, path+".moved"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		return target
	}
	check := func(t *testing.T, d *Dir, target string) {
		t.Helper()
		for _, p := range []string{"f", "sub/f"} {
			if err := d.Receive(file(p, data), bytes.NewReader(data)); !errors.Is(err, ErrPath) {
				t.Errorf("%s: %v, want ErrPath", p, err)
			}
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			t.Errorf("files written at the link's target: %v", ents)
		}
	}
	anchored := func(t *testing.T) (*Dir, string) {
		work := filepath.Join(t.TempDir(), "work")
		if err := os.MkdirAll(filepath.Join(work, "job-1"), 0o700); err != nil {
			t.Fatal(err)
		}
		anchor, err := os.Open(work)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { anchor.Close() })
		return &Dir{Root: filepath.Join(work, "job-1"), Anchor: anchor, MaxFile: 1 << 10, MaxTotal: 3 << 10}, work
	}
	t.Run("job directory, no anchor", func(t *testing.T) {
		d := newDir(t)
		d.Root = filepath.Join(d.Root, "job-1")
		os.Mkdir(d.Root, 0o700)
		check(t, d, swap(t, d.Root))
	})
	t.Run("job directory", func(t *testing.T) {
		d, _ := anchored(t)
		check(t, d, swap(t, d.Root))
	})
	t.Run("work directory", func(t *testing.T) {
		d, work := anchored(t)
		target := swap(t, work)
		os.Mkdir(filepath.Join(target, "job-1"), 0o700)
		check(t, d, filepath.Join(target, "job-1"))
	})
	t.Run("a directory below the job's", func(t *testing.T) {
		d, _ := anchored(t)
		os.Mkdir(filepath.Join(d.Root, "sub"), 0o700)
		target := swap(t, filepath.Join(d.Root, "sub"))
		if err := d.Receive(file("sub/f", data), bytes.NewReader(data)); !errors.Is(err, ErrPath) {
			t.Errorf("sub/f: %v, want ErrPath", err)
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			t.Errorf("files written at the link's target: %v", ents)
		}
	})
}

// Uploads begun count against the job's limit before they are installed
// (several may be received at once, outside the caller's lock), and an
// aborted one gives its bytes back and leaves nothing behind.
func TestUploadsReserveTheirBytes(t *testing.T) {
	d := newDir(t)
	part := make([]byte, 1<<10)
	var ups []*Upload
	for _, name := range []string{"a", "b", "c"} {
		u, err := d.Begin(file(name, part))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ups = append(ups, u)
	}
	if _, err := d.Begin(file("d", []byte("x"))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a fourth upload over the job's limit: %v, want ErrTooLarge", err)
	}
	if err := ups[0].Write(bytes.NewReader(part[:10])); !errors.Is(err, ErrChecksum) {
		t.Errorf("a short upload: %v", err)
	}
	ups[0].Abort()
	if err := d.Receive(file("d", []byte("x")), bytes.NewReader([]byte("x"))); err != nil {
		t.Errorf("after an abort, its bytes are free again: %v", err)
	}
	if ents, _ := os.ReadDir(d.Root); len(ents) != 1 || ents[0].Name() != "d" {
		t.Errorf("the job's directory holds %v, want only d", ents)
	}
}
