//go:build linux

package tcp

import (
	"fmt"
	"io"
	mrand "math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// streamByte is the byte at offset k of the stream the index tests
// write: it differs from its neighbours and repeats only every 64 KiB,
// so that a byte read from the wrong place, a lap early or late, shows.
func streamByte(k int64) byte { return byte(k ^ k>>8 ^ k>>16) }

// A writer and a reader that never park poll their ring through every
// interleaving of their index stores and loads that the scheduler makes:
// the writer fills a small ring with records of every size through each
// of its writes (one record, several, a record cut where the ring fills,
// a direct frame's head and body), the reader takes them by reads of
// every size, and neither ever finds the indices inconsistent (each
// side's checks of the other's words: the commit before the tail, the
// record's length, the head within a lap of the tail) or a byte out of
// place. Polling without end keeps the wake-ups out: what is tested is
// the ring's protocol alone, many laps per millisecond.
func TestShmIndicesUnderStress(t *testing.T) {
	var total int64 = 4 << 20
	if testing.Short() {
		total = 512 << 10
	}
	for _, size := range []int{1 << 10, minShmRingSize} {
		t.Run(fmt.Sprintf("ring=%d", size), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			a, b := shmPairOf(t, size, time.Hour)
			var got atomic.Int64
			defer watchdog(t, &got, a, b)()
			errc := make(chan error, 1)
			go func() { errc <- writeStream(a, mrand.New(mrand.NewPCG(seed, 1)), total) }()
			rng := mrand.New(mrand.NewPCG(seed, 2))
			buf := make([]byte, 3*size)
			var off int64
			for off < total {
				n := 1 + rng.IntN(len(buf))
				if rng.IntN(4) == 0 {
					n = 1 + rng.IntN(16)
				}
				k, err := b.Read(buf[:min(int64(n), total-off)])
				if err != nil {
					t.Fatalf("seed %d: at byte %d of %d: %v", seed, off, total, err)
				}
				for j, v := range buf[:k] {
					if want := streamByte(off + int64(j)); v != want {
						t.Fatalf("seed %d: byte %d: got %d, want %d", seed, off+int64(j), v, want)
					}
				}
				off += int64(k)
				got.Store(off)
			}
			if err := <-errc; err != nil {
				t.Fatalf("seed %d: writer: %v", seed, err)
			}
			if n, err := b.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("seed %d: after the stream: got %d bytes, %v; want 0, EOF", seed, n, err)
			}
		})
	}
}

// writeStream writes total bytes of streamByte to c in writes of random
// sizes and kinds, then half-closes it.
func writeStream(c *shmConn, rng *mrand.Rand, total int64) error {
	max := int(c.out.size) * 3 / 2
	msg := make([]byte, max)
	var off int64
	for off < total {
		n := 1 + rng.IntN(max)
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(lineFrameMax) // a small frame: one line
		}
		n = int(min(int64(n), total-off))
		for j := range msg[:n] {
			msg[j] = streamByte(off + int64(j))
		}
		var err error
		switch cut := rng.IntN(n + 1); rng.IntN(3) {
		case 0:
			_, err = c.Write(msg[:n])
		case 1:
			_, err = c.writev([][]byte{msg[:cut], msg[cut:n]})
		default:
			// The direct path's write: head and body in one record
			// when it fits, else the vectored write, under wmu.
			c.wmu.Lock()
			if !c.writeHeadBody(msg[:cut], msg[cut:n]) {
				_, err = c.writevHeld([][]byte{msg[:cut], msg[cut:n]})
			}
			c.wmu.Unlock()
		}
		if err != nil {
			return fmt.Errorf("at byte %d of %d: %w", off, total, err)
		}
		off += int64(n)
	}
	return c.CloseWrite()
}
