package stage

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openBeneath opens name (one element, no separator) in the directory dir
// without following a symbolic link: openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS, so a link planted at name fails with ELOOP. On a
// kernel without openat2 (before 5.6) it falls back to openat with
// O_NOFOLLOW, which refuses a link just as well for a single element.
func openBeneath(dir int, name string, flags int, mode uint32) (int, error) {
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		return unix.Openat(dir, name, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, mode)
	}
	return fd, err
}
