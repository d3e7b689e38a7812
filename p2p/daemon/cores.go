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
// fewest other jobs hold (shared: the daemon logs it).

// EnvCPUs names the variable that tells a job's process the cores its job
// was given, as a list such as "0-3,8" (comm reads it: COHORT_CPUS).
const EnvCPUs = "COHORT_CPUS"

// coreSets hands out the daemon's cores to its jobs.
type coreSets struct {
	all     []int // the cores the daemon may run on, ascending
	perSlot int   // cores a slot gets

	mu    sync.Mutex
	users map[int]int // per core, how many running jobs hold it
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
	// Free cores first, then the least held, lowest first on ties.
	order := slices.Clone(cs.all)
	slices.SortStableFunc(order, func(a, b int) int { return cs.users[a] - cs.users[b] })
	set = order[:want]
	for _, c := range set {
		if cs.users[c] > 0 {
			shared = true
		}
		cs.users[c]++
	}
	slices.Sort(set)
	return set, shared
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
