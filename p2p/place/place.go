// Package place decides where the processes of a job run: P2P-MPI's
// allocation strategies (Genaud and Rattanapoka, "P2P-MPI", §3.2) over the
// hosts that granted a reservation, ranked by their latency to the
// submitter.
//
//   - Spread maps as few processes as possible on each host (the most
//     memory per process), locality second: one process per host in order
//     of increasing latency; when the list is exhausted, round-robin again
//     from its beginning (the first host gets a second process, …),
//     skipping hosts whose capacity is used up.
//   - Concentrate maximises locality: as many processes as the first host
//     accepts (its capacity P), then the next host, and so on.
//
// Hosts of equal latency are ranked by name, so a placement is a pure
// function of its inputs. With replication (r replicas of each of n logical
// ranks) the strategy yields n×r slots in its order, and the replicas are
// laid on them so that no two replicas of one rank share a host whenever
// the slots allow it; a placement that cannot avoid it says which ranks
// (Placement.Shared).
//
// Reservation uses overbooking (§3): ask more hosts than needed, since some
// will not answer or refuse; [Plan] keeps the tokens the placement uses and
// lists the others for release.
package place

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Host is a peer that granted a reservation.
type Host struct {
	// Name identifies the host (its daemon's name or address).
	Name string
	// Latency is the measured round trip from the submitter.
	Latency time.Duration
	// Capacity is how many processes of this job the host accepts (P).
	Capacity int
}

// Strategy is an allocation strategy.
type Strategy uint8

// The strategies of P2P-MPI §3.2.
const (
	Spread Strategy = iota + 1
	Concentrate
)

func (s Strategy) String() string {
	switch s {
	case Spread:
		return "spread"
	case Concentrate:
		return "concentrate"
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// ParseStrategy parses "spread" or "concentrate".
func ParseStrategy(s string) (Strategy, error) {
	switch s {
	case "spread":
		return Spread, nil
	case "concentrate":
		return Concentrate, nil
	}
	return 0, fmt.Errorf("%w: unknown strategy %q (want spread or concentrate)", ErrBadRequest, s)
}

// Errors of the package.
var (
	// ErrBadRequest: a request that no host set could satisfy (n < 1,
	// r < 1, an unknown strategy, a negative capacity, a duplicate host).
	ErrBadRequest = errors.New("place: bad request")
	// ErrTooFew: the hosts offer fewer slots than the job needs; the
	// message says how many there are.
	ErrTooFew = errors.New("place: not enough slots")
)

// Slot is one process of the job: replica Replica of logical rank Rank,
// on Host.
type Slot struct {
	Rank, Replica int
	Host          string
}

// Placement is where every process of a job runs.
type Placement struct {
	// Slots lists the processes, replica-major: replica 0 of ranks 0…n−1,
	// then replica 1 of ranks 0…n−1, …
	Slots []Slot
	// Shared lists the ranks two of whose replicas had to share a host
	// (too few hosts to separate them), in increasing order.
	Shared []int
}

// PerHost returns how many processes each host runs.
func (p Placement) PerHost() map[string]int {
	m := map[string]int{}
	for _, s := range p.Slots {
		m[s.Host]++
	}
	return m
}

// Hosts returns the hosts used, in the order they first appear.
func (p Placement) Hosts() []string {
	var hs []string
	for _, s := range p.Slots {
		if !slices.Contains(hs, s.Host) {
			hs = append(hs, s.Host)
		}
	}
	return hs
}

// Rank sorts hosts by increasing latency, then by name.
func Rank(hosts []Host) []Host {
	out := slices.Clone(hosts)
	slices.SortStableFunc(out, func(a, b Host) int {
		if c := cmp.Compare(a.Latency, b.Latency); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// Place maps n logical ranks of r replicas each on hosts with strategy s.
func Place(hosts []Host, n, r int, s Strategy) (Placement, error) {
	if n < 1 || r < 1 {
		return Placement{}, fmt.Errorf("%w: %d ranks × %d replicas", ErrBadRequest, n, r)
	}
	if s != Spread && s != Concentrate {
		return Placement{}, fmt.Errorf("%w: strategy %v", ErrBadRequest, s)
	}
	total, seen := 0, map[string]bool{}
	for _, h := range hosts {
		switch {
		case h.Capacity < 0:
			return Placement{}, fmt.Errorf("%w: host %s has capacity %d", ErrBadRequest, h.Name, h.Capacity)
		case seen[h.Name]:
			return Placement{}, fmt.Errorf("%w: host %s listed twice", ErrBadRequest, h.Name)
		}
		seen[h.Name] = true
		total += h.Capacity
	}
	need := n * r
	if need > total {
		return Placement{}, fmt.Errorf("%w: %d processes (%d ranks × %d replicas) asked, %d slots on %d hosts available", ErrTooFew, need, n, r, total, len(hosts))
	}
	order := slots(Rank(hosts), need, s)
	return assign(order, n, r), nil
}

// slots returns the hosts of need slots in the strategy's order.
func slots(ranked []Host, need int, s Strategy) []string {
	out := make([]string, 0, need)
	if s == Concentrate {
		for _, h := range ranked {
			for k := 0; k < h.Capacity && len(out) < need; k++ {
				out = append(out, h.Name)
			}
		}
		return out
	}
	used := make([]int, len(ranked))
	for len(out) < need {
		for i, h := range ranked { // one round: one more process per host
			if used[i] < h.Capacity && len(out) < need {
				used[i]++
				out = append(out, h.Name)
			}
		}
	}
	return out
}

// assign lays replica k of rank i on the slots, in replica-major order:
// each process takes the first free slot whose host holds no other replica
// of its rank, or, if there is none, the first free slot (the rank is then
// Shared).
func assign(order []string, n, r int) Placement {
	free := slices.Clone(order)
	taken := make([]bool, len(free))
	on := make([]map[string]bool, n) // hosts holding a replica of rank i
	var p Placement
	shared := map[int]bool{}
	for k := range r {
		for i := range n {
			if on[i] == nil {
				on[i] = map[string]bool{}
			}
			pick := -1
			for j, h := range free {
				if !taken[j] && !on[i][h] {
					pick = j
					break
				}
			}
			if pick < 0 {
				pick = slices.Index(taken, false)
				shared[i] = true
			}
			taken[pick] = true
			on[i][free[pick]] = true
			p.Slots = append(p.Slots, Slot{Rank: i, Replica: k, Host: free[pick]})
		}
	}
	for i := range n {
		if shared[i] {
			p.Shared = append(p.Shared, i)
		}
	}
	return p
}

// Overbook returns how many hosts to ask for a reservation when the job
// needs need slots and each host offers about perHost: the hosts needed,
// plus half again (at least one more), since some peers do not answer or
// refuse (P2P-MPI §3).
func Overbook(need, perHost int) int {
	if need < 1 {
		return 0
	}
	perHost = max(perHost, 1)
	hosts := (need + perHost - 1) / perHost
	return hosts + max(1, hosts/2)
}

// Plan places the job on the hosts that granted a reservation and returns
// the placement and the hosts whose tokens the submitter must release (the
// overbooked ones the placement does not use), ranked.
func Plan(granted []Host, n, r int, s Strategy) (Placement, []string, error) {
	p, err := Place(granted, n, r, s)
	if err != nil {
		return Placement{}, nil, err
	}
	used := p.PerHost()
	var release []string
	for _, h := range Rank(granted) {
		if used[h.Name] == 0 {
			release = append(release, h.Name)
		}
	}
	return p, release, nil
}
