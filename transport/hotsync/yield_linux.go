package hotsync

import "golang.org/x/sys/unix"

// Yield gives the calling thread's core to another runnable thread of
// the host, if any (sched_yield). It is a raw system call, like the
// runtime's own osyield: sched_yield never blocks, but on a host with more
// ranks than cores it returns only once the others have had their turn,
// often later than the runtime's monitor lets a system call keep its
// processor. An ordinary system call would then lose the processor to
// another thread, woken for it, and take one back on its return: more
// thread switches per wait, for no work done.
func Yield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
