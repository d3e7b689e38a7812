package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// FloodWork is what one rank of the handshake flood benchmark is asked to
// do (see [Flood]): rank 0 pings rank 1 with FloodMessage bytes, one round
// trip every Interval (0: back to back), until the file StopPath exists or
// Limit has passed, and writes each round trip to SamplesPath.
type FloodWork struct {
	SamplesPath string
	StopPath    string
	Interval    time.Duration
	Limit       time.Duration
}

// FloodMessage is the size in bytes of the ping-pong's messages.
const FloodMessage = 8

// floodSampleSize is the size of one sample in the samples file: the
// round trip's start (Unix ns) and its length (ns), big-endian.
const floodSampleSize = 16

// floodStopCheck is how often rank 0 looks for the stop file.
const floodStopCheck = 50 * time.Millisecond

// floodTag is the ping-pong's message tag.
const floodTag = 7

// ErrFlood wraps the errors of the flood benchmark about what it is asked.
var ErrFlood = errors.New("bench: bad flood benchmark arguments")

// RunFloodRank runs one rank of the flood benchmark over package comm. It
// first writes "pid RANK PID" to out, so that the benchmark can read the
// process's CPU time. The rank must run under package launch.
func RunFloodRank(ctx context.Context, out io.Writer, o FloodWork) error {
	if o.Interval < 0 || o.Limit <= 0 || o.SamplesPath == "" || o.StopPath == "" {
		return fmt.Errorf("%w: %+v", ErrFlood, o)
	}
	s, err := comm.Init(ctx)
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s.Finalize(fctx)
		cancel()
	}()
	w := s.World()
	if w.Size() != 2 {
		return fmt.Errorf("%w: the flood benchmark needs 2 ranks, not %d", ErrFlood, w.Size())
	}
	fmt.Fprintf(out, "pid %d %d\n", w.Rank(), os.Getpid())
	buf := make([]byte, FloodMessage)
	if w.Rank() == 1 {
		// Echo until the ping that says stop (its first byte is 1).
		for {
			if _, err := w.Recv(ctx, buf, 0, floodTag); err != nil {
				return err
			}
			if err := w.Send(ctx, buf, 0, floodTag); err != nil {
				return err
			}
			if buf[0] == 1 {
				return nil
			}
		}
	}
	samples := make([]byte, 0, 1<<20)
	end := time.Now().Add(o.Limit)
	nextCheck := time.Now()
	for {
		t0 := time.Now()
		if !t0.Before(nextCheck) {
			nextCheck = t0.Add(floodStopCheck)
			if _, err := os.Stat(o.StopPath); err == nil || t0.After(end) {
				break
			}
		}
		buf[0] = 0
		if err := w.Send(ctx, buf, 1, floodTag); err != nil {
			return err
		}
		if _, err := w.Recv(ctx, buf, 1, floodTag); err != nil {
			return err
		}
		rtt := time.Since(t0)
		samples = binary.BigEndian.AppendUint64(samples, uint64(t0.UnixNano()))
		samples = binary.BigEndian.AppendUint64(samples, uint64(rtt))
		if o.Interval > 0 {
			if wait := o.Interval - time.Since(t0); wait > 0 {
				time.Sleep(wait)
			}
		}
	}
	buf[0] = 1
	if err := w.Send(ctx, buf, 1, floodTag); err != nil {
		return err
	}
	if _, err := w.Recv(ctx, buf, 1, floodTag); err != nil {
		return err
	}
	return os.WriteFile(o.SamplesPath, samples, 0o600)
}

// floodSample is one round trip of rank 0.
type floodSample struct {
	at  time.Time
	rtt time.Duration
}

// readFloodSamples reads the samples file rank 0 wrote.
func readFloodSamples(path string) ([]floodSample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b)%floodSampleSize != 0 {
		return nil, fmt.Errorf("bench: %s: %d bytes, not a whole number of samples", path, len(b))
	}
	out := make([]floodSample, 0, len(b)/floodSampleSize)
	for ; len(b) > 0; b = b[floodSampleSize:] {
		out = append(out, floodSample{
			at:  time.Unix(0, int64(binary.BigEndian.Uint64(b))),
			rtt: time.Duration(binary.BigEndian.Uint64(b[8:])),
		})
	}
	return out, nil
}
