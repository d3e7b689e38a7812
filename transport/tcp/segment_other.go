//go:build !linux

package tcp

// setSegmentMax leaves the kernel's segment size: the stall it prevents
// (bufferControl) is Linux's.
func setSegmentMax(uintptr, int) error { return nil }
