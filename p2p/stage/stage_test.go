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
