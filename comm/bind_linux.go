package comm

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// bindCPUs binds every thread of this process to its share of the CPUs
// within the job's set (nil: none given; bind.go) and returns them (nil:
// left unbound). It is best effort: a system that refuses an affinity
// leaves that thread as it was.
func bindCPUs(addrs []string, self int, jobSet []int) []int {
	var mask unix.CPUSet
	if unix.SchedGetaffinity(0, &mask) != nil {
		return nil
	}
	var allowed []int
	for c := range 1024 {
		if mask.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	inSet := withinSet(allowed, jobSet)
	idx, local := localIndex(addrs, self)
	share := bindShare(inSet, local, idx)
	if share == nil && len(inSet) < len(allowed) {
		// Unbound within the set, but kept to it.
		share = inSet
	}
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
