//go:build !linux

package hotsync

import "runtime"

// Yield gives way to the process's other goroutines: there is no
// portable way to yield the thread's core to other processes.
func Yield() { runtime.Gosched() }
