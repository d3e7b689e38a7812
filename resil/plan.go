package resil

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The pure part of a recovery: from the agreed survivors, the old
// rank→process map and every survivor's inventory, each survivor computes
// the same new map and the same transfers, without talking.

// remap returns the new rank→process map: each rank whose process is not
// among live takes, in rank order, the lowest-numbered live process that
// holds no rank (a spare, or a process that finished its part). live is
// sorted. It fails with a [*NoSpareError] naming the ranks left without a
// process when there are not enough.
func remap(old []int, live []int) ([]int, error) {
	held := make(map[int]bool, len(old))
	for _, p := range old {
		held[p] = true
	}
	var idle []int
	for _, p := range live {
		if !held[p] {
			idle = append(idle, p)
		}
	}
	next := slices.Clone(old)
	var orphans []int
	for r, p := range old {
		if _, ok := slices.BinarySearch(live, p); ok {
			continue
		}
		if len(idle) == 0 {
			orphans = append(orphans, r)
			continue
		}
		next[r], idle = idle[0], idle[1:]
	}
	if orphans != nil {
		return nil, &NoSpareError{Ranks: orphans}
	}
	return next, nil
}

// keepers returns the ranks that keep rank x's state: x itself, then its
// k buddies, chosen so that a host's loss takes as few copies as it can:
// first ranks on hosts that hold no copy yet, then ranks on any host but
// x's, then any. Each pass looks at the ranks from x + n/H on (H hosts,
// wrapping around): with the ranks in blocks of n/H per host, that is the
// rank at x's place on the next host, so that every rank keeps as many
// copies as the others. rankHost[r] is the host of rank r's process under
// the map ("" for unknown: all on one host, the buddies are then x+1 …
// x+k). Every survivor computes the same from the agreed map and the
// job's address table.
func keepers(x, k int, rankHost []string) []int {
	n := len(rankHost)
	hosts := map[string]bool{}
	for _, h := range rankHost {
		hosts[h] = true
	}
	from := x + n/len(hosts)
	out := []int{x}
	picked := map[int]bool{x: true}
	used := map[string]bool{rankHost[x]: true}
	pass := func(ok func(b int) bool) {
		for i := 0; i < n && len(out) <= k; i++ {
			if b := (from + i) % n; !picked[b] && ok(b) {
				out = append(out, b)
				picked[b], used[rankHost[b]] = true, true
			}
		}
	}
	pass(func(b int) bool { return !used[rankHost[b]] })
	pass(func(b int) bool { return rankHost[b] != rankHost[x] })
	pass(func(int) bool { return true })
	return out
}

// keeperTable returns every rank's keepers, and for every rank the ranks
// whose copies it keeps (in increasing order), under rankHost.
func keeperTable(k int, rankHost []string) (keep, keptBy [][]int) {
	n := len(rankHost)
	keep, keptBy = make([][]int, n), make([][]int, n)
	for x := range n {
		keep[x] = keepers(x, k, rankHost)
		for _, r := range keep[x][1:] {
			keptBy[r] = append(keptBy[r], x)
		}
	}
	return keep, keptBy
}

// inventory is what one process holds of the checkpoints: the states of
// the ranks in committed at epoch Epoch, and those in pending at epoch
// Pending (0: none), the epoch being stored but not known committed.
type inventory struct {
	Epoch, Pending int
	committed      []bool // by rank
	pending        []bool
}

// has reports whether the process holds rank x's state of epoch e.
func (in inventory) has(x, e int) bool {
	return (in.Epoch == e && in.committed[x]) || (in.Pending == e && in.pending[x])
}

// marshal encodes the inventory in a fixed size for n ranks (the
// Allgather of a recovery needs one): two epochs, then one byte per rank.
func (in inventory) marshal(n int) []byte {
	b := make([]byte, 16+n)
	binary.LittleEndian.PutUint64(b, uint64(in.Epoch))
	binary.LittleEndian.PutUint64(b[8:], uint64(in.Pending))
	for x := range n {
		if in.committed[x] {
			b[16+x] |= 1
		}
		if in.pending[x] {
			b[16+x] |= 2
		}
	}
	return b
}

func unmarshalInventory(b []byte, n int) (inventory, error) {
	if len(b) != 16+n {
		return inventory{}, fmt.Errorf("resil: an inventory of %d bytes for %d ranks", len(b), n)
	}
	in := inventory{
		Epoch:     int(binary.LittleEndian.Uint64(b)),
		Pending:   int(binary.LittleEndian.Uint64(b[8:])),
		committed: make([]bool, n),
		pending:   make([]bool, n),
	}
	for x := range n {
		in.committed[x] = b[16+x]&1 != 0
		in.pending[x] = b[16+x]&2 != 0
	}
	return in, nil
}

// transfer is one state to move in a recovery: rank Rank's state, from
// the process at index From of the survivors to the one at index To.
type transfer struct {
	Rank, From, To int
}

// restoreEpoch is the epoch a recovery goes back to: the newest that some
// survivor knows committed. A commit needs every live holder to have
// stored the epoch first, so every survivor holds what it must of it,
// committed or still pending.
func restoreEpoch(invs []inventory) int {
	e := 0
	for _, in := range invs {
		e = max(e, in.Epoch)
	}
	return e
}

// plan lists the transfers that give every keeper of every rank (keep,
// under the new map procOf: rank → index among the survivors) that
// rank's state of epoch e, each from the lowest-indexed survivor that
// holds it. It fails with a [*StateLostError] for the first rank that no
// survivor holds (its process and every buddy's, oldKeep under the map
// before the failure, were lost).
func plan(invs []inventory, procOf []int, e int, keep, oldKeep [][]int) ([]transfer, error) {
	if e == 0 {
		return nil, nil // nothing was ever committed: every rank starts afresh
	}
	n := len(procOf)
	var out []transfer
	for x := range n {
		from := -1
		for q, in := range invs {
			if in.has(x, e) {
				from = q
				break
			}
		}
		if from < 0 {
			return nil, &StateLostError{Rank: x, Epoch: e, Keepers: slices.Clone(oldKeep[x])}
		}
		for _, r := range keep[x] {
			if to := procOf[r]; !invs[to].has(x, e) {
				out = append(out, transfer{Rank: x, From: from, To: to})
			}
		}
	}
	return out, nil
}
