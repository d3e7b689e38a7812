// Package steal is the bookkeeping of fault-tolerant random work stealing
// for N-Queens (Phoenix §5.2.2), as a deterministic state machine with no
// I/O: messages and failure notices go in, messages come out.
//
// # Model
//
// Every rank runs one [Node]. Rank 0 starts with the whole search tree (the
// empty [queens.Prefix]); the others start idle. An idle node sends a Steal
// request to a random live peer; the victim gives away the shallowest unit of
// its stack (a Grant) or answers NoWork. A node works on the top of its stack:
// a prefix shallower than Config.LeafDepth is replaced by its children, a
// deeper one is counted in one step.
//
// # Accounting (why the count is exact under crashes)
//
// Work a node received is a grant: (the giver's rank, the giver's gift id,
// the prefix). A node keeps, for each grant it holds, the sum of what it has
// counted for it, the units of it still on its stack, and the gifts it made
// from it — each gift under a fresh, never reused id, with the thief's rank
// and the prefix given. Results flow back along the gift chain only:
//
//   - when a grant has no unit left on the stack and no gift outstanding, its
//     sum is sent to the giver as Result(gift id, sum) and the grant is
//     forgotten;
//   - a giver accepts a Result only while the gift record exists, and deletes
//     the record as it adds the sum;
//   - when a node learns that a thief died, it deletes every gift record to
//     that thief and pushes the prefixes back on its own stack (the parent
//     redoes what it gave away);
//   - when a node learns that a giver died, it drops every grant received from
//     it (the giver's own parent redoes the whole unit) and sends Cancel for
//     the gifts made from those grants, so that its thieves stop too;
//   - messages from ranks known to be dead are ignored, except Done: rank 0
//     sends it once its root grant is complete, so its total is final even
//     if rank 0 died after sending it.
//
// Invariant: for every grant of a live node, sum + counts of its stacked
// units + counts of its outstanding gifts = count of the grant's prefix.
// Expanding or counting a unit, giving a gift and taking a gift back keep it
// (the count of a prefix is the sum of its children's, see package queens).
// Accepting Result(g, s) keeps it because s is the sum of a completed grant,
// which by the same invariant at the thief is the count of g's prefix. A gift
// is settled exactly once: either its record is deleted by the one Result
// accepted for it (a grant yields at most one Result and ids are never
// reused) or it is deleted and its prefix re-stacked when the thief is known
// dead — never both, since whichever comes first deletes the record and the
// other then finds none. So when rank 0's root grant completes, its sum is
// the number of solutions: no solution is lost or counted twice, whatever
// ranks other than 0 die and whatever the order of deliveries.
//
// # Protecting the root
//
// The root grant has no giver to report to, so its holder's state is
// checkpointed: the root holder is the lowest rank a node believes alive
// (rank 0 at the start), the backup the next one. Every
// Config.CheckpointEvery steps the holder sends the backup a snapshot of the
// root grant — its sum, its stacked units and the prefixes of its
// outstanding gifts — numbered by (holder rank, sequence). A snapshot taken
// by a single-threaded machine satisfies the invariant above, with the gifts
// counted as units. When a node learns that every lower rank is dead it
// becomes the holder: it starts a new root grant from the newest snapshot it
// has (or from the empty prefix if it has none) and checkpoints to its own
// backup. Everything below the dead holder's grants is dropped by the rule
// for dead givers, and everything it had given away is in the snapshot as a
// unit, so the new root grant again satisfies the invariant: the count stays
// exact, only the work since the snapshot is redone. So any ranks may die as
// long as one survives (and every survivor eventually learns of every death).
//
// A node that knows the result answers Steal with Done, so that a rank the
// dying holder's Done never reached still ends.
//
// # Driving a node
//
//  1. New(cfg, rank, rng), then send the messages returned by Start.
//  2. Loop until Result reports done or Err is non-nil: deliver each message
//     received with Receive, each failure notice with Failed, and call Work
//     to do one unit of local computation (or to send a steal request when the
//     stack is empty). When Work reports that it did nothing, block until the
//     next message or failure notice.
//  3. Send every returned [Out]; messages to dead ranks may be dropped.
//
// A Node is not safe for concurrent use.
//
// The machine is one file: its accounting invariant (proved below) ties
// every handler to the same state.
package steal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/cohort-mp/cohort/examples/nqueens/internal/queens"
)

// Kind is the type of a message. Append only: the numbers are on the wire.
type Kind uint8

// Message kinds.
const (
	KindSteal      Kind = iota + 1 // thief → victim: give me work
	KindGrant                      // victim → thief: Prefix, under the victim's gift id Gift
	KindNoWork                     // victim → thief: nothing to give
	KindResult                     // thief → giver: the gift Gift is done, Count solutions
	KindCancel                     // giver → thief: the gift Gift no longer counts, drop it
	KindDone                       // root holder → all: the job is finished, Count solutions
	KindCheckpoint                 // root holder → backup: Count is the root sum, Units the root's units, Gift the sequence
)

var kindNames = [...]string{KindSteal: "Steal", KindGrant: "Grant", KindNoWork: "NoWork", KindResult: "Result", KindCancel: "Cancel", KindDone: "Done", KindCheckpoint: "Checkpoint"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Msg is one message between nodes. Fields not used by a kind are zero.
type Msg struct {
	Kind   Kind
	Gift   uint64        // Grant, Result, Cancel: the giver's id of the gift
	Prefix queens.Prefix // Grant: the unit given
	Count  uint64        // Result, Done, Checkpoint: a number of solutions
	Units  []queens.Prefix
}

// Out is a message to send to rank To.
type Out struct {
	To  int
	Msg Msg
}

// ErrConfig reports an unusable configuration.
var ErrConfig = errors.New("steal: invalid configuration")

// Config is what every node of a job must agree on.
type Config struct {
	N         int // board size
	LeafDepth int // a prefix with at least this many queens is counted in one step
	Ranks     int // number of ranks in the job
	// CheckpointEvery is the number of steps (units processed, results
	// received) of the root holder between two snapshots of the root grant
	// to the backup; 0 sends none, and a new holder then starts over.
	CheckpointEvery int
}

// Validate reports whether the configuration is usable.
func (c Config) Validate() error {
	if c.N < 1 || c.N > queens.MaxN {
		return fmt.Errorf("%w: N = %d", ErrConfig, c.N)
	}
	if c.LeafDepth < 1 || c.LeafDepth > c.N {
		return fmt.Errorf("%w: LeafDepth = %d, want 1 … N", ErrConfig, c.LeafDepth)
	}
	if c.Ranks < 1 {
		return fmt.Errorf("%w: Ranks = %d", ErrConfig, c.Ranks)
	}
	if c.CheckpointEvery < 0 {
		return fmt.Errorf("%w: CheckpointEvery = %d", ErrConfig, c.CheckpointEvery)
	}
	return nil
}

// DefaultLeafDepth is a leaf depth that makes a leaf a few milliseconds of
// work or less for the board sizes of the examples.
func DefaultLeafDepth(n int) int {
	d := n - 11
	if d < 2 {
		d = min(2, n)
	}
	return d
}

// Stats are counters of one node's activity.
type Stats struct {
	Units      int // units counted in one step (leaves)
	Expanded   int // units split into their children
	Steals     int // steal requests sent
	Given      int // units given to thieves
	Received   int // grants received
	Requeued   int // gifts taken back because the thief died
	Abandoned  int // grants dropped because their giver died (or cancelled them)
	StaleDrops int // messages ignored: from dead ranks, or about settled gifts
	Takeovers  int // times this node became the root holder after a death
	FromCkpt   int // units the last takeover started from (0: from scratch)
	Snapshots  int // root snapshots sent
}

// snapshot is a checkpoint of the root grant.
type snapshot struct {
	holder int
	seq    uint64
	sum    uint64
	units  []queens.Prefix
}

func (a snapshot) newer(b snapshot) bool {
	return a.holder > b.holder || (a.holder == b.holder && a.seq > b.seq)
}

type unit struct {
	prefix queens.Prefix
	grant  uint64
}

type grant struct {
	parent     int    // giver's rank; -1 for the root
	parentGift uint64 // giver's gift id
	sum        uint64 // solutions counted so far
	pending    int    // units on the stack + gifts outstanding
}

type gift struct {
	to     int
	prefix queens.Prefix
	grant  uint64
}

// Node is one rank's state.
type Node struct {
	cfg  Config
	rank int
	rng  *rand.Rand

	dead      []bool
	stack     []unit // top is the end
	grants    map[uint64]*grant
	nextGrant uint64
	gifts     map[uint64]gift
	nextGift  uint64

	stealFrom int // victim of the outstanding steal request, -1 if none

	root      uint64 // id of the root grant while this node holds it, else 0
	backup    int    // rank the root snapshots go to, -1 if none
	seq       uint64 // sequence of the last snapshot sent
	sinceCkpt int    // root holder's steps since the last snapshot
	ckpt      snapshot
	hasCkpt   bool

	finishedRoot bool // this node completed the root grant

	done  bool
	total uint64
	stats Stats
}

// New returns the node of the given rank. rng drives the choice of victims;
// give each rank its own (seeded) source.
func New(cfg Config, rank int, rng *rand.Rand) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= cfg.Ranks {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrConfig, rank, cfg.Ranks)
	}
	if rng == nil {
		return nil, fmt.Errorf("%w: nil random source", ErrConfig)
	}
	return &Node{
		cfg:       cfg,
		rank:      rank,
		rng:       rng,
		dead:      make([]bool, cfg.Ranks),
		grants:    make(map[uint64]*grant),
		gifts:     make(map[uint64]gift),
		stealFrom: -1,
		backup:    -1,
	}, nil
}

// Start gives rank 0 the root of the search; other ranks send their first
// steal request.
func (nd *Node) Start() []Out {
	if nd.rank == 0 {
		return nd.becomeRoot(nil)
	}
	return nd.maybeSteal(nil)
}

// lowestLive returns the lowest rank this node believes alive.
func (nd *Node) lowestLive() int {
	for r, d := range nd.dead {
		if !d {
			return r
		}
	}
	return -1
}

// IsRoot reports whether this node holds the root of the search (and will
// report the result).
func (nd *Node) IsRoot() bool { return nd.root != 0 }

// FinishedRoot reports whether this node completed the root grant: it is
// the one to report the result.
func (nd *Node) FinishedRoot() bool { return nd.finishedRoot }

// becomeRoot starts the root grant here: from the newest snapshot, or
// from the empty prefix.
func (nd *Node) becomeRoot(outs []Out) []Out {
	id := nd.newGrant(-1, 0)
	g := nd.grants[id]
	units := []queens.Prefix{{}}
	if nd.hasCkpt {
		units = nd.ckpt.units
		g.sum = nd.ckpt.sum
		nd.stats.FromCkpt = len(units)
	}
	if nd.rank != 0 {
		nd.stats.Takeovers++
	}
	nd.root = id
	g.pending = len(units)
	for i := len(units) - 1; i >= 0; i-- {
		nd.stack = append(nd.stack, unit{prefix: units[i].Clone(), grant: id})
	}
	outs = nd.settle(id, outs)
	return nd.chooseBackup(outs)
}

// chooseBackup picks the next live rank as backup and, if it changed,
// sends it a snapshot.
func (nd *Node) chooseBackup(outs []Out) []Out {
	if nd.root == 0 || nd.finished() {
		return outs
	}
	b := -1
	for r := nd.rank + 1; r < nd.cfg.Ranks; r++ {
		if !nd.dead[r] {
			b = r
			break
		}
	}
	if b == nd.backup {
		return outs
	}
	nd.backup = b
	return nd.checkpoint(outs)
}

// checkpoint sends a snapshot of the root grant to the backup.
func (nd *Node) checkpoint(outs []Out) []Out {
	nd.sinceCkpt = 0
	g := nd.grants[nd.root]
	if nd.backup < 0 || g == nil || nd.cfg.CheckpointEvery == 0 {
		return outs
	}
	var units []queens.Prefix
	for _, u := range nd.stack {
		if u.grant == nd.root {
			units = append(units, u.prefix)
		}
	}
	for _, id := range nd.sortedGifts() {
		if gf := nd.gifts[id]; gf.grant == nd.root {
			units = append(units, gf.prefix)
		}
	}
	nd.seq++
	nd.stats.Snapshots++
	return append(outs, Out{To: nd.backup, Msg: Msg{Kind: KindCheckpoint, Gift: nd.seq, Count: g.sum, Units: units}})
}

// tick counts a step of the root holder and checkpoints when due.
func (nd *Node) tick(outs []Out) []Out {
	if nd.root == 0 || nd.cfg.CheckpointEvery == 0 || nd.finished() {
		return outs
	}
	nd.sinceCkpt++
	if nd.sinceCkpt >= nd.cfg.CheckpointEvery {
		return nd.checkpoint(outs)
	}
	return outs
}

// Result returns the number of solutions once the job is finished.
func (nd *Node) Result() (count uint64, done bool) { return nd.total, nd.done }

// Err is always nil: the job survives any failures that leave one rank. It
// is here for drivers shared with package master.
func (nd *Node) Err() error { return nil }

// Stats returns the node's counters.
func (nd *Node) Stats() Stats { return nd.stats }

// Idle reports whether the node has no unit to work on.
func (nd *Node) Idle() bool { return len(nd.stack) == 0 }

// Outstanding returns the number of grants held and gifts not yet settled
// (for tests and progress displays).
func (nd *Node) Outstanding() (grants, gifts int) { return len(nd.grants), len(nd.gifts) }

func (nd *Node) finished() bool { return nd.done }

func (nd *Node) newGrant(parent int, parentGift uint64) uint64 {
	nd.nextGrant++
	nd.grants[nd.nextGrant] = &grant{parent: parent, parentGift: parentGift}
	return nd.nextGrant
}

// Work does one step of local computation: it expands or counts the unit on
// top of the stack. With an empty stack it sends a steal request if none is
// outstanding. busy reports whether a unit was processed; when it is false
// the caller should wait for the next message or failure notice.
func (nd *Node) Work() (outs []Out, busy bool) {
	if nd.finished() {
		return nil, false
	}
	if len(nd.stack) == 0 {
		return nd.maybeSteal(nil), false
	}
	u := nd.stack[len(nd.stack)-1]
	nd.stack = nd.stack[:len(nd.stack)-1]
	g := nd.grants[u.grant]
	if len(u.prefix) >= nd.cfg.LeafDepth {
		c, err := queens.CountPrefix(nd.cfg.N, u.prefix)
		if err != nil {
			panic(fmt.Sprintf("steal: unit %v of the search tree rejected: %v", u.prefix, err))
		}
		nd.stats.Units++
		g.sum += c
		g.pending--
	} else {
		children, err := queens.Children(nd.cfg.N, u.prefix)
		if err != nil {
			panic(fmt.Sprintf("steal: unit %v of the search tree rejected: %v", u.prefix, err))
		}
		nd.stats.Expanded++
		// Push in reverse so that the smallest column is worked on first
		// and the shallow siblings stay at the bottom for thieves.
		for i := len(children) - 1; i >= 0; i-- {
			nd.stack = append(nd.stack, unit{prefix: children[i], grant: u.grant})
		}
		g.pending += len(children) - 1
	}
	outs = nd.settle(u.grant, outs)
	outs = nd.tick(outs)
	return nd.maybeSteal(outs), true
}

// settle reports grant id to its giver if it is complete.
func (nd *Node) settle(id uint64, outs []Out) []Out {
	g := nd.grants[id]
	if g == nil || g.pending > 0 {
		return outs
	}
	if g.pending < 0 {
		panic(fmt.Sprintf("steal: grant %d has %d pending units", id, g.pending))
	}
	delete(nd.grants, id)
	if g.parent < 0 {
		nd.done, nd.total = true, g.sum
		nd.root, nd.finishedRoot = 0, true
		for r := range nd.cfg.Ranks {
			if r != nd.rank && !nd.dead[r] {
				outs = append(outs, Out{To: r, Msg: Msg{Kind: KindDone, Count: g.sum}})
			}
		}
		return outs
	}
	return append(outs, Out{To: g.parent, Msg: Msg{Kind: KindResult, Gift: g.parentGift, Count: g.sum}})
}

// maybeSteal sends a steal request to a random live peer if the node is idle
// and has none outstanding.
func (nd *Node) maybeSteal(outs []Out) []Out {
	if nd.finished() || len(nd.stack) > 0 || nd.stealFrom >= 0 {
		return outs
	}
	var live []int
	for r := range nd.cfg.Ranks {
		if r != nd.rank && !nd.dead[r] {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return outs
	}
	v := live[nd.rng.IntN(len(live))]
	nd.stealFrom = v
	nd.stats.Steals++
	return append(outs, Out{To: v, Msg: Msg{Kind: KindSteal}})
}

// Receive handles a message from rank from.
func (nd *Node) Receive(from int, m Msg) []Out {
	if from < 0 || from >= nd.cfg.Ranks || from == nd.rank {
		nd.stats.StaleDrops++
		return nil
	}
	if m.Kind == KindDone {
		// A root holder sent it when its root grant completed: the
		// total is final even if the sender has died since.
		if !nd.done {
			nd.done, nd.total, nd.root = true, m.Count, 0
		}
		return nil
	}
	if nd.dead[from] {
		nd.stats.StaleDrops++
		return nil
	}
	if nd.done {
		if m.Kind == KindSteal {
			return []Out{{To: from, Msg: Msg{Kind: KindDone, Count: nd.total}}}
		}
		return nil
	}
	var outs []Out
	switch m.Kind {
	case KindSteal:
		outs = nd.give(from)
	case KindGrant:
		if from == nd.stealFrom {
			nd.stealFrom = -1
		}
		id := nd.newGrant(from, m.Gift)
		nd.grants[id].pending = 1
		nd.stack = append(nd.stack, unit{prefix: m.Prefix.Clone(), grant: id})
		nd.stats.Received++
	case KindNoWork:
		if from == nd.stealFrom {
			nd.stealFrom = -1
		}
		// No immediate retry: the next Work call steals again, so that a
		// driver can pace the requests of an idle node.
		return nil
	case KindResult:
		gf, ok := nd.gifts[m.Gift]
		if !ok || gf.to != from {
			nd.stats.StaleDrops++
			return nil
		}
		delete(nd.gifts, m.Gift)
		g := nd.grants[gf.grant]
		g.sum += m.Count
		g.pending--
		outs = nd.settle(gf.grant, outs)
		if gf.grant == nd.root {
			outs = nd.tick(outs)
		}
	case KindCancel:
		for _, id := range nd.sortedGrants() {
			if g := nd.grants[id]; g.parent == from && g.parentGift == m.Gift {
				outs = nd.abandon(id, outs)
			}
		}
	case KindCheckpoint:
		sn := snapshot{holder: from, seq: m.Gift, sum: m.Count, units: m.Units}
		if !nd.hasCkpt || sn.newer(nd.ckpt) {
			nd.ckpt, nd.hasCkpt = sn, true
		}
		return nil
	default:

		nd.stats.StaleDrops++
		return nil
	}
	return nd.maybeSteal(outs)
}

// give answers a steal request from thief.
func (nd *Node) give(thief int) []Out {
	var outs []Out
	if len(nd.stack) == 1 && len(nd.stack[0].prefix) < nd.cfg.LeafDepth {
		// Split the only unit so that there is something to share.
		outs, _ = nd.Work()
	}
	if len(nd.stack) < 2 {
		return append(outs, Out{To: thief, Msg: Msg{Kind: KindNoWork}})
	}
	u := nd.stack[0]
	nd.stack = slices.Delete(nd.stack, 0, 1)
	nd.nextGift++
	nd.gifts[nd.nextGift] = gift{to: thief, prefix: u.prefix, grant: u.grant}
	nd.stats.Given++
	return append(outs, Out{To: thief, Msg: Msg{Kind: KindGrant, Gift: nd.nextGift, Prefix: u.prefix}})
}

// Failed handles the notice that rank r died. Notices may repeat.
func (nd *Node) Failed(r int) []Out {
	if r < 0 || r >= nd.cfg.Ranks || r == nd.rank || nd.dead[r] {
		return nil
	}
	nd.dead[r] = true
	if nd.finished() {
		return nil
	}
	var outs []Out
	// Grants received from r: r's own giver redoes them.
	for _, id := range nd.sortedGrants() {
		if g, ok := nd.grants[id]; ok && g.parent == r {
			outs = nd.abandon(id, outs)
		}
	}
	// Gifts held by r: redo them here.
	for _, id := range nd.sortedGifts() {
		gf := nd.gifts[id]
		if gf.to != r {
			continue
		}
		delete(nd.gifts, id)
		nd.stack = slices.Insert(nd.stack, 0, unit{prefix: gf.prefix, grant: gf.grant})
		nd.stats.Requeued++
	}
	if nd.stealFrom == r {
		nd.stealFrom = -1
	}
	if nd.root == 0 && nd.lowestLive() == nd.rank {
		// Every lower rank is dead: the root is ours now.
		outs = nd.becomeRoot(outs)
	} else {
		outs = nd.chooseBackup(outs)
	}
	return nd.maybeSteal(outs)
}

// abandon drops grant id with its stacked units, and cancels its gifts.
func (nd *Node) abandon(id uint64, outs []Out) []Out {
	delete(nd.grants, id)
	nd.stack = slices.DeleteFunc(nd.stack, func(u unit) bool { return u.grant == id })
	for _, gid := range nd.sortedGifts() {
		if gf := nd.gifts[gid]; gf.grant == id {
			delete(nd.gifts, gid)
			if !nd.dead[gf.to] {
				outs = append(outs, Out{To: gf.to, Msg: Msg{Kind: KindCancel, Gift: gid}})
			}
		}
	}
	nd.stats.Abandoned++
	return outs
}

func (nd *Node) sortedGrants() []uint64 {
	ids := make([]uint64, 0, len(nd.grants))
	for id := range nd.grants {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (nd *Node) sortedGifts() []uint64 {
	ids := make([]uint64, 0, len(nd.gifts))
	for id := range nd.gifts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
