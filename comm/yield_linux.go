package comm

import "golang.org/x/sys/unix"

// osYield gives the calling thread's core to another runnable thread of
// the host, if any (sched_yield).
func osYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
