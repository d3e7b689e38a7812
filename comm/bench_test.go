package comm

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkPingPong measures the round trip of a ping-pong between two ranks
// over real TCP (two sessions in this process, each with its own transport):
// ns/op is one round trip, so the one-way latency is half of it, and MB/s
// counts both directions' payload (OSU's osu_latency pattern).
func BenchmarkPingPong(b *testing.B) {
	benchPingPong(b, 0, []int{8, 1 << 10, 64 << 10, 1 << 20})
}

// BenchmarkPingPongSpin is BenchmarkPingPong of small messages with
// polling before parking (Session.SetSpin) off and on, in the same run.
func BenchmarkPingPongSpin(b *testing.B) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond, 100 * time.Microsecond} {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) { benchPingPong(b, spin, []int{8, 1 << 10}) })
	}
}

func benchPingPong(b *testing.B, spin time.Duration, sizes []int) {
	for _, size := range sizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ss := tcpJob(b, 2)
			for _, s := range ss {
				if err := s.SetSpin(spin); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			w0, w1 := ss[0].World(), ss[1].World()
			done := make(chan error, 1)
			go func() {
				buf := make([]byte, size)
				for {
					if _, err := w1.Recv(ctx, buf, 0, 1); err != nil {
						done <- err
						return
					}
					if err := w1.Send(ctx, buf, 0, 1); err != nil {
						done <- err
						return
					}
				}
			}()
			buf := make([]byte, size)
			b.SetBytes(int64(2 * size))
			b.ResetTimer()
			for b.Loop() {
				if err := w0.Send(ctx, buf, 1, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := w0.Recv(ctx, buf, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			ss[1].kill()
			<-done
		})
	}
}

// BenchmarkRawTCPPingPong is the baseline of BenchmarkPingPong: the same
// ping-pong over a bare loopback TCP connection (TCP_NODELAY, io.ReadFull),
// in the same process.
func BenchmarkRawTCPPingPong(b *testing.B) {
	for _, size := range []int{8, 1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, size)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, size)
			b.SetBytes(int64(2 * size))
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplicatedPingPong is BenchmarkPingPong with each of the two
// ranks run as r replicas (the processes in this one process, over TCP):
// ns/op is one round trip as every replica of rank 0 does it.
func BenchmarkReplicatedPingPong(b *testing.B) {
	for _, r := range []int{1, 2} {
		for _, size := range []int{8, 64 << 10} {
			b.Run(fmt.Sprintf("r=%d/size=%d", r, size), func(b *testing.B) {
				ss := replicatedJob(b, 2, r)
				ctx := context.Background()
				b.SetBytes(int64(2 * size))
				errs := make(chan error, len(ss))
				b.ResetTimer()
				for p, s := range ss {
					go func() {
						w, buf := s.World(), make([]byte, size)
						var err error
						for range b.N {
							if p%2 == 0 {
								if err = w.Send(ctx, buf, 1, 1); err == nil {
									_, err = w.Recv(ctx, buf, 1, 1)
								}
							} else if _, err = w.Recv(ctx, buf, 0, 1); err == nil {
								err = w.Send(ctx, buf, 0, 1)
							}
							if err != nil {
								break
							}
						}
						errs <- err
					}()
				}
				for range ss {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
			})
		}
	}
}

// BenchmarkSameHostCPU is the software cost of a same-host round trip of
// small messages, without the waits: both ranks of a two-rank job in this
// process over shared memory (COHORT_POLL on), and one goroutine doing
// both sides in turn (rank 0 sends, rank 1 receives and answers, rank 0
// receives), so that every message is at hand when its receive polls. An
// operation is one round trip: two sends, two receives.
func BenchmarkSameHostCPU(b *testing.B) {
	for _, size := range []int{8, 1 << 10} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			b.Setenv("COHORT_POLL", "1ms")
			b.Setenv("COHORT_SHM", "on")
			b.Setenv("COHORT_UNIX", "on")
			ss := tcpJobWith(b, 2, []Option{func(o *options) { o.shmInProcess = true }})
			ctx := context.Background()
			w0, w1 := ss[0].World(), ss[1].World()
			buf := make([]byte, size)
			rt := func() {
				if err := w0.Send(ctx, buf, 1, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := w1.Recv(ctx, buf, 0, 1); err != nil {
					b.Fatal(err)
				}
				if err := w1.Send(ctx, buf, 0, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := w0.Recv(ctx, buf, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
			for range 1000 {
				rt()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rt()
			}
		})
	}
}
