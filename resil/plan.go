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

// buddyOf is the rank that keeps the j-th copy (1 ≤ j ≤ k) of rank r's
// state among n ranks: the ranks after r, wrapping around. With ranks
// placed on hosts in blocks this puts the first copy on the next host
// only at block boundaries; DESIGN.md says so among the limits.
func buddyOf(r, j, n int) int { return (r + j) % n }

// keepers returns the ranks that keep rank x's state: x itself and its k
// buddies, in that order.
func keepers(x, k, n int) []int {
	out := []int{x}
	for j := 1; j <= k; j++ {
		out = append(out, buddyOf(x, j, n))
	}
	return out
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

// plan lists the transfers that give every keeper of every rank (under
// the new map procOf: rank → index among the survivors) that rank's state
// of epoch e, each from the lowest-indexed survivor that holds it. It
// fails with a [*StateLostError] for the first rank that no survivor
// holds (its holder and every buddy were lost).
func plan(invs []inventory, procOf []int, e, k int) ([]transfer, error) {
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
			return nil, &StateLostError{Rank: x, Epoch: e, Keepers: keepers(x, k, n)}
		}
		for _, r := range keepers(x, k, n) {
			if to := procOf[r]; !invs[to].has(x, e) {
				out = append(out, transfer{Rank: x, From: from, To: to})
			}
		}
	}
	return out, nil
}
