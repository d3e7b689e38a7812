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
	ranked := Rank(hosts)
	if r > 1 {
		// A host can hold one replica of each rank: take at most n slots
		// of each when that is enough, so that the strategy does not pile
		// a rank's replicas on one host while others have room.
		capped, room := slices.Clone(ranked), 0
		for i := range capped {
			capped[i].Capacity = min(capped[i].Capacity, n)
			room += capped[i].Capacity
		}
		if room >= need {
			ranked = capped
		}
	}
	return assign(slots(ranked, need, s), n, r), nil
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

// assign lays the n·r processes on the slots. Unreplicated (r = 1), rank
// i takes slot i. Replicated, the slots are grouped by host (hosts in the
// order of their first slot, at most n slots of a host in its group, the
// rest set aside), and the j-th grouped slot goes to replica ⌊j/n⌋ of rank
// j mod n: the slots of one rank are n apart in the grouped list and a
// group holds at most n of them, so no host holds two replicas of a rank.
// The grouped list is long enough — no rank shares a host — whenever any
// placement on these slots can keep every rank's replicas apart (each host
// can hold at most one replica of each rank: n slots). Otherwise the
// set-aside slots take the last processes, and the ranks that then have
// two replicas on one host are Shared.
func assign(order []string, n, r int) Placement {
	var p Placement
	if r == 1 {
		for i, h := range order {
			p.Slots = append(p.Slots, Slot{Rank: i, Host: h})
		}
		return p
	}
	count := map[string]int{}
	var hosts []string
	for _, h := range order {
		if count[h] == 0 {
			hosts = append(hosts, h)
		}
		count[h]++
	}
	var grouped, aside []string
	for _, h := range hosts {
		for k := range count[h] {
			if k < n {
				grouped = append(grouped, h)
			} else {
				aside = append(aside, h)
			}
		}
	}
	all := append(grouped, aside...)
	on := make([]map[string]bool, n)
	shared := map[int]bool{}
	for j, h := range all[:n*r] {
		i := j % n
		if on[i] == nil {
			on[i] = map[string]bool{}
		}
		if on[i][h] {
			shared[i] = true
		}
		on[i][h] = true
		p.Slots = append(p.Slots, Slot{Rank: i, Replica: j / n, Host: h})
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
