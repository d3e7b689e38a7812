//go:build linux

package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cohort-mp/cohort/launch"
)

// osuShm runs the latency loop over raw shared memory: the two ranks map
// one file of /dev/shm, and each message is copied into its sender's
// half, its length and then a sequence number stored after it, which the
// receiver polls before it copies the message out. It is the floor of a
// same-host path on this machine in this run (a line of data and a flag
// moving between two cores, and two copies), as raw TCP is of the TCP
// path's: no matching, no framing, no wake-ups.
func osuShm(ctx context.Context, out io.Writer, o *OSUWork) error {
	if o.Mode != "latency" {
		return fmt.Errorf("%w: raw shared memory runs the latency loop only", ErrOSU)
	}
	boot, err := launch.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if boot.Size != 2 {
		return fmt.Errorf("latency needs 2 ranks, not %d", boot.Size)
	}
	half := (o.MaxSize + 4095) &^ 4095
	size := shmHeader + 2*half
	sum := sha256.Sum256([]byte(boot.JobID))
	dir := "/dev/shm"
	if _, err := os.Stat(dir); err != nil {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "cohort-osu-"+hex.EncodeToString(sum[:8]))
	var f *os.File
	if boot.Rank == 0 {
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return err
		}
		defer os.Remove(path) // also if rank 1 never maps it
		if err := f.Truncate(int64(size)); err != nil {
			f.Close()
			return err
		}
	}
	// The registration is the barrier after which rank 1 finds the file;
	// the listener only gives it an address to register.
	ln, reg, err := listenRegister(ctx, boot)
	if err != nil {
		return err
	}
	defer closeBoth(ln, reg)
	if boot.Rank == 1 {
		if f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			return err
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	f.Close()
	if err != nil {
		return err
	}
	defer syscall.Munmap(mem)
	word := func(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&mem[off])) }
	me, peer := boot.Rank, 1-boot.Rank
	// Each direction's flag (sequence, then length) on a line of its own,
	// two lines apart (no adjacent-line prefetch between them).
	seq := [2]*atomic.Uint64{word(0), word(shmFlagGap)}
	length := [2]*atomic.Uint64{word(8), word(shmFlagGap + 8)}
	data := [2][]byte{mem[shmHeader : shmHeader+half], mem[shmHeader+half:]}
	ready := word(2 * shmFlagGap)
	if boot.Rank == 1 {
		ready.Store(1)
	} else {
		if err := shmWait(ctx, func() bool { return ready.Load() == 1 }); err != nil {
			return err
		}
		os.Remove(path) // both have it mapped
	}
	sbuf, rbuf := make([]byte, o.MaxSize), make([]byte, o.MaxSize)
	for i := range sbuf {
		sbuf[i] = 'a'
	}
	var sent, got uint64
	send := func(n int) {
		copy(data[me], sbuf[:n])
		length[me].Store(uint64(n))
		sent++
		seq[me].Store(sent)
	}
	recv := func() error {
		got++
		want := got
		if err := shmWait(ctx, func() bool { return seq[peer].Load() == want }); err != nil {
			return err
		}
		n := length[peer].Load()
		if n > uint64(len(rbuf)) {
			return errors.New("raw shared memory: a message longer than the buffer")
		}
		copy(rbuf, data[peer][:n])
		return nil
	}
	for _, n := range o.Sizes {
		loop, skip := o.Counts(n)
		var start time.Time
		for i := range loop + skip {
			if i == skip {
				start = time.Now()
			}
			if boot.Rank == 0 {
				send(n)
				err = recv()
			} else if err = recv(); err == nil {
				send(n)
			}
			if err != nil {
				return err
			}
		}
		if boot.Rank == 0 {
			fmt.Fprintf(out, "%d %.3f\n", n, osuFigure(o, n, loop, time.Since(start)))
		}
	}
	return nil
}

// The raw shared memory's layout: the flags in the first page, then each
// rank's half for its messages.
const (
	shmHeader  = 4096
	shmFlagGap = 128
)

// shmWait polls until done, yielding to the process's goroutines now and
// then, and gives up when ctx ends (a peer that died: the launcher ends
// the job).
func shmWait(ctx context.Context, done func() bool) error {
	for spins := 1; !done(); spins++ {
		if spins%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			runtime.Gosched()
		}
	}
	return nil
}
