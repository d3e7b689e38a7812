//go:build unix && !linux

package stage

import "golang.org/x/sys/unix"

// openBeneath opens name (one element, no separator) in the directory dir
// with O_NOFOLLOW: a symbolic link planted at name is refused.
func openBeneath(dir int, name string, flags int, mode uint32) (int, error) {
	return unix.Openat(dir, name, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, mode)
}
