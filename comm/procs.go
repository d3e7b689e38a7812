package comm

import (
	"net"
	"os"
	"runtime"
)

// The Go scheduler's share of a rank. Ranks are processes, traditionally
// one per core; when a host runs as many ranks as it has cores, a rank
// with GOMAXPROCS = NumCPU keeps idle Ps that the runtime wakes (a futex
// call, a thread spinning to steal) every time a message readies the
// goroutine waiting for it, on the message's critical path, and its
// threads compete with the other ranks' for the cores. Init therefore
// gives each rank NumCPU ÷ (ranks on this host) Ps, at least one, unless
// the GOMAXPROCS environment variable sets the number (the user's choice
// wins). Measured on a 2-core machine with 2 ranks (cohort bench p2p):
// 8-byte one-way latency 44 → 26 µs; 4 ranks (cohort bench allreduce):
// 1 MiB Allreduce 7.4 → 3.2 ms.

// localRanks counts the addresses of addrs on the host of self's (the
// same IP, or both loopback).
func localRanks(addrs []string, self int) int {
	_, n := localIndex(addrs, self)
	return n
}

func hostIP(addr string) net.IP {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	return net.ParseIP(h)
}

// procsFor is the GOMAXPROCS a rank sharing its host's cpus with local-1
// others gets, or 0 to leave it (GOMAXPROCS set by the user, or no gain).
func procsFor(getenv func(string) string, cpus, current, local int) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	p := max(1, cpus/max(local, 1))
	if p >= current {
		return 0
	}
	return p
}

// shareCPUs applies procsFor to this process.
func shareCPUs(addrs []string, self int) {
	if p := procsFor(os.Getenv, runtime.NumCPU(), runtime.GOMAXPROCS(0), localRanks(addrs, self)); p > 0 {
		runtime.GOMAXPROCS(p)
	}
}
