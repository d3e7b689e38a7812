// Command pingpong bounces a message between ranks 0 and 1 of a job and
// prints the one-way latency (half the mean round trip) for each message
// size, with the typed point-to-point calls of package comm:
//
//	cohort run -n 2 ./examples/pingpong
//	cohort run -n 2 ./examples/pingpong -- -sizes 8,1024,1048576 -iters 200
//
// Ranks above 1, if any, take no part. `cohort bench p2p` is the full
// OSU-style measurement beside raw TCP and Open MPI.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/launch"
)

func main() {
	sizesFlag := flag.String("sizes", "8,1024,65536,1048576", "message `sizes` in bytes, comma-separated")
	iters := flag.Int("iters", 1000, "round trips per size (after iters/10 warm-up rounds)")
	flag.Parse()
	sizes, err := parseSizes(*sizesFlag)
	if err != nil || *iters < 1 {
		fmt.Fprintf(os.Stderr, "pingpong: bad -sizes or -iters: %v\n", err)
		os.Exit(2)
	}
	ctx := context.Background()
	s, err := comm.Init(ctx)
	if errors.Is(err, launch.ErrNotLaunched) {
		fmt.Fprintln(os.Stderr, "pingpong: start me with `cohort run -n 2 ./examples/pingpong`")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
	w := s.World()
	if w.Size() < 2 {
		fmt.Fprintln(os.Stderr, "pingpong: needs at least 2 ranks (cohort run -n 2)")
		os.Exit(2)
	}
	if w.Rank() == 0 {
		fmt.Printf("# %d round trips per size between ranks 0 and 1\n# %10s %14s\n", *iters, "bytes", "latency (µs)")
	}
	for _, size := range sizes {
		lat, err := PingPong(ctx, w, size, *iters)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pingpong: rank %d: %v\n", w.Rank(), err)
			os.Exit(1)
		}
		if w.Rank() == 0 {
			fmt.Printf("  %10d %14.2f\n", size, float64(lat.Nanoseconds())/1e3)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Finalize(fctx); err != nil {
		fmt.Fprintf(os.Stderr, "pingpong: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
}

// PingPong bounces a message of size bytes between ranks 0 and 1 of w,
// iters times after iters/10 warm-up round trips, and returns the one-way
// latency on rank 0 (zero on the other ranks). Each round trip checks
// that the message came back whole.
func PingPong(ctx context.Context, w *comm.Comm, size, iters int) (time.Duration, error) {
	const tag = 1
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	warm := iters / 10
	var start time.Time
	for i := range warm + iters {
		if i == warm {
			start = time.Now()
		}
		switch w.Rank() {
		case 0:
			if err := w.Send(ctx, buf, 1, tag); err != nil {
				return 0, err
			}
			st, err := w.Recv(ctx, buf, 1, tag)
			if err != nil {
				return 0, err
			}
			if st.Count != size {
				return 0, fmt.Errorf("pingpong: got %d bytes back, sent %d", st.Count, size)
			}
		case 1:
			if _, err := w.Recv(ctx, buf, 0, tag); err != nil {
				return 0, err
			}
			if err := w.Send(ctx, buf, 0, tag); err != nil {
				return 0, err
			}
		}
	}
	if w.Rank() != 0 {
		return 0, nil
	}
	for i := range buf {
		if buf[i] != byte(i) {
			return 0, fmt.Errorf("pingpong: byte %d of %d changed in transit", i, size)
		}
	}
	return time.Since(start) / time.Duration(2*iters), nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a size in bytes", f)
		}
		out = append(out, n)
	}
	return out, nil
}
