package daemon

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Cores of the daemon's host, shared among its jobs. A rank binds itself
// to a share of the cores it may run on (comm's COHORT_BIND=auto), as if
// its job owned the host: two jobs on one daemon would put their ranks on
// the same cores and stall together. So the daemon hands each running job
// a set of its own cores, disjoint from the other jobs' while there are
// enough: the job's processes may run on those only (the launcher sets
// their affinity before the job's code runs), and are told the set in
// EnvCPUs, within which comm binds each rank. A job gets cores in
// proportion to its slots: the daemon's cores divided by the processes it
// may run at once (jobs × procs_per_job), at least one per slot. A job
// larger than the free cores gets every free core and then those the
// fewest other jobs hold (shared: the daemon logs it). Other daemons on
// the host are jobs' too: their running jobs' cores are in the host's
// registry (cores_host.go), which a daemon reads before it chooses.

// EnvCPUs names the variable that tells a job's process the cores its job
// was given, as a list such as "0-3,8" (comm reads it: COHORT_CPUS).
const EnvCPUs = "COHORT_CPUS"

// coreSets hands out the daemon's cores to its jobs.
type coreSets struct {
	all     []int // the cores the daemon may run on, ascending
	perSlot int   // cores a slot gets
	// host is the registry of the cores the host's other daemons' jobs
	// hold; nil: this daemon's jobs are all it knows of.
	host *hostCores

	mu    sync.Mutex
	users map[int]int // per core, how many of this daemon's running jobs hold it
	jobs  [][]int     // the sets of this daemon's running jobs, as host records them
}

// newCoreSets shares all (the daemon's cores) among at most slots
// processes at once.
func newCoreSets(all []int, slots int) *coreSets {
	all = slices.Sorted(slices.Values(all))
	return &coreSets{all: all, perSlot: max(1, len(all)/max(slots, 1)), users: map[int]int{}}
}

// take gives a job of slots processes its cores, ascending; shared says
// some are held by another job too. Nil when the daemon knows no cores.
func (cs *coreSets) take(slots int) (set []int, shared bool) {
	if cs == nil || len(cs.all) == 0 {
		return nil, false
	}
	want := min(len(cs.all), max(1, slots)*cs.perSlot)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	others, unlock, err := cs.lockHost()
	defer unlock()
	users := func(c int) int { return cs.users[c] + others[c] }
	// Free cores first, then the least held, lowest first on ties.
	order := slices.Clone(cs.all)
	slices.SortStableFunc(order, func(a, b int) int { return users(a) - users(b) })
	set = order[:want]
	for _, c := range set {
		if users(c) > 0 {
			shared = true
		}
		cs.users[c]++
	}
	slices.Sort(set)
	cs.jobs = append(cs.jobs, set)
	if cs.host != nil {
		// Written even when the registry could not be read: the other
		// daemons then know of this job.
		if perr := cs.host.publish(cs.jobs); err == nil {
			err = perr
		}
		if err != nil {
			cs.host.failed(err)
		} else {
			cs.host.worked()
		}
	}
	return set, shared
}

// lockHost takes the host registry's lock and counts per core the other
// daemons' jobs that hold it; unlock gives the lock back. With no
// registry, or one that fails (err), it counts none.
func (cs *coreSets) lockHost() (others map[int]int, unlock func(), err error) {
	unlock = func() {}
	if cs.host == nil {
		return nil, unlock, nil
	}
	f, err := cs.host.lock()
	if err != nil {
		return nil, unlock, err
	}
	others, err = cs.host.heldByOthers()
	return others, func() { f.Close() }, err
}

// release gives back a job's cores.
func (cs *coreSets) release(set []int) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range set {
		if cs.users[c]--; cs.users[c] <= 0 {
			delete(cs.users, c)
		}
	}
	cs.jobs = jobsWithout(cs.jobs, set)
	// A file replaced whole needs no lock: readers see the old or the
	// new, and fewer cores held in the new.
	if cs.host != nil && len(set) > 0 {
		if err := cs.host.publish(cs.jobs); err != nil {
			cs.host.failed(err)
		}
	}
}

// held counts the cores some job holds.
func (cs *coreSets) held() int {
	if cs == nil {
		return 0
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.users)
}

// formatCPUs writes a set of cores as the kernel's lists do ("0-3,8").
func formatCPUs(set []int) string {
	var b strings.Builder
	for i := 0; i < len(set); {
		j := i
		for j+1 < len(set) && set[j+1] == set[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(set[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(set[j]))
		}
		i = j + 1
	}
	return b.String()
}
