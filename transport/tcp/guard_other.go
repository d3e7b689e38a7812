//go:build !linux

package tcp

// guardFenced: without membarrier(2), the poll guard's callers count by
// atomic adds (pollGuard).
const guardFenced = false

func guardBarrier() {}

// ringFenced: without membarrier(2), a ring's records are published by
// an atomic store (ring.fenceless is never set).
const ringFenced = false

func ringBarrier() {}
