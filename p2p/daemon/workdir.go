package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openWorkDir makes the work directory when missing (0700; missing
// parents 0700 too) and opens it, refusing one that is a symbolic link,
// is not the daemon's user's, or is open to its group or others: the
// jobs' programs, inputs and outputs live below it, and another user able
// to enter it could read them or plant links for the daemon to follow.
// The checks are made on the opened descriptor, so the directory checked
// is the one used.
//
// When jobs run under uids of their own (shared), the directory is made
// 0711: each job must traverse it to reach its own directory, but none
// may list it, and every job directory is 0700 and its job's.
func openWorkDir(path string, shared bool) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("daemon: work_dir: %w", err)
	}
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("daemon: work_dir: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("%w: work_dir %s is a symbolic link or not a directory: give the directory itself", ErrConfig, path)
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: work_dir %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("daemon: work_dir %s: %w", path, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: work_dir %s belongs to uid %d, not to the daemon's user (uid %d): use a directory of the daemon's own", ErrConfig, path, st.Uid, uid)
	}
	want, open := uint32(0o700), uint32(0o077)
	if shared {
		want, open = 0o711, 0o066
	}
	if perm := uint32(st.Mode) & 0o777; perm&open != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: work_dir %s has mode %#o, open to its group or others: chmod %o it", ErrConfig, path, perm, want)
	}
	if err := unix.Fchmod(fd, want); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("daemon: work_dir %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}
