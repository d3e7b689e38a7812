// Command jacobi is a 2-D Jacobi heat stencil that knows nothing of
// failures but its checkpoint call: a square plate whose top edge is held
// at 1 and other edges at 0, each interior point replaced by the mean of
// its four neighbours, iteration after iteration. The rows are split in
// blocks among the ranks; each iteration exchanges the boundary rows with
// the neighbouring ranks (the halo) and takes the largest change over the
// plate with an Allreduce (the residual). Every -k iterations the ranks
// checkpoint their rows (package resil). At the end rank 0 gathers the
// plate and prints a checksum of its bits:
//
//	cohort run -n 4 ./examples/jacobi
//	cohort run -n 4 --spares 1 --kill 2@1s ./examples/jacobi
//	cohort run -n 4 --spares 1 --respawn --kill 1@1s --kill 2@3s ./examples/jacobi -- -iters 8000
//
// The second run loses rank 2's process after 1 s; the spare takes rank 2,
// every rank goes back to the last checkpoint, and the checksum is the
// same, bit for bit. In the third, process 1 comes back as process 5, a
// spare again, which takes rank 2 when its process dies. With -shrink, a rank lost when no spare is left is
// dropped instead of ending the job: the ranks left go back to the last
// checkpoint, spread the plate's rows over themselves (the lost rank's
// from its buddy) and go on, to the same checksum. With -dir DIR the checkpoints also go to disk, and a
// job stopped whole (Ctrl-C) and started again with the same -dir resumes
// from the last of them. Each point is computed by the same operations in the
// same order whatever the number of ranks, so the checksum does not
// depend on -n either.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/examples/internal/appmain"
	"github.com/cohort-mp/cohort/resil"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// params are the command's settings.
type params struct {
	size, iters, every, buddies int
	pace                        time.Duration
	// compare: after each checkpoint, time an Allgather of a state of the
	// same size, for the cost of a checkpoint against a plain collective
	compare bool
	// verbose: rank 0 says when each checkpoint committed
	verbose bool
	// shrink: continue on fewer ranks when no spare is left
	shrink bool
	stdout io.Writer
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jacobi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var p params
	fs.IntVar(&p.size, "size", 256, "interior `points` along each side of the plate")
	fs.IntVar(&p.iters, "iters", 2000, "Jacobi `iterations`")
	fs.IntVar(&p.every, "k", 100, "checkpoint every this many `iterations`")
	fs.IntVar(&p.buddies, "buddies", 1, "other ranks keeping a copy of each rank's checkpoint")
	dir := fs.String("dir", "", "also keep each rank's checkpoints in this `directory`; a job started again with it resumes from there")
	fs.DurationVar(&p.pace, "pace", 0, "pause between two iterations (to make a short run last long enough to kill a rank in)")
	fs.BoolVar(&p.compare, "compare", false, "time each checkpoint against an Allgather of the same size (rank 0 prints both)")
	fs.BoolVar(&p.verbose, "v", false, "rank 0 prints a line as each checkpoint commits")
	fs.BoolVar(&p.shrink, "shrink", false, "when a rank fails and no spare is left, go on with the ranks left instead of failing")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	p.stdout = stdout
	switch {
	case p.size < 1:
		fmt.Fprintf(stderr, "jacobi: -size %d: want at least 1 point\n", p.size)
		return 2
	case p.iters < 0:
		fmt.Fprintf(stderr, "jacobi: -iters %d: want 0 or more\n", p.iters)
		return 2
	case p.every < 1:
		fmt.Fprintf(stderr, "jacobi: -k %d: want a checkpoint interval of at least 1\n", p.every)
		return 2
	}
	ctx, s, done, err := appmain.Start("jacobi", *timeout, stderr, comm.AllowSpares())
	if err != nil {
		return 1
	}
	defer done()
	j, err := resil.New(s, resil.Config{Buddies: p.buddies, Dir: *dir, Shrink: p.shrink})
	if err != nil {
		fmt.Fprintf(stderr, "jacobi: %v\n", err)
		return 2
	}
	me := s.Process()
	var res result
	announced := false
	err = j.Run(ctx, func(ctx context.Context, c *comm.Comm, state []byte, epoch int) error {
		if j.Stats().TookOver && !announced {
			announced = true
			if epoch == 0 {
				fmt.Fprintf(stdout, "jacobi: process %d took rank %d, starting afresh (no checkpoint was committed)\n", me, c.Rank())
			} else {
				fmt.Fprintf(stdout, "jacobi: process %d took rank %d, resuming from checkpoint epoch %d\n", me, c.Rank(), epoch)
			}
		}
		if rs := j.Restored(); rs.Epoch > 0 && rs.Ranks != c.Size() {
			var err error
			if state, err = spread(ctx, c, p.size, rs); err != nil {
				return err
			}
			if c.Rank() == 0 {
				fmt.Fprintf(stdout, "jacobi: continuing on %d ranks from checkpoint epoch %d of %d ranks\n", c.Size(), rs.Epoch, rs.Ranks)
			}
		}
		return solve(ctx, c, j, p, state, &res)
	})
	if err != nil {
		fmt.Fprintf(stderr, "jacobi: process %d: %v\n", me, err)
		return 1
	}
	if j.Rank() == 0 {
		st := j.Stats()
		fmt.Fprintf(stdout, "jacobi: %d×%d plate, %d iterations on %d ranks: residual %.6e, checksum %016x\n",
			p.size, p.size, p.iters, res.ranks, res.residual, res.checksum)
		fmt.Fprintf(stdout, "jacobi: %d checkpoints (%d B sent to buddies by rank 0), %d restarts %v\n",
			st.Checkpoints, st.CheckpointBytes, st.Restarts, st.Recoveries)
		if st.Resumed > 0 {
			fmt.Fprintf(stdout, "jacobi: resumed from checkpoint epoch %d on disk (%s)\n", st.Resumed, *dir)
		}
		if m := res.timed; m > 0 {
			fmt.Fprintf(stdout, "jacobi: rank 0, %d B of state: checkpoint %.0f µs, Allgather of the same size %.0f µs (means of %d)\n",
				res.stateBytes, micros(res.ckpt, m), micros(res.gather, m), m)
		}
	}
	return 0
}

// result is what rank 0 reports.
type result struct {
	ranks    int // at the end
	residual float64
	checksum uint64
	// With -compare: checkpoints timed, their total time and that of the
	// Allgathers of the same size, and the state's size.
	timed        int
	ckpt, gather time.Duration
	stateBytes   int
}

func micros(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

// block returns the first global interior row of rank r and its number
// of rows: the rows split as evenly as they go, the first ranks taking
// one more.
func block(size, n, r int) (first, rows int) {
	q, extra := size/n, size%n
	first = r*q + min(r, extra)
	rows = q
	if r < extra {
		rows++
	}
	return first, rows
}

// solve is the resilient function: it resumes from state (nil: the
// plate's first iteration) and runs to p.iters.
func solve(ctx context.Context, c *comm.Comm, j *resil.Job, p params, state []byte, res *result) error {
	n, r := c.Size(), c.Rank()
	_, rows := block(p.size, n, r)
	w := p.size + 2 // a row with its two boundary columns
	// grid holds the halo row above, rows, and the halo row below.
	grid := make([]float64, (rows+2)*w)
	next := make([]float64, len(grid))
	it := 0
	if state != nil {
		var err error
		if it, err = decode(state, grid[w:(rows+1)*w]); err != nil {
			return err
		}
	}
	if r == 0 {
		for x := range w {
			grid[x], next[x] = 1, 1 // the hot top edge
		}
	}
	up, down := r-1, r+1
	var residual float64
	for ; it < p.iters; it++ {
		if it%p.every == 0 && it > 0 {
			state := encode(it, grid[w:(rows+1)*w])
			start := time.Now()
			if err := j.Checkpoint(ctx, state); err != nil {
				return err
			}
			if p.verbose && r == 0 {
				fmt.Fprintf(p.stdout, "jacobi: checkpoint committed at iteration %d\n", it)
			}
			if p.compare {
				if err := timeAllgather(ctx, c, state, start, res); err != nil {
					return err
				}
			}
		}
		if err := halo(ctx, c, grid, rows, w, up, down); err != nil {
			return err
		}
		local := 0.0
		for y := 1; y <= rows; y++ {
			for x := 1; x <= p.size; x++ {
				v := 0.25 * (grid[(y-1)*w+x] + grid[(y+1)*w+x] + grid[y*w+x-1] + grid[y*w+x+1])
				local = max(local, math.Abs(v-grid[y*w+x]))
				next[y*w+x] = v
			}
		}
		grid, next = next, grid
		red := []float64{local}
		if err := comm.Allreduce(ctx, c, red, red, comm.Max[float64]()); err != nil {
			return err
		}
		residual = red[0]
		if p.pace > 0 {
			time.Sleep(p.pace)
		}
	}
	sum, err := checksum(ctx, c, p.size, grid[w:(rows+1)*w])
	if err != nil {
		return err
	}
	res.ranks, res.residual, res.checksum = n, residual, sum
	return nil
}

// spread is the start of an attempt on fewer ranks than took the last
// checkpoint (-shrink): every rank lays the rows of the states that fall
// to it (rs) on a plate of zeros, a sum over the ranks assembles the
// whole plate (each point from one rank, the rest adding exact zeros),
// and the rank returns a checkpoint of its block of rows under the new
// number of ranks, for solve to start from.
func spread(ctx context.Context, c *comm.Comm, size int, rs resil.Restored) ([]byte, error) {
	w := size + 2
	plate := make([]float64, size*w)
	it := 0
	for slot, state := range rs.States {
		first, rows := block(size, rs.Ranks, slot)
		var err error
		if it, err = decode(state, plate[first*w:(first+rows)*w]); err != nil {
			return nil, err
		}
	}
	if err := comm.Allreduce(ctx, c, plate, plate, comm.Sum[float64]()); err != nil {
		return nil, err
	}
	first, rows := block(size, c.Size(), c.Rank())
	return encode(it, plate[first*w:(first+rows)*w]), nil
}

// timeAllgather adds to res the time of the checkpoint that began at
// start and of an Allgather of state (padded to the largest rank's size).
func timeAllgather(ctx context.Context, c *comm.Comm, state []byte, start time.Time, res *result) error {
	ckpt := time.Since(start)
	size := []int64{int64(len(state))}
	if err := comm.Allreduce(ctx, c, size, size, comm.Max[int64]()); err != nil {
		return err
	}
	send := make([]byte, size[0])
	copy(send, state)
	recv := make([]byte, int(size[0])*c.Size())
	t := time.Now()
	if err := comm.Allgather(ctx, c, send, recv); err != nil {
		return err
	}
	res.gather += time.Since(t)
	res.ckpt += ckpt
	res.timed++
	res.stateBytes = len(state)
	return nil
}

// halo sends this rank's first row up and its last row down, and
// receives the neighbours' into the halo rows. The plate's edges have no
// neighbour: their halo rows stay the boundary values.
func halo(ctx context.Context, c *comm.Comm, grid []float64, rows, w, up, down int) error {
	const tagUp, tagDown = 1, 2
	var reqs []*comm.Request
	if up >= 0 {
		reqs = append(reqs, comm.Isend(c, grid[w:2*w], up, tagUp), comm.Irecv(c, grid[:w], up, tagDown))
	}
	if down < c.Size() {
		reqs = append(reqs, comm.Isend(c, grid[rows*w:(rows+1)*w], down, tagDown), comm.Irecv(c, grid[(rows+1)*w:], down, tagUp))
	}
	return comm.WaitAll(ctx, reqs...)
}

// checksum gathers the plate at rank 0 and returns the FNV-1a hash of its
// points' bits, row by row (0 at the other ranks).
func checksum(ctx context.Context, c *comm.Comm, size int, mine []float64) (uint64, error) {
	n := c.Size()
	counts := make([]int, n)
	for r := range n {
		_, rows := block(size, n, r)
		counts[r] = rows * (size + 2)
	}
	var all []float64
	if c.Rank() == 0 {
		all = make([]float64, size*(size+2))
	}
	if err := comm.Gatherv(ctx, c, mine, all, counts, 0); err != nil {
		return 0, err
	}
	h := fnv.New64a()
	var b [8]byte
	for _, v := range all {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	return h.Sum64(), nil
}

// encode is a rank's checkpoint: the iteration, then its rows' bits.
func encode(it int, rows []float64) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+8*len(rows)), uint64(it))
	for _, v := range rows {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// errState: a checkpoint that does not fit this rank's block.
var errState = errors.New("jacobi: a checkpoint of the wrong size for this rank's rows")

// decode restores rows from a checkpoint and returns its iteration.
func decode(state []byte, rows []float64) (int, error) {
	if len(state) != 8+8*len(rows) {
		return 0, errState
	}
	for i := range rows {
		rows[i] = math.Float64frombits(binary.LittleEndian.Uint64(state[8+8*i:]))
	}
	return int(binary.LittleEndian.Uint64(state)), nil
}
