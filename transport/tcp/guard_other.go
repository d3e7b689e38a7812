//go:build !linux

package tcp

// guardFenced: without membarrier(2), the poll guard's callers count by
// atomic adds (pollGuard).
const guardFenced = false

func guardBarrier() {}
