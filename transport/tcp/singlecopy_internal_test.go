//go:build linux

package tcp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// lockedBuffer is a bytes.Buffer for a logger used by several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Over a shared-memory connection Pull reads the peer's memory at the
// address BufferAddr gave, in one piece or from an offset; the connection
// records the peer's process from the socket's credentials. An address
// not mapped there is the kernel's refusal: Pull reports
// ErrSingleCopyRefused, the transport turns single copy off (SingleCopy
// false, later Pulls refused) and logs it once. Without a connection, Pull
// reports ErrSingleCopyGone.
func TestSingleCopyPull(t *testing.T) {
	var logs lockedBuffer
	cfg := DefaultConfig()
	cfg.Node, cfg.JobID, cfg.Secret = 2, shmTestJob, shmTestSecret
	cfg.ShmInProcess = true
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a := shmTransport(t, 1)
	rec := transporttest.NewRecorder()
	b.SetHandler(rec)
	if err := b.Pull(1, make([]byte, 8), 0x1000); !errors.Is(err, ErrSingleCopyGone) {
		t.Fatalf("Pull without a connection: %v, want ErrSingleCopyGone", err)
	}
	a.SetPeer(2, b.Addr())
	if err := a.Send(context.Background(), 2, wire.Frame{Kind: transporttest.KindTest, Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, 10*time.Second, "a frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	_, c := b.current(1)
	if c == nil || c.shm == nil {
		t.Fatal("no shared-memory connection")
	}
	if c.shm.pid != os.Getpid() {
		t.Fatalf("the peer's process is %d, want %d (this one)", c.shm.pid, os.Getpid())
	}
	if !b.SingleCopy(1) {
		t.Fatal("SingleCopy false over shared memory")
	}
	src := transporttest.Payload(3, 1<<20+5)
	dst := make([]byte, len(src))
	if err := b.Pull(1, dst, BufferAddr(src)); err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("Pull: %v, intact %v", err, bytes.Equal(dst, src))
	}
	part := make([]byte, 100)
	if err := b.Pull(1, part, BufferAddr(src)+1000); err != nil || !bytes.Equal(part, src[1000:1100]) {
		t.Fatalf("Pull at an offset: %v, intact %v", err, bytes.Equal(part, src[1000:1100]))
	}
	if BufferAddr(nil) != 0 {
		t.Fatal("BufferAddr(nil) != 0")
	}

	for range 2 {
		if err := b.Pull(1, make([]byte, 64), 8); !errors.Is(err, ErrSingleCopyRefused) {
			t.Fatalf("Pull of an address not mapped: %v, want ErrSingleCopyRefused", err)
		}
	}
	if b.SingleCopy(1) {
		t.Fatal("SingleCopy still true after the kernel refused")
	}
	if err := b.Pull(1, dst, BufferAddr(src)); !errors.Is(err, ErrSingleCopyRefused) {
		t.Fatalf("Pull after a refusal: %v, want ErrSingleCopyRefused", err)
	}
	if n := bytes.Count([]byte(logs.String()), []byte("refuses single-copy")); n != 1 {
		t.Fatalf("%d log lines of the refusal, want 1:\n%s", n, logs.String())
	}
}
