// Package stage receives a job's files (the program and its inputs) into
// the job's directory on a peer daemon, safely: every file's SHA-256 is
// checked against the one the submitter announced, files and the whole job
// are size-limited, and no file may land outside the job's directory — a
// relative path only, no "..", no absolute path, no path through a symbolic
// link. A file that fails a check is removed and the error says why;
// nothing else in the directory is touched.
package stage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Errors of the package.
var (
	// ErrPath: a path that is absolute, climbs out with "..", is empty,
	// or goes through a symbolic link.
	ErrPath = errors.New("stage: path outside the job's directory")
	// ErrTooLarge: a file or the job's files together exceed the limit.
	ErrTooLarge = errors.New("stage: too large")
	// ErrChecksum: the received bytes' SHA-256 is not the announced one.
	ErrChecksum = errors.New("stage: checksum mismatch")
)

// File is a file announced by the submitter.
type File struct {
	// Path is relative to the job's directory, with '/' separators.
	Path string
	// Size in bytes and SHA256 (hex) of the contents.
	Size   int64
	SHA256 string
	// Exec marks the program (mode 0700 instead of 0600).
	Exec bool
}

// Dir is a job's directory on a daemon, with its limits.
type Dir struct {
	Root     string
	MaxFile  int64 // bytes per file
	MaxTotal int64 // bytes for the whole job
	used     int64
}

// Clean checks p and returns the absolute path it names inside d.Root.
func (d *Dir) Clean(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) || filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) {
		return "", fmt.Errorf("%w: %q", ErrPath, p)
	}
	clean := filepath.Clean(filepath.FromSlash(p))
	if clean == "." || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q", ErrPath, p)
	}
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q has a \"..\" element", ErrPath, p)
		}
	}
	full := filepath.Join(d.Root, clean)
	// No component of the path (below Root) may be a symbolic link.
	rel := d.Root
	for _, part := range strings.Split(clean, string(filepath.Separator)) {
		rel = filepath.Join(rel, part)
		st, err := os.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("stage: %w", err)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%w: %q goes through a symbolic link", ErrPath, p)
		}
	}
	return full, nil
}

// Receive writes f's contents from r into the job's directory, checking
// path, size and checksum. On any failure the partial file is removed.
func (d *Dir) Receive(f File, r io.Reader) error {
	full, err := d.Clean(f.Path)
	if err != nil {
		return err
	}
	if f.Size < 0 || f.Size > d.MaxFile {
		return fmt.Errorf("%w: %s is %d bytes, limit %d per file", ErrTooLarge, f.Path, f.Size, d.MaxFile)
	}
	if d.used+f.Size > d.MaxTotal {
		return fmt.Errorf("%w: %s would bring the job to %d bytes, limit %d", ErrTooLarge, f.Path, d.used+f.Size, d.MaxTotal)
	}
	want, err := hex.DecodeString(f.SHA256)
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("%w: %s: %q is not a SHA-256 in hex", ErrChecksum, f.Path, f.SHA256)
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	mode := os.FileMode(0o600)
	if f.Exec {
		mode = 0o700
	}
	// O_EXCL and O_NOFOLLOW: never through a link planted meanwhile, never
	// over an existing file.
	out, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, mode)
	if err != nil {
		return fmt.Errorf("stage: %s: %w", f.Path, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	cerr := out.Close()
	switch {
	case err != nil || cerr != nil:
		err = fmt.Errorf("stage: %s: %w", f.Path, errors.Join(err, cerr))
	case n != f.Size:
		err = fmt.Errorf("%w: %s: received %d bytes, announced %d", ErrChecksum, f.Path, n, f.Size)
	case !equal(h.Sum(nil), want):
		err = fmt.Errorf("%w: %s", ErrChecksum, f.Path)
	}
	if err != nil {
		os.Remove(full)
		return err
	}
	d.used += f.Size
	return nil
}

func equal(a, b []byte) bool { return string(a) == string(b) }
