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
	"crypto/rand"
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
	used     int64 // bytes of the files installed
	pending  int64 // bytes of the uploads begun, not yet installed or aborted
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
// It is Begin, Write and Install in one call.
func (d *Dir) Receive(f File, r io.Reader) error {
	u, err := d.Begin(f)
	if err != nil {
		return err
	}
	if err := u.Write(r); err != nil {
		u.Abort()
		return err
	}
	if err := u.Install(); err != nil {
		u.Abort()
		return err
	}
	return nil
}

// Upload is a file being received: Begin checks it and counts its bytes
// against the job's limit, Write receives its contents into a temporary
// file of the job's directory, Install puts that file at its path, Abort
// gives up. Begin, Install and Abort touch the Dir and must be serialized
// with its other calls (the daemon holds the job's lock); Write does not,
// so a slow sender never holds that lock.
type Upload struct {
	d    *Dir
	f    File
	want []byte
	tmp  string // the temporary file's name in Root, once Write made it
	done bool   // installed or aborted
}

// Begin checks f (path, size, checksum syntax, that nothing is already at
// its path) and reserves its bytes in the job's limit until Install or
// Abort.
func (d *Dir) Begin(f File) (*Upload, error) {
	full, err := d.Clean(f.Path)
	if err != nil {
		return nil, err
	}
	if f.Size < 0 || f.Size > d.MaxFile {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d per file", ErrTooLarge, f.Path, f.Size, d.MaxFile)
	}
	if d.used+d.pending+f.Size > d.MaxTotal {
		return nil, fmt.Errorf("%w: %s would bring the job to %d bytes, limit %d", ErrTooLarge, f.Path, d.used+d.pending+f.Size, d.MaxTotal)
	}
	want, err := hex.DecodeString(f.SHA256)
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("%w: %s: %q is not a SHA-256 in hex", ErrChecksum, f.Path, f.SHA256)
	}
	if _, err := os.Lstat(full); err == nil {
		return nil, fmt.Errorf("stage: %s: %w", f.Path, fs.ErrExist)
	}
	d.pending += f.Size
	return &Upload{d: d, f: f, want: want}, nil
}

// Write receives the file's contents from r into a temporary file of the
// job's directory and checks their size and checksum.
func (u *Upload) Write(r io.Reader) error {
	f := u.f
	mode := uint32(0o600)
	if f.Exec {
		mode = 0o700
	}
	root, err := u.d.openRoot()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	var b [8]byte
	rand.Read(b[:])
	tmp := ".stage-" + hex.EncodeToString(b[:])
	fd, err := openBeneath(root, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, mode)
	if err != nil {
		return pathErr(f.Path, err)
	}
	u.tmp = tmp
	out := os.NewFile(uintptr(fd), tmp)
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	cerr := out.Close()
	switch {
	case err != nil || cerr != nil:
		return fmt.Errorf("stage: %s: %w", f.Path, errors.Join(err, cerr))
	case n != f.Size:
		return fmt.Errorf("%w: %s: received %d bytes, announced %d", ErrChecksum, f.Path, n, f.Size)
	case !equal(h.Sum(nil), u.want):
		return fmt.Errorf("%w: %s", ErrChecksum, f.Path)
	}
	return nil
}

// Install puts the received file at its path (making its directories),
// never over an existing file and never through a link, and counts its
// bytes as the job's.
func (u *Upload) Install() error {
	if u.done || u.tmp == "" {
		return fmt.Errorf("stage: %s: nothing received to install", u.f.Path)
	}
	root, err := u.d.openRoot()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	parent, name, err := u.d.openParent(filepath.ToSlash(filepath.Clean(filepath.FromSlash(u.f.Path))))
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	// A hard link, then the temporary name removed: unlike a rename, the
	// link fails if anything (a file, a link) is already at the path.
	if err := unix.Linkat(root, u.tmp, parent, name, 0); err != nil {
		return pathErr(u.f.Path, err)
	}
	unix.Unlinkat(root, u.tmp, 0)
	u.done = true
	u.d.pending -= u.f.Size
	u.d.used += u.f.Size
	return nil
}

// Abort removes the temporary file and gives the reserved bytes back; it
// does nothing after Install or a first Abort.
func (u *Upload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.d.pending -= u.f.Size
	if u.tmp == "" {
		return
	}
	if root, err := u.d.openRoot(); err == nil {
		unix.Unlinkat(root, u.tmp, 0)
		unix.Close(root)
	}
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
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("stage: %s: %w", p, fs.ErrExist)
	}
	return fmt.Errorf("stage: %s: %w", p, err)
}

func equal(a, b []byte) bool { return string(a) == string(b) }
