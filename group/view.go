package group

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/cohort-mp/cohort/member"
)

// Member is a member of a group as every member sees it in a given view.
type Member struct {
	// ID is derived from Name (its 32-bit FNV-1a hash): the same after a
	// restart.
	ID NodeID
	// Name is the node's Config.Name (by default its host name).
	Name string
	// Addr is the address other nodes reach it at ("host:port").
	Addr string
	// Meta is its metadata as published with the view (shared: do not
	// modify it).
	Meta []byte
}

func (m Member) String() string { return m.Name }

// View is a membership view as delivered by this node. Every node that
// delivers the view numbered Epoch delivers the same Members, in the same
// order, with the same metadata.
type View struct {
	// Epoch numbers the view; the epochs a node delivers only grow (they
	// are not consecutive integers). It is the fencing token of [View.Owner]
	// and [View.Leader]: a decision made in epoch E carries E, and whoever
	// acts on it (a store, a peer) refuses a token older than one it has
	// seen.
	Epoch uint64
	// Prev is the epoch of the view this node delivered before this one (0
	// for its first). A reader of [Group.Views] that finds Prev different
	// from the last epoch it read has missed views (its queue was full).
	Prev uint64
	// Members are the members in view order; the first is the
	// coordinator of view changes, [View.Leader].
	Members []Member
	// Joined are the members that entered since the previous view this
	// node delivered (all of them in its first view). A member that
	// restarted under its name is in Joined and Departed.
	Joined []Member
	// Departed are the members of the previous view delivered that are
	// not in this one, failed or left, and those that restarted.
	Departed []Member
	// Left are those of Departed that left gracefully ([Group.Leave]), as
	// the view changes that excluded them say: every member that delivers
	// epoch E after the same previous view reports the same Left. A leaver
	// that crashed, or was cut off from every member, before any of them
	// heard its leave is in Departed only, at every member alike; so is a
	// leaver excluded by a view this node skipped (the membership sent it
	// a later view whole).
	Left []Member
}

// Has reports whether id is a member of v.
func (v View) Has(id NodeID) bool { _, ok := v.Member(id); return ok }

// Member returns the member of v with id.
func (v View) Member(id NodeID) (Member, bool) {
	i := slices.IndexFunc(v.Members, func(m Member) bool { return m.ID == id })
	if i < 0 {
		return Member{}, false
	}
	return v.Members[i], true
}

// Leader returns the view's first member, which coordinates its view
// changes: every member that delivers epoch E agrees on it, so (Leader,
// Epoch) names one leader per epoch. The zero Member for an empty view.
func (v View) Leader() Member {
	if len(v.Members) == 0 {
		return Member{}
	}
	return v.Members[0]
}

// Owner returns the member that owns key in this view by rendezvous
// hashing over the members' names: the member whose hash of (name, key)
// is highest. Every member that delivers epoch E agrees on the owner of
// every key; when a member departs, only its keys move, and when one
// joins, only the keys it takes. Names, not ids or addresses, are hashed,
// so a member restarted under its name keeps its keys. The zero Member for
// an empty view.
func (v View) Owner(key string) Member {
	var best Member
	var top uint64
	for i, m := range v.Members {
		if h := rendezvous(m.Name, key); i == 0 || h > top || h == top && m.Name < best.Name {
			best, top = m, h
		}
	}
	return best
}

// rendezvous is the weight of name for key: FNV-1a over both, finished
// by a 64-bit mixer (FNV alone spreads close keys poorly in high bits).
func rendezvous(name, key string) uint64 {
	h := fnv.New64a()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write([]byte(name))
	h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// String renders the view as "epoch 3.1 [a b c]".
func (v View) String() string {
	names := make([]string, len(v.Members))
	for i, m := range v.Members {
		names[i] = m.Name
	}
	return fmt.Sprintf("epoch %s [%s]", member.FormatEpoch(v.Epoch), strings.Join(names, " "))
}

// idOf derives a node's id from its name: FNV-1a, 32 bits, never
// core.None.
func idOf(name string) NodeID {
	h := fnv.New32a()
	h.Write([]byte(name))
	id := NodeID(h.Sum32())
	if id == ^NodeID(0) {
		id--
	}
	return id
}
