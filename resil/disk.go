package resil

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cohort-mp/cohort/comm"
)

// Copies on disk, for a whole-job restart. The in-memory checkpoints
// survive the loss of processes, not of the job; with Config.Dir each
// rank also writes its own state of every committed epoch to
// Dir/rank-R.epoch-E.ckpt, after the commit, and keeps its last two.
// A job started again with the same Dir and number of ranks begins at the
// newest epoch every rank has on disk: a rank writes epoch E only after E
// committed, and E could commit only once every rank had written E−1, so
// the ranks' newest epochs differ by one at most, and the older of them
// is on every rank's disk.

// diskMagic starts every file: a file of something else is refused.
const diskMagic = "cohort resil checkpoint\n"

// ErrDisk: a copy on disk could not be written, or the copies in
// Config.Dir do not give every rank the same epoch.
var ErrDisk = errors.New("resil: checkpoint on disk")

func diskPath(dir string, r, e int) string {
	return filepath.Join(dir, fmt.Sprintf("rank-%d.epoch-%d.ckpt", r, e))
}

// encodeDisk is a file: the magic, the number of ranks, the epoch, the
// state's length, the state, and an FNV-1a hash of all before it (a torn
// or altered file is not taken).
func encodeDisk(n, e int, state []byte) []byte {
	b := append([]byte(diskMagic), make([]byte, 24)...)
	binary.LittleEndian.PutUint64(b[len(diskMagic):], uint64(n))
	binary.LittleEndian.PutUint64(b[len(diskMagic)+8:], uint64(e))
	binary.LittleEndian.PutUint64(b[len(diskMagic)+16:], uint64(len(state)))
	b = append(b, state...)
	h := fnv.New64a()
	h.Write(b)
	return binary.LittleEndian.AppendUint64(b, h.Sum64())
}

// decodeDisk reads a file of encodeDisk.
func decodeDisk(b []byte) (n, e int, state []byte, err error) {
	head := len(diskMagic) + 24
	if len(b) < head+8 || string(b[:len(diskMagic)]) != diskMagic {
		return 0, 0, nil, fmt.Errorf("%w: not a checkpoint file", ErrDisk)
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	h := fnv.New64a()
	h.Write(body)
	if h.Sum64() != sum {
		return 0, 0, nil, fmt.Errorf("%w: a checkpoint file whose hash does not match (torn or altered)", ErrDisk)
	}
	n = int(binary.LittleEndian.Uint64(b[len(diskMagic):]))
	e = int(binary.LittleEndian.Uint64(b[len(diskMagic)+8:]))
	size := binary.LittleEndian.Uint64(b[len(diskMagic)+16:])
	if size != uint64(len(body)-head) || n < 1 || e < 1 {
		return 0, 0, nil, fmt.Errorf("%w: a checkpoint file with a bad header", ErrDisk)
	}
	return n, e, body[head:], nil
}

// writeDiskCopy writes rank r's state of epoch e (of a job of n ranks) to
// dir, through a temporary file synced and renamed, then removes the
// rank's files of epochs before e−1.
func writeDiskCopy(dir string, r, n, e int, state []byte) error {
	path := diskPath(dir, r, e)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.Write(encodeDisk(n, e, state))
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: rank %d, epoch %d: %w", ErrDisk, r, e, err)
	}
	old, _ := readDiskEpochs(dir, r)
	for _, o := range old {
		if o < e-1 {
			os.Remove(diskPath(dir, r, o))
		}
	}
	return nil
}

// readDiskEpochs lists the epochs of rank r's files in dir.
func readDiskEpochs(dir string, r int) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("rank-%d.epoch-", r)
	var out []int
	for _, ent := range entries {
		name := ent.Name()
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		digits, ok := strings.CutSuffix(rest, ".ckpt")
		if e, err := strconv.Atoi(digits); ok && err == nil && e > 0 {
			out = append(out, e)
		}
	}
	return out, nil
}

// readDiskCopy returns rank r's state of epoch e from dir, if a valid
// file for a job of n ranks holds it.
func readDiskCopy(dir string, r, n, e int) ([]byte, bool) {
	b, err := os.ReadFile(diskPath(dir, r, e))
	if err != nil {
		return nil, false
	}
	fn, fe, state, err := decodeDisk(b)
	if err != nil || fn != n || fe != e {
		return nil, false
	}
	return state, true
}

// resumeFromDisk is the first attempt's start at a rank of a job with
// Config.Dir: the ranks agree on the newest epoch they all have on disk,
// each reads its state of it, and they commit it again in memory (the
// copies at the buddies included), so that the job goes on from there.
// Without any file it does nothing: the job starts afresh.
func (j *Job) resumeFromDisk(ctx context.Context) error {
	r := j.cc.Rank()
	epochs, err := readDiskEpochs(j.dir, r)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrDisk, err)
	}
	newest := []int64{0}
	for _, e := range epochs {
		if _, ok := readDiskCopy(j.dir, r, j.n, e); ok {
			newest[0] = max(newest[0], int64(e))
		}
	}
	if err := comm.Allreduce(ctx, j.cc, newest, newest, comm.Min[int64]()); err != nil {
		return err
	}
	e := int(newest[0])
	if e == 0 {
		return nil
	}
	state, ok := readDiskCopy(j.dir, r, j.n, e)
	flag := 0
	if ok {
		flag = 1
	}
	v, err := j.cc.Agree(ctx, flag)
	switch {
	case err != nil:
		return err
	case v != 1:
		return fmt.Errorf("%w: the files in %s do not give every rank epoch %d", ErrDisk, j.dir, e)
	}
	if err := j.commit(ctx, e, state); err != nil {
		return err
	}
	j.stats.Resumed = e
	return nil
}
