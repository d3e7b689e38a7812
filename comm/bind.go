package comm

import (
	"fmt"
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
// readerSpinFor turns polling off), and so is a single rank.
// COHORT_BIND=off never binds. Each job binds as if it had the host to
// itself, as Open MPI does: two jobs on one host put their ranks on the
// same CPUs, so run one at a time there, or turn binding off.

// bindEnv names the environment variable Init reads for binding: "auto"
// (the default, also when unset) or "off".
const bindEnv = "COHORT_BIND"

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
