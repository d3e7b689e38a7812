package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
	"unsafe"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/launch"
)

// OSUWork is what one rank of an OSU-style benchmark is asked to do.
type OSUWork struct {
	Mode, Impl               string // latency|bw|allreduce, ours|ours-unix|ours-tcp|ours-mac|ours-tls|tcp
	Loop, Skip, LoopL, SkipL int    // iterations and warm-up ones, small and large messages
	Window                   int    // messages in flight per iteration (bw)
	Sizes                    []int  // message sizes in bytes
	MaxSize                  int    // the largest of Sizes (set by RunOSURank)
}

// Counts returns the iterations and warm-up iterations for size n.
func (o *OSUWork) Counts(n int) (loop, skip int) {
	if n > OSULargeMessage {
		return o.LoopL, o.SkipL
	}
	return o.Loop, o.Skip
}

// RunOSURank runs one rank of the OSU loops o describes, over package comm
// (o.Impl "ours", "ours-unix", "ours-tcp", "ours-mac", "ours-tls"), raw TCP sockets ("tcp") or raw shared memory
// ("shm", latency only); rank 0 writes one
// "size figure" line per size to out. The rank must run under package
// launch (it finds its peers through the launcher's environment).
func RunOSURank(ctx context.Context, out io.Writer, o *OSUWork) error {
	for _, s := range o.Sizes {
		o.MaxSize = max(o.MaxSize, s)
	}
	o.Window = max(1, o.Window)
	if o.Mode != "latency" && o.Mode != "bw" && o.Mode != "allreduce" {
		return fmt.Errorf("%w: unknown mode %q", ErrOSU, o.Mode)
	}
	if path := os.Getenv(osuProfileEnv); path != "" {
		stop, err := startProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	switch o.Impl {
	case "ours", "ours-unix", "ours-tcp", "ours-mac", "ours-tls": // the launcher sets COHORT_UNIX and COHORT_INTEGRITY, and encrypts the ours-tls job
		return osuOurs(ctx, out, o)
	case "tcp":
		return osuTCP(ctx, out, o)
	case "shm":
		return osuShm(ctx, out, o)
	}
	return fmt.Errorf("%w: unknown implementation %q", ErrOSU, o.Impl)
}

// startProfile starts this rank's CPU profile, written to
// path-rankN.pprof (N from the launcher's environment) when stop is called.
func startProfile(path string) (stop func() error, err error) {
	boot, err := launch.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return StartCPUProfile(fmt.Sprintf("%s-rank%d.pprof", path, boot.Rank))
}

// StartCPUProfile starts a CPU profile of this process into the file at
// path (runtime/pprof); stop ends it and closes the file.
func StartCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// osuMessages is what rank 0's allocations are counted per, in one
// iteration: the messages it sends and receives (latency: one each way;
// bw: a window of sends and the acknowledgement), or one Allreduce call.
func osuMessages(o *OSUWork) int {
	switch o.Mode {
	case "latency":
		return 2
	case "bw":
		return o.Window + 1
	}
	return 1
}

// ErrOSU is wrapped by the errors of [RunOSURank] about what it is asked.
var ErrOSU = errors.New("bench: bad OSU rank arguments")

// osuOurs runs the loops over package comm.
func osuOurs(ctx context.Context, out io.Writer, o *OSUWork) error {
	s, err := comm.Init(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// The figures are printed: a slow Finalize must not hold the
		// benchmark up. Replicated, Finalize waits for every replica, and
		// one far behind its peers still needs them.
		wait := 2 * time.Second
		if s.Replicas() > 1 {
			wait = 5 * time.Minute
		}
		fctx, cancel := context.WithTimeout(ctx, wait)
		s.Finalize(fctx)
		cancel()
	}()
	w := s.World()
	switch {
	case o.Mode == "latency" && (w.Size() < 2 || w.Size()%2 != 0):
		return fmt.Errorf("latency needs an even number of ranks, not %d", w.Size())
	case o.Mode == "bw" && w.Size() != 2:
		return fmt.Errorf("%s needs 2 ranks, not %d", o.Mode, w.Size())
	}
	sbuf, rbuf := make([]byte, o.MaxSize+8), make([]byte, o.MaxSize+8)
	for i := range sbuf {
		sbuf[i] = 'a'
	}
	sendF, recvF := make([]float64, o.MaxSize/8), make([]float64, o.MaxSize/8)
	reqs := make([]*comm.Request, o.Window)
	// Latency on more than 2 ranks pairs them up, 2k with 2k+1: rank 0's
	// pair is measured while the others ping-pong the same loops beside
	// it (the replication benchmark's floor: as many busy processes as a
	// replicated pair has).
	rank, peer := w.Rank(), w.Rank()^1
	first := rank%2 == 0
	for _, n := range o.Sizes {
		loop, skip := o.Counts(n)
		if err := comm.Barrier(ctx, w); err != nil {
			return err
		}
		var start time.Time
		var total time.Duration
		var ms runtime.MemStats
		var mallocs uint64
		for i := range loop + skip {
			if i == skip {
				if err := comm.Barrier(ctx, w); err != nil {
					return err
				}
				runtime.ReadMemStats(&ms)
				mallocs = ms.Mallocs
				start = time.Now()
			}
			switch o.Mode {
			case "latency":
				if first {
					err = w.Send(ctx, sbuf[:n], peer, 1)
					if err == nil {
						_, err = w.Recv(ctx, rbuf[:n], peer, 1)
					}
				} else {
					_, err = w.Recv(ctx, rbuf[:n], peer, 1)
					if err == nil {
						err = w.Send(ctx, sbuf[:n], peer, 1)
					}
				}
			case "bw":
				if rank == 0 {
					for j := range reqs {
						reqs[j] = w.Isend(sbuf[:n], peer, 100)
					}
					err = comm.WaitAll(ctx, reqs...)
					freeAll(reqs)
					if err == nil {
						_, err = w.Recv(ctx, rbuf[:4], peer, 101)
					}
				} else {
					for j := range reqs {
						reqs[j] = w.Irecv(rbuf[:n], peer, 100)
					}
					err = comm.WaitAll(ctx, reqs...)
					freeAll(reqs)
					if err == nil {
						err = w.Send(ctx, sbuf[:4], peer, 101)
					}
				}
			case "allreduce":
				t0 := time.Now()
				err = comm.Allreduce(ctx, w, sendF[:n/8], recvF[:n/8], comm.Sum[float64]())
				if i >= skip {
					total += time.Since(t0)
				}
			}
			if err != nil {
				return err
			}
		}
		elapsed := time.Since(start)
		runtime.ReadMemStats(&ms)
		allocs := float64(ms.Mallocs-mallocs) / float64(loop*osuMessages(o))
		if o.Mode == "allreduce" {
			mine, sum := []float64{micros(total) / float64(loop)}, []float64{0}
			if err := comm.Reduce(ctx, w, mine, sum, comm.Sum[float64](), 0); err != nil {
				return err
			}
			if rank == 0 {
				fmt.Fprintf(out, "%d %.3f %.2f\n", n, sum[0]/float64(w.Size()), allocs)
			}
		} else if rank == 0 {
			fmt.Fprintf(out, "%d %.3f %.2f\n", n, osuFigure(o, n, loop, elapsed), allocs)
		}
	}
	// No rank leaves before rank 0 has every figure: the others wait for
	// its word. What happens after that word is no longer the benchmark's
	// business, so errors from here on (a rank leaving while another's
	// last frames are in flight) are not failures.
	release := make([]byte, 1)
	if rank == 0 {
		for r := 1; r < w.Size(); r++ {
			w.Send(ctx, release, r, osuReleaseTag)
		}
	} else {
		w.Recv(ctx, release, 0, osuReleaseTag)
	}
	return nil
}

// osuReleaseTag is the tag of rank 0's last word to the others.
const osuReleaseTag = 999

// osuFigure is rank 0's figure for a size: one-way latency in µs, or
// bandwidth in MB/s (10^6 bytes per second), as OSU computes them.
func osuFigure(o *OSUWork, n, loop int, elapsed time.Duration) float64 {
	if o.Mode == "latency" {
		return micros(elapsed) / float64(2*loop)
	}
	return float64(n) / 1e6 * float64(loop*o.Window) / elapsed.Seconds()
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// osuTCP runs the loops over raw TCP sockets: for latency and bw one
// connection between the two ranks carrying length-prefixed messages
// (so that empty messages exist, as in MPI); for allreduce a ring of
// connections and the ring algorithm (reduce-scatter, then allgather).
// The ranks find each other through the launcher's rendezvous.
func osuTCP(ctx context.Context, out io.Writer, o *OSUWork) error {
	boot, err := launch.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	ln, reg, err := listenRegister(ctx, boot)
	if err != nil {
		return err
	}
	defer closeBoth(ln, reg)
	rank, p := boot.Rank, boot.Size
	if o.Mode != "allreduce" && p != 2 {
		return fmt.Errorf("%s needs 2 ranks, not %d", o.Mode, p)
	}
	// Every rank dials its right neighbour and accepts its left one (for
	// two ranks: rank 0 dials, rank 1 accepts; one connection).
	var left, right net.Conn
	if p > 1 {
		dial := func() (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", reg.Addrs[(rank+1)%p])
		}
		if p == 2 {
			if rank == 0 {
				right, err = dial()
			} else {
				right, err = ln.Accept()
			}
			left = right
		} else {
			errc := make(chan error, 1)
			go func() {
				var err error
				right, err = dial()
				errc <- err
			}()
			left, err = ln.Accept()
			if err2 := <-errc; err == nil {
				err = err2
			}
		}
		if err != nil {
			return err
		}
		defer left.Close()
		defer right.Close()
		for _, c := range []net.Conn{left, right} {
			c.(*net.TCPConn).SetNoDelay(true)
		}
	}
	sbuf, rbuf := make([]byte, o.MaxSize+8), make([]byte, o.MaxSize+8)
	for i := range sbuf {
		sbuf[i] = 'a'
	}
	sendF, recvF := make([]float64, o.MaxSize/8), make([]float64, o.MaxSize/8)
	tmp := make([]byte, o.MaxSize+8)
	one := []float64{0}
	for _, n := range o.Sizes {
		loop, skip := o.Counts(n)
		if o.Mode == "allreduce" {
			if err := ringAllreduce(left, right, rank, p, one, tmp); err != nil { // a barrier
				return err
			}
			var total time.Duration
			for i := range loop + skip {
				t0 := time.Now()
				copy(recvF[:n/8], sendF[:n/8])
				if err := ringAllreduce(left, right, rank, p, recvF[:n/8], tmp); err != nil {
					return err
				}
				if i >= skip {
					total += time.Since(t0)
				}
			}
			one[0] = micros(total) / float64(loop)
			if err := ringAllreduce(left, right, rank, p, one, tmp); err != nil {
				return err
			}
			if rank == 0 {
				fmt.Fprintf(out, "%d %.3f\n", n, one[0]/float64(p))
			}
			continue
		}
		conn := right
		var start time.Time
		for i := range loop + skip {
			if i == skip {
				start = time.Now()
			}
			switch {
			case o.Mode == "latency" && rank == 0:
				err = sendMsg(conn, sbuf[:n])
				if err == nil {
					err = recvMsg(conn, rbuf)
				}
			case o.Mode == "latency":
				err = recvMsg(conn, rbuf)
				if err == nil {
					err = sendMsg(conn, sbuf[:n])
				}
			case rank == 0:
				for j := 0; j < o.Window && err == nil; j++ {
					err = sendMsg(conn, sbuf[:n])
				}
				if err == nil {
					err = recvMsg(conn, rbuf)
				}
			default:
				for j := 0; j < o.Window && err == nil; j++ {
					err = recvMsg(conn, rbuf)
				}
				if err == nil {
					err = sendMsg(conn, sbuf[:4])
				}
			}
			if err != nil {
				return err
			}
		}
		if rank == 0 {
			fmt.Fprintf(out, "%d %.3f\n", n, osuFigure(o, n, loop, time.Since(start)))
		}
	}
	return nil
}

// listenRegister listens on a loopback port and registers it with the
// launcher's rendezvous, which returns once every rank has: a barrier,
// and the ranks' addresses.
func listenRegister(ctx context.Context, boot launch.Bootstrap) (net.Listener, *launch.Registration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	reg, err := boot.Register(ctx, ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, reg, nil
}

// closeBoth closes what listenRegister returned.
func closeBoth(ln net.Listener, reg *launch.Registration) {
	reg.Close()
	ln.Close()
}

// sendMsg writes a 4-byte length and the payload in one writev.
func sendMsg(c net.Conn, payload []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	bufs := net.Buffers{hdr[:], payload}
	_, err := bufs.WriteTo(c)
	return err
}

// recvMsg reads one length-prefixed message into buf.
func recvMsg(c net.Conn, buf []byte) error {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int(n) > len(buf) {
		return errors.New("message longer than the buffer")
	}
	_, err := io.ReadFull(c, buf[:n])
	return err
}

// ringAllreduce sums data over the ring in place: p−1 reduce-scatter
// steps then p−1 allgather steps, each sending one chunk to the right
// while receiving one from the left.
func ringAllreduce(left, right net.Conn, rank, p int, data []float64, tmp []byte) error {
	if p == 1 || len(data) == 0 {
		return nil
	}
	n := len(data)
	chunk := func(i int) []float64 { return data[i*n/p : (i+1)*n/p] }
	step := func(send []float64, recv []byte) error {
		errc := make(chan error, 1)
		go func() {
			_, err := right.Write(floatBytes(send))
			errc <- err
		}()
		_, err := io.ReadFull(left, recv)
		if werr := <-errc; err == nil {
			err = werr
		}
		return err
	}
	for s := 0; s < p-1; s++ {
		in := chunk(((rank-s-1)%p + p) % p)
		if err := step(chunk(((rank-s)%p+p)%p), tmp[:8*len(in)]); err != nil {
			return err
		}
		for i := range in {
			in[i] += floatFrom(tmp, i)
		}
	}
	for s := 0; s < p-1; s++ {
		in := chunk(((rank-s)%p + p) % p)
		if err := step(chunk(((rank-s+1)%p+p)%p), floatBytes(in)); err != nil {
			return err
		}
	}
	return nil
}

// floatBytes views a []float64 as its bytes (no copy), as MPI sends a
// buffer.
func floatBytes(f []float64) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 8*len(f))
}

func floatFrom(b []byte, i int) float64 {
	return *(*float64)(unsafe.Pointer(&b[8*i]))
}

// freeAll gives the window's completed requests back for reuse, as an
// MPI bandwidth loop frees its requests (Request.Free).
func freeAll(reqs []*comm.Request) {
	for _, r := range reqs {
		r.Free()
	}
}
