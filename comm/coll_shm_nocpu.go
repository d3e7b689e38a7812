//go:build !linux || !amd64

package comm

// segCPU is 0 (unknown) where reading the CPU's number would take a
// system call: waits on the segment then never poll for a rank on
// another CPU (coll_shm.go).
func segCPU() uint64 { return 0 }
