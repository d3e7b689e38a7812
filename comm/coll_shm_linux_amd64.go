package comm

// segHasRDPID reports whether the processor has RDPID (CPUID leaf 7).
func segHasRDPID() bool

// segRDPID is the processor's TSC_AUX, read with RDPID: Linux keeps the
// CPU's number in its low 12 bits. Call it only if segHasRDPID.
func segRDPID() uint32

// segRDPIDOK: the processor can say which CPU it is without a system call.
var segRDPIDOK = segHasRDPID()

// segCPU is 1 + the CPU the calling thread runs on, or 0 when it cannot
// be known cheaply: a hint that may be stale as soon as it is read (the
// thread may move), good for choosing how to wait, never for correctness.
func segCPU() uint64 {
	if !segRDPIDOK {
		return 0
	}
	return uint64(segRDPID()&0xfff) + 1
}
