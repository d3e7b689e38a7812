package comm

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// bindCPUs binds every thread of this process to its share of the CPUs
// (bind.go) and returns them (nil: left unbound). It is best effort: a
// system that refuses an affinity leaves that thread as it was.
func bindCPUs(addrs []string, self int) []int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return nil
	}
	var allowed []int
	for c := range 1024 {
		if set.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	idx, local := localIndex(addrs, self)
	share := bindShare(allowed, local, idx)
	if share == nil {
		return nil
	}
	var mine unix.CPUSet
	for _, c := range share {
		mine.Set(c)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			unix.SchedSetaffinity(tid, &mine)
		}
	}
	return share
}
