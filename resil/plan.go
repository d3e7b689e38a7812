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
	next, orphans := assign(old, live)
	if orphans != nil {
		return nil, &NoSpareError{Ranks: orphans}
	}
	return next, nil
}

// assign is remap that, instead of failing, leaves -1 in the map for the
// ranks left without a process (orphans, in rank order).
func assign(old []int, live []int) (next, orphans []int) {
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
	next = slices.Clone(old)
	for r, p := range old {
		if _, ok := slices.BinarySearch(live, p); ok {
			continue
		}
		if len(idle) == 0 {
			orphans = append(orphans, r)
			next[r] = -1
			continue
		}
		next[r], idle = idle[0], idle[1:]
	}
	return next, orphans
}

// dropOrphans is how the run continues on fewer ranks (Config.Shrink):
// the ranks of next left without a process (-1) are dropped and the
// others numbered again in their order. It returns the new map and, for
// each rank of next, its new number (-1 if dropped).
func dropOrphans(next []int) (mapping, newRank []int) {
	newRank = make([]int, len(next))
	for r, p := range next {
		newRank[r] = -1
		if p >= 0 {
			newRank[r] = len(mapping)
			mapping = append(mapping, p)
		}
	}
	return mapping, newRank
}

// adopt returns which rank restores each slot of a checkpoint (a rank
// that took it) after the ranks were numbered again by newRank: the slot
// of rank holder[x], under its new number; a slot whose rank was dropped
// goes to the rank of the nearest slot below it that kept its rank, or,
// if none, above it. A program with its data in blocks by rank (rows of a
// plate) thus finds a dropped block next to one of its own.
func adopt(holder, newRank []int) []int {
	out := make([]int, len(holder))
	for x, r := range holder {
		out[x] = newRank[r]
	}
	for x := range out {
		if newRank[holder[x]] >= 0 {
			continue
		}
		out[x] = -1
		for y := x - 1; y >= 0 && out[x] < 0; y-- {
			out[x] = newRank[holder[y]]
		}
		for y := x + 1; y < len(out) && out[x] < 0; y++ {
			out[x] = newRank[holder[y]]
		}
		if out[x] < 0 {
			panic(fmt.Sprintf("resil: slot %d has no rank left to go to (holders %v, new ranks %v)", x, holder, newRank))
		}
	}
	return out
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
	return slotKeepers(k, rankHost, identity(len(rankHost)))
}

// slotKeepers is keeperTable for the slots of a checkpoint that fewer
// ranks restore (Config.Shrink): slot x's keepers are holder[x] (the rank
// that restores it) and that rank's buddies under rankHost; keptBy[r]
// lists the slots whose copies rank r keeps for another.
func slotKeepers(k int, rankHost []string, holder []int) (keep, keptBy [][]int) {
	keep, keptBy = make([][]int, len(holder)), make([][]int, len(rankHost))
	for x, h := range holder {
		keep[x] = keepers(h, k, rankHost)
		for _, r := range keep[x][1:] {
			keptBy[r] = append(keptBy[r], x)
		}
	}
	return keep, keptBy
}

// identity returns 0, 1, …, n−1.
func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// inventory is what one process holds of the checkpoints: the states of
// the slots in committed at epoch Epoch, taken by Width ranks, and those
// in pending at epoch Pending (0: none), the epoch being stored but not
// known committed (taken by the ranks of the attempt). A slot is the rank
// that took the state; the bits cover the job's ranks at its start, as
// many as any epoch's.
type inventory struct {
	Epoch, Width, Pending int
	committed             []bool // by slot
	pending               []bool
}

// has reports whether the process holds rank x's state of epoch e.
func (in inventory) has(x, e int) bool {
	return (in.Epoch == e && in.committed[x]) || (in.Pending == e && in.pending[x])
}

// inventorySize is the size of an inventory's encoding for n slots.
func inventorySize(n int) int { return 24 + n }

// marshal encodes the inventory in a fixed size for n slots (the
// Allgather of a recovery needs one): two epochs and the committed one's
// width, then one byte per slot.
func (in inventory) marshal(n int) []byte {
	b := make([]byte, inventorySize(n))
	binary.LittleEndian.PutUint64(b, uint64(in.Epoch))
	binary.LittleEndian.PutUint64(b[8:], uint64(in.Pending))
	binary.LittleEndian.PutUint64(b[16:], uint64(in.Width))
	for x := range n {
		if in.committed[x] {
			b[24+x] |= 1
		}
		if in.pending[x] {
			b[24+x] |= 2
		}
	}
	return b
}

func unmarshalInventory(b []byte, n int) (inventory, error) {
	if len(b) != inventorySize(n) {
		return inventory{}, fmt.Errorf("resil: an inventory of %d bytes for %d slots", len(b), n)
	}
	in := inventory{
		Epoch:     int(binary.LittleEndian.Uint64(b)),
		Pending:   int(binary.LittleEndian.Uint64(b[8:])),
		Width:     int(binary.LittleEndian.Uint64(b[16:])),
		committed: make([]bool, n),
		pending:   make([]bool, n),
	}
	if in.Width < 0 || in.Width > n {
		return inventory{}, fmt.Errorf("resil: an inventory of an epoch taken by %d ranks, of %d", in.Width, n)
	}
	for x := range n {
		in.committed[x] = b[24+x]&1 != 0
		in.pending[x] = b[24+x]&2 != 0
	}
	return in, nil
}

// transfer is one state to move in a recovery: that of slot Rank (the
// rank that took it), from the process at index From of the survivors to
// the one at index To.
type transfer struct {
	Rank, From, To int
}

// restoreEpoch is the epoch a recovery goes back to: the newest that some
// survivor knows committed, and how many ranks took it. A commit needs
// every live holder to have stored the epoch first, so every survivor
// holds what it must of it, committed or still pending.
func restoreEpoch(invs []inventory) (e, width int) {
	for _, in := range invs {
		if in.Epoch > e {
			e, width = in.Epoch, in.Width
		}
	}
	return e, width
}

// plan lists the transfers that give every keeper of every slot of epoch
// e (keep, ranks under the new map procOf: rank → index among the
// survivors) that slot's state, each from the lowest-indexed survivor
// that holds it. It fails with a [*StateLostError] for the first slot
// that no survivor holds (its process and every buddy's, oldKeep under
// the map before the failure, were lost).
func plan(invs []inventory, procOf []int, e int, keep, oldKeep [][]int) ([]transfer, error) {
	if e == 0 {
		return nil, nil // nothing was ever committed: every rank starts afresh
	}
	var out []transfer
	for x := range keep {
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
