// Package stage receives a job's files (the program and its inputs) into
// the job's directory on a peer daemon, safely: every file's SHA-256 is
// checked against the one the submitter announced, files and the whole job
// are size-limited, and no file may land outside the job's directory — a
// relative path only, no "..", no absolute path, no path through a symbolic
// link. A file that fails a check is removed and the error says why;
// nothing else in the directory is touched.
//
// Paths are checked twice: by name (Clean), then while opening — every
// element is opened relative to its parent's descriptor, never following
// a symbolic link (openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS on
// Linux, openat with O_NOFOLLOW elsewhere), starting from the open work
// directory the daemon checked (Dir.Anchor). A link planted anywhere along
// the way meanwhile, the job's directory itself included, makes the file
// refused rather than written at the link's target.
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

	"golang.org/x/sys/unix"
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
	// Root is the job's directory.
	Root string
	// Anchor, if not nil, is the open directory holding Root (the
	// daemon's work directory). Files are then reached through it: Root
	// is opened beneath it without following a link, and Root's parent
	// must still name it. With Anchor nil, Root is opened by its path
	// (refused if it is a link; its parents are trusted).
	Anchor   *os.File
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
	mode := uint32(0o600)
	if f.Exec {
		mode = 0o700
	}
	parent, name, err := d.openParent(filepath.ToSlash(filepath.Clean(filepath.FromSlash(f.Path))))
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	// O_EXCL: never over an existing file (nor a link, which openBeneath
	// refuses anyway).
	fd, err := openBeneath(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, mode)
	if err != nil {
		return pathErr(f.Path, err)
	}
	out := os.NewFile(uintptr(fd), full)
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
		unix.Unlinkat(parent, name, 0)
		return err
	}
	d.used += f.Size
	return nil
}

// openParent opens the directory that will hold rel (a cleaned relative
// path with '/' separators), making the missing directories (0700) on the
// way, and returns its descriptor and rel's last element.
func (d *Dir) openParent(rel string) (int, string, error) {
	dir, err := d.openRoot()
	if err != nil {
		return -1, "", err
	}
	elems := strings.Split(rel, "/")
	for _, e := range elems[:len(elems)-1] {
		if err := unix.Mkdirat(dir, e, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(dir)
			return -1, "", fmt.Errorf("stage: %s: %w", rel, err)
		}
		next, err := openBeneath(dir, e, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(dir)
		if err != nil {
			return -1, "", pathErr(rel, err)
		}
		dir = next
	}
	return dir, elems[len(elems)-1], nil
}

// openRoot opens the job's directory, refusing a symbolic link.
func (d *Dir) openRoot() (int, error) {
	if d.Anchor == nil {
		fd, err := unix.Open(d.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, rootErr(d.Root, err)
		}
		return fd, nil
	}
	// The parent's path must still name the anchor: a work directory
	// swapped for a link (or anything else) is refused, not merely
	// bypassed.
	want, err := d.Anchor.Stat()
	if err != nil {
		return -1, fmt.Errorf("stage: %w", err)
	}
	if got, err := os.Lstat(filepath.Dir(d.Root)); err != nil || !os.SameFile(got, want) {
		return -1, fmt.Errorf("%w: %s is no longer the work directory the daemon opened (replaced, or a symbolic link)", ErrPath, filepath.Dir(d.Root))
	}
	fd, err := openBeneath(int(d.Anchor.Fd()), filepath.Base(d.Root), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, rootErr(d.Root, err)
	}
	return fd, nil
}

func rootErr(root string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%w: the job's directory %s is a symbolic link or not a directory", ErrPath, root)
	}
	return fmt.Errorf("stage: the job's directory %s: %w", root, err)
}

// pathErr names a refusal to go through a link as ErrPath.
func pathErr(p string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%w: %q goes through a symbolic link or a file", ErrPath, p)
	}
	return fmt.Errorf("stage: %s: %w", p, err)
}

func equal(a, b []byte) bool { return string(a) == string(b) }
