package tcp

import (
	"fmt"
	"os"
	"testing"
	"unsafe"
)

// benchWorkingSet is the memory each side of a copy cycles through, so
// that the copies miss the 1–2 MiB caches of one core as a ring's and a
// message's do, where the same buffer copied again and again would not.
const benchWorkingSet = 8 << 20

// BenchmarkPullAgainstRing compares, for the messages that go eagerly
// through a shared-memory ring (8 to 64 KiB), the two copies of the ring
// (into it, out of it: ring) with one read of the same bytes by the kernel
// (readPeer, as Pull makes it) from buffers of the Go heap (pull), whose
// small pages the kernel pins one by one, and from buffers on huge pages
// (pull-huge; where the kernel grants them). The read is of this process's
// own memory: the kernel pins and copies it as it does another's, and
// neither side here pays for another core's cache, which both would.
func BenchmarkPullAgainstRing(b *testing.B) {
	pid := os.Getpid()
	huge := make([]byte, benchWorkingSet+hugeRegion)
	adviseHuge(huge)
	for i := range huge {
		huge[i] = byte(i)
	}
	for _, n := range []int{8 << 10, 16 << 10, 32 << 10, 64 << 10} {
		src, ring, dst := benchBuffers(n), benchBuffers(n), benchBuffers(n)
		k := len(src)
		hugeSrc := make([][]byte, k)
		for i := range hugeSrc {
			hugeSrc[i] = huge[i*n : (i+1)*n]
		}
		name := fmt.Sprintf("n=%dK", n>>10)
		b.Run("ring/"+name, func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				j := i % k
				copy(ring[j], src[j])
				copy(dst[(j+1)%k], ring[j])
			}
		})
		for _, v := range []struct {
			name string
			from [][]byte
		}{{"pull", src}, {"pull-huge", hugeSrc}} {
			b.Run(v.name+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					j := i % k
					from := v.from[j]
					addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(from))))
					if m, err := readPeer(pid, dst[(j+1)%k], addr); err != nil || m != n {
						b.Fatalf("read %d of %d bytes: %v", m, n, err)
					}
				}
			})
		}
	}
}

// benchBuffers returns buffers of n bytes filling benchWorkingSet.
func benchBuffers(n int) [][]byte {
	out := make([][]byte, benchWorkingSet/n)
	for i := range out {
		out[i] = make([]byte, n)
		for j := range out[i] {
			out[i][j] = byte(i + j)
		}
	}
	return out
}
