package comm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Binding ranks to cores. A rank that polls (a blocking wait looks at its
// rings instead of sleeping) needs its core: when the OS moves it, or puts
// another process's thread on its core, its peer's replies wait for it,
// the peer's own poll runs out and parks, and every message then pays a
// wake-up. Measured on a 2-core machine with one other busy process
// (nice 10) beside a two-rank ping-pong of 8 bytes: 3.4–8.5 µs per message
// unbound, against 1.0 µs with each rank bound to a core of its own (Open
// MPI, which binds by default, 0.5 µs; quiet, both about 1 µs and 0.2 µs).
// So Init binds, when COHORT_BIND is auto (the default) and the ranks on
// this host number from 2 to the CPUs this process may run on: the local
// rank i (the i-th of this host's ranks in rank order) gets the i-th
// share of those CPUs, as many as its GOMAXPROCS (procs.go), and every
// thread of the process is bound to them (threads started later inherit
// it). More ranks than CPUs are left to the OS (they cannot all poll:
// readerSpinFor turns polling off; a communicator's shared-memory
// collectives start them spread, unbound: coll_shm_home.go), and so is a
// single rank.
// COHORT_BIND=off never binds.
//
// Each job binds as if it had the host to itself, as Open MPI does, unless
// COHORT_CPUS names the CPUs it was given (a list such as "0-3,8"): a
// daemon running several jobs at once (p2p/daemon) gives each a set of
// cores of its own and says which there. The ranks then share those
// among themselves, and a rank left unbound above (alone, or more ranks
// than CPUs) is bound to the whole set. Without it, two jobs on one host
// put their ranks on the same CPUs: run one at a time there, or turn
// binding off.

// bindEnv names the environment variable Init reads for binding: "auto"
// (the default, also when unset) or "off".
const bindEnv = "COHORT_BIND"

// cpusEnv names the variable that gives the job's CPUs, set by the daemon
// that runs it (p2p/daemon's EnvCPUs).
const cpusEnv = "COHORT_CPUS"

// parseCPUs reads COHORT_CPUS's value, a list of CPUs such as "0-3,8":
// ascending, without repeats; nil when unset.
func parseCPUs(v string) ([]int, error) {
	if v == "" {
		return nil, nil
	}
	bad := fmt.Errorf("%w: %s=%q: want a list of CPUs such as 0-3,8", ErrBadArg, cpusEnv, v)
	var cpus []int
	for part := range strings.SplitSeq(v, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, bad
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, bad
			}
		}
		if b >= 1<<16 {
			return nil, bad
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// withinSet is the CPUs of allowed that the job's set names, or allowed
// when there is no set or it names none of them.
func withinSet(allowed, set []int) []int {
	if set == nil {
		return allowed
	}
	var in []int
	for _, c := range allowed {
		if slices.Contains(set, c) {
			in = append(in, c)
		}
	}
	if in == nil {
		return allowed
	}
	return in
}

// parseBind reads COHORT_BIND's value: whether to bind.
func parseBind(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "auto", "on":
		return true, nil
	case "off", "0", "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s=%q: want auto or off", ErrBadArg, bindEnv, v)
}

// bindShare returns the CPUs of allowed (those the process may run on)
// for the idx-th of local ranks on this host, or nil to leave the rank
// unbound.
func bindShare(allowed []int, local, idx int) []int {
	if local < 2 || local > len(allowed) || idx < 0 || idx >= local {
		return nil
	}
	k := len(allowed) / local
	return allowed[idx*k : (idx+1)*k]
}

// localIndex is self's position among the ranks of addrs on its host (in
// rank order), and how many there are (localRanks).
func localIndex(addrs []string, self int) (idx, local int) {
	if self < 0 || self >= len(addrs) {
		return 0, 1
	}
	mine := hostIP(addrs[self])
	for r, a := range addrs {
		ip := hostIP(a)
		if ip != nil && mine != nil && (ip.Equal(mine) || ip.IsLoopback() && mine.IsLoopback()) {
			if r < self {
				idx++
			}
			local++
		}
	}
	return idx, max(local, 1)
}
