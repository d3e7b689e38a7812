//go:build !linux

package comm

import "runtime"

// osYield gives way to the process's other goroutines: there is no
// portable way to yield the thread's core to other processes.
func osYield() { runtime.Gosched() }
