package tcp_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// The benchmarks measure the transport against raw Go TCP sockets in the
// same run, on loopback (docs/DESIGN.md "Performance targets": numbers are
// ratios against a baseline measured in the same invocation, because the
// machines are shared and noisy). The raw baseline moves the same bytes
// (a 4-byte length and the payload) with one Write per message for
// latency and a bufio.Writer for throughput, and does nothing else: no
// handshake, no queue, no header, no handler. Each benchmark runs per
// kind of connection (path=unix: the transport's same-host Unix socket
// against a raw abstract Unix socket; path=tcp: Config.NoUnix against raw
// loopback TCP).
//
//	go test -run '^$' -bench . -benchtime 20000x ./transport/tcp

// rawPair returns the two ends of a connection over loopback TCP (with
// TCP_NODELAY set) or, unless overTCP, an abstract Unix socket.
func rawPair(b *testing.B, overTCP bool) (client, server net.Conn) {
	network, addr := "tcp", "127.0.0.1:0"
	if !overTCP {
		network, addr = "unix", fmt.Sprintf("@cohort-bench/%d/%d", os.Getpid(), time.Now().UnixNano())
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		b.Fatal("accept failed")
	}
	if overTCP {
		client.(*net.TCPConn).SetNoDelay(true)
		server.(*net.TCPConn).SetNoDelay(true)
	}
	b.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// rawRoundTrips runs n ping-pongs of size-byte messages and returns the
// elapsed time.
func rawRoundTrips(b *testing.B, n, size int, overTCP bool) time.Duration {
	client, server := rawPair(b, overTCP)
	go func() { // echo
		buf := make([]byte, 4+size)
		for {
			if _, err := io.ReadFull(server, buf); err != nil {
				return
			}
			if _, err := server.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 4+size)
	binary.BigEndian.PutUint32(buf, uint32(size))
	in := make([]byte, 4+size)
	start := time.Now()
	for range n {
		if _, err := client.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, in); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// benchPair returns two connected transports whose handlers are set by
// the caller, over the kind of connection path names.
func benchPair(b *testing.B, path pathKind) (a, c *tcp.Transport) {
	mk := func(id core.NodeID) *tcp.Transport {
		cfg := tcp.DefaultConfig()
		cfg.Node, cfg.JobID, cfg.Secret = id, jobID, secret
		path.set(&cfg)
		t, err := tcp.Listen(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := t.SetSpin(path.spin); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		return t
	}
	a, c = mk(1), mk(2)
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())
	return a, c
}

var benchKind = core.MakeKind(core.ProtoTest, 9)

// benchPaths runs f as the sub-benchmarks name/path=unix, shm and tcp
// (pathKinds).
func benchPaths(b *testing.B, name string, f func(b *testing.B, path pathKind)) {
	for _, k := range benchPathKinds {
		b.Run(name+"/path="+k.name, func(b *testing.B) { f(b, k) })
	}
}

// cohortRoundTrips runs n ping-pongs of size-byte payloads through two
// transports; the echo is sent from the reader goroutine's handler.
func cohortRoundTrips(b *testing.B, n, size int, path pathKind) time.Duration {
	a, c := benchPair(b, path)
	payload := make([]byte, size)
	pong := make(chan struct{}, 1)
	a.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) { pong <- struct{}{} }})
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if err := c.Send(context.Background(), 1, wire.Frame{Kind: benchKind, Payload: payload}); err != nil {
			b.Error(err)
		}
	}})
	ctx := context.Background()
	// Warm up: the first frame dials and runs the handshake.
	if err := a.Send(ctx, 2, wire.Frame{Kind: benchKind, Payload: payload}); err != nil {
		b.Fatal(err)
	}
	<-pong
	start := time.Now()
	for range n {
		if err := a.Send(ctx, 2, wire.Frame{Kind: benchKind, Payload: payload}); err != nil {
			b.Fatal(err)
		}
		<-pong
	}
	return time.Since(start)
}

// BenchmarkOneWayLatency reports half the round-trip time of a ping-pong,
// in ns, for raw sockets and for the transport, and their ratio.
func BenchmarkOneWayLatency(b *testing.B) {
	for _, size := range []int{64, 4096} {
		benchPaths(b, fmt.Sprintf("size=%d", size), func(b *testing.B, path pathKind) {
			raw := rawRoundTrips(b, b.N, size, path.noUnix)
			coh := cohortRoundTrips(b, b.N, size, path)
			rawNs := float64(raw.Nanoseconds()) / float64(b.N) / 2
			cohNs := float64(coh.Nanoseconds()) / float64(b.N) / 2
			b.ReportMetric(cohNs, "ns/op")
			b.ReportMetric(rawNs, "raw-ns/oneway")
			b.ReportMetric(cohNs, "cohort-ns/oneway")
			b.ReportMetric(cohNs/rawNs, "ratio")
		})
	}
}

// rawStream sends n size-byte messages one way through a bufio.Writer and
// returns the time until the receiver has read them all.
func rawStream(b *testing.B, n, size int, overTCP bool) time.Duration {
	client, server := rawPair(b, overTCP)
	done := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(server, 64<<10)
		buf := make([]byte, 4+size)
		for range n {
			if _, err := io.ReadFull(r, buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	w := bufio.NewWriterSize(client, 64<<10)
	msg := make([]byte, 4+size)
	binary.BigEndian.PutUint32(msg, uint32(size))
	start := time.Now()
	for range n {
		if _, err := w.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// cohortStream sends n frames of size bytes one way and returns the time
// until the receiver's handler has seen them all.
func cohortStream(b *testing.B, n, size int, path pathKind) time.Duration {
	a, c := benchPair(b, path)
	var mu sync.Mutex
	got := 0
	all := make(chan struct{})
	warm := make(chan struct{}, 1)
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Epoch == 1 {
			warm <- struct{}{}
			return
		}
		mu.Lock()
		got++
		if got == n {
			close(all)
		}
		mu.Unlock()
	}})
	a.SetHandler(transport.HandlerFuncs{})
	ctx := context.Background()
	payload := make([]byte, size)
	if err := a.Send(ctx, 2, wire.Frame{Kind: benchKind, Epoch: 1}); err != nil {
		b.Fatal(err)
	}
	<-warm
	start := time.Now()
	for range n {
		if err := a.Send(ctx, 2, wire.Frame{Kind: benchKind, Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	<-all
	return time.Since(start)
}

// BenchmarkThroughput reports one-way throughput, in messages per second,
// for raw sockets and for the transport, and their ratio (transport over
// raw; below 1 means slower).
func BenchmarkThroughput(b *testing.B) {
	for _, size := range []int{64, 4096} {
		benchPaths(b, fmt.Sprintf("size=%d", size), func(b *testing.B, path pathKind) {
			raw := rawStream(b, b.N, size, path.noUnix)
			coh := cohortStream(b, b.N, size, path)
			rawRate := float64(b.N) / raw.Seconds()
			cohRate := float64(b.N) / coh.Seconds()
			b.ReportMetric(float64(coh.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(rawRate, "raw-msg/s")
			b.ReportMetric(cohRate, "cohort-msg/s")
			b.ReportMetric(cohRate/rawRate, "ratio")
		})
	}
}
