package tcp

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pullBatchBytes is the batch a replicated master writes to a non-master
// at once (half its ring).
const pullBatchBytes = 128 << 10

// BenchmarkPullBatchAgainstRing is BenchmarkPullAgainstRing for a whole
// batch of messages, as a master writes its data to a destination's other
// replicas: the two copies of the ring for each message of 128 KiB of
// them (ring) against one read by the kernel of all of them, one vector
// per message each side (pull), so that the system call and the pinning
// it starts are paid once per batch. An op is a batch.
func BenchmarkPullBatchAgainstRing(b *testing.B) {
	pid := os.Getpid()
	for _, n := range []int{8 << 10, 16 << 10, 32 << 10, 64 << 10} {
		per := pullBatchBytes / n
		src, ring, dst := benchBuffers(n), benchBuffers(n), benchBuffers(n)
		k := len(src) / per // batches in the working set
		name := fmt.Sprintf("n=%dK", n>>10)
		b.Run("ring/"+name, func(b *testing.B) {
			b.SetBytes(pullBatchBytes)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				j := (i % k) * per
				for m := j; m < j+per; m++ {
					copy(ring[m], src[m])
					copy(dst[(m+per)%len(dst)], ring[m])
				}
			}
		})
		local, remote := make([]iovec, per), make([]iovec, per)
		b.Run("pull/"+name, func(b *testing.B) {
			b.SetBytes(pullBatchBytes)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				j := (i % k) * per
				for m := range per {
					to, from := dst[(j+m+per)%len(dst)], src[j+m]
					local[m] = iovec{uintptr(unsafe.Pointer(unsafe.SliceData(to))), uintptr(n)}
					remote[m] = iovec{uintptr(unsafe.Pointer(unsafe.SliceData(from))), uintptr(n)}
				}
				got, _, errno := unix.Syscall6(unix.SYS_PROCESS_VM_READV, uintptr(pid),
					uintptr(unsafe.Pointer(unsafe.SliceData(local))), uintptr(per),
					uintptr(unsafe.Pointer(unsafe.SliceData(remote))), uintptr(per), 0)
				if errno != 0 || int(got) != pullBatchBytes {
					b.Fatalf("read %d of %d bytes: %v", got, pullBatchBytes, errno)
				}
				runtime.KeepAlive(src)
				runtime.KeepAlive(dst)
			}
		})
	}
}
