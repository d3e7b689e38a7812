//go:build !linux

package bench

import (
	"context"
	"fmt"
	"io"
)

// osuShm needs Linux's /dev/shm and mmap.
func osuShm(ctx context.Context, out io.Writer, o *OSUWork) error {
	return fmt.Errorf("%w: raw shared memory runs on Linux only", ErrOSU)
}
