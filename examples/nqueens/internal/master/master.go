// Package master is the bookkeeping of fault-tolerant master–worker N-Queens
// (Phoenix §5.2.1) as a deterministic state machine with no I/O: the master
// hands out tasks, takes back the tasks of dead workers, and checkpoints its
// results to a backup that takes over when the master dies.
//
// # Model
//
// The tasks are the prefixes of Config.TaskDepth queens, numbered in the
// order of [queens.Prefixes]; every rank computes the same list, so messages
// carry task numbers only. The master is the lowest rank a node believes
// alive, the backup the second lowest; both roles move up as ranks die.
//
//   - A worker sends Request to the master, carrying the result of its
//     previous task if any; the master answers with a Task, or keeps the
//     worker waiting until a task is free, or ends the job with Done.
//   - The master records each result in a map task → count. Every
//     Config.CheckpointEvery new results it sends those entries to the backup
//     (Checkpoint); when the backup changes it sends the new one everything.
//   - When a worker dies, the master puts the worker's task back in the queue.
//   - When the master dies, each worker resends its unanswered Request to
//     the new master; the new master starts from the results it got as backup
//     (a node that receives a Request before it knows it is master keeps it
//     and answers once it is), makes every other task pending again and
//     checkpoints to its own backup.
//
// # Why the count is exact
//
// The master's total is Σ count[t] over a map keyed by task number, summed
// only when every task has an entry. An entry comes from a worker that
// counted that very task, or from a checkpoint, whose entries came from a
// master's map; the count of a task is a function of the task. So each task
// contributes its count exactly once whatever the duplicates (a task redone
// after a takeover, a late result, a checkpoint resent) — duplicates only cost
// time. Losing entries (results after the last checkpoint, or the whole state
// if master and backup die together) costs time too: the tasks are pending
// again at the new master and are redone. The job finishes as long as one
// rank survives and every survivor eventually learns of every death.
//
// # Driving a node
//
// As for package steal: Start, then Receive/Failed/Work until Result reports
// done; Work does one task (on a worker, or on a master left alone) and
// reports busy=false when there is nothing to compute.
//
// A Node is not safe for concurrent use.
package master

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/examples/nqueens/internal/queens"
)

// Kind is the type of a message. Append only: the numbers are on the wire.
type Kind uint8

// Message kinds.
const (
	KindRequest    Kind = iota + 1 // worker → master: Entries holds the previous result (0 or 1 entry)
	KindTask                       // master → worker: compute task Task
	KindCheckpoint                 // master → backup: Entries are results to keep
	KindDone                       // master → all: the job is finished, Count solutions
)

var kindNames = [...]string{KindRequest: "Request", KindTask: "Task", KindCheckpoint: "Checkpoint", KindDone: "Done"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Entry is the result of one task.
type Entry struct {
	Task  int
	Count uint64
}

// Msg is one message between nodes.
type Msg struct {
	Kind    Kind
	Task    int     // Task
	Count   uint64  // Done
	Entries []Entry // Request (at most one), Checkpoint
}

// Out is a message to send to rank To.
type Out struct {
	To  int
	Msg Msg
}

// ErrConfig reports an unusable configuration.
var ErrConfig = errors.New("master: invalid configuration")

// Config is what every node of a job must agree on.
type Config struct {
	N               int // board size
	TaskDepth       int // queens placed in a task's prefix
	Ranks           int
	CheckpointEvery int // results between checkpoints to the backup (≥ 1)
}

// Validate reports whether the configuration is usable.
func (c Config) Validate() error {
	if c.N < 1 || c.N > queens.MaxN {
		return fmt.Errorf("%w: N = %d", ErrConfig, c.N)
	}
	if c.TaskDepth < 1 || c.TaskDepth > c.N {
		return fmt.Errorf("%w: TaskDepth = %d, want 1 … N", ErrConfig, c.TaskDepth)
	}
	if c.Ranks < 1 {
		return fmt.Errorf("%w: Ranks = %d", ErrConfig, c.Ranks)
	}
	if c.CheckpointEvery < 1 {
		return fmt.Errorf("%w: CheckpointEvery = %d", ErrConfig, c.CheckpointEvery)
	}
	return nil
}

// Stats are counters of one node's activity.
type Stats struct {
	Computed     int // tasks this node counted
	Takeovers    int // times this node became master
	Reassigned   int // tasks put back because their worker died
	Duplicates   int // results received for tasks already done
	Checkpoints  int // checkpoint messages sent
	FromBackup   int // results this node started from when it took over
	StaleDropped int // messages from ranks known dead
}

// Node is one rank's state.
type Node struct {
	cfg   Config
	rank  int
	tasks []queens.Prefix
	dead  []bool

	// Worker side.
	current  int    // task being computed, -1 if none
	waiting  bool   // a Request is unanswered
	last     *Entry // result carried by the unanswered Request
	reported int    // master the unanswered Request went to

	// Backup side: results received in checkpoints (and in Requests that
	// arrived before this node knew it was master).
	store map[int]uint64

	// Master side (valid while isMaster).
	isMaster bool
	results  map[int]uint64
	pending  []int       // tasks not done and not assigned, ascending
	assigned map[int]int // worker → task
	idle     []int       // workers waiting for a task, in arrival order
	backup   int         // rank the checkpoints go to, -1 if none
	unsent   []Entry     // results not yet checkpointed

	done  bool
	total uint64
	stats Stats
}

// New returns the node of the given rank.
func New(cfg Config, rank int) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= cfg.Ranks {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrConfig, rank, cfg.Ranks)
	}
	tasks, err := queens.Prefixes(cfg.N, cfg.TaskDepth)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &Node{
		cfg:     cfg,
		rank:    rank,
		tasks:   tasks,
		dead:    make([]bool, cfg.Ranks),
		current: -1,
		store:   make(map[int]uint64),
		backup:  -1,
	}, nil
}

// Tasks returns the number of tasks of the job.
func (nd *Node) Tasks() int { return len(nd.tasks) }

// Result returns the number of solutions once the job is finished.
func (nd *Node) Result() (count uint64, done bool) { return nd.total, nd.done }

// Err is always nil: a master–worker job survives any failures that leave
// one rank alive. It is here for drivers shared with package steal.
func (nd *Node) Err() error { return nil }

// Stats returns the node's counters.
func (nd *Node) Stats() Stats { return nd.stats }

// IsMaster reports whether the node currently acts as master.
func (nd *Node) IsMaster() bool { return nd.isMaster }

// Results returns the number of task results an acting master holds.
func (nd *Node) Results() int { return len(nd.results) }

// Master returns the rank this node believes is the master.
func (nd *Node) Master() int { return nd.liveAfter(-1) }

// liveAfter returns the lowest rank > r this node believes alive, or -1.
func (nd *Node) liveAfter(r int) int {
	for x := r + 1; x < nd.cfg.Ranks; x++ {
		if !nd.dead[x] {
			return x
		}
	}
	return -1
}

// Start makes rank 0 the master and sends every worker's first request.
func (nd *Node) Start() []Out {
	outs := nd.promote(nil)
	if !nd.isMaster {
		outs = nd.request(outs)
	}
	return outs
}

// request sends the worker's Request (with its last result) to the master.
func (nd *Node) request(outs []Out) []Out {
	m := Msg{Kind: KindRequest}
	if nd.last != nil {
		m.Entries = []Entry{*nd.last}
	}
	nd.waiting = true
	nd.reported = nd.Master()
	return append(outs, Out{To: nd.reported, Msg: m})
}

// Work computes one task: the worker's current task, or a pending task on a
// master that has no live worker left.
func (nd *Node) Work() (outs []Out, busy bool) {
	if nd.done {
		return nil, false
	}
	if nd.isMaster {
		if nd.liveAfter(nd.rank) >= 0 || len(nd.pending) == 0 {
			return nil, false
		}
		t := nd.pending[0]
		nd.pending = nd.pending[1:]
		outs = nd.record(t, nd.count(t), outs)
		return nd.maybeFinish(outs), true
	}
	if nd.current < 0 {
		return nil, false
	}
	t := nd.current
	nd.current = -1
	nd.last = &Entry{Task: t, Count: nd.count(t)}
	return nd.request(outs), true
}

func (nd *Node) count(t int) uint64 {
	c, err := queens.CountPrefix(nd.cfg.N, nd.tasks[t])
	if err != nil {
		panic(fmt.Sprintf("master: task %d %v rejected: %v", t, nd.tasks[t], err))
	}
	nd.stats.Computed++
	return c
}

// Receive handles a message from rank from.
func (nd *Node) Receive(from int, m Msg) []Out {
	if m.Kind == KindDone && !nd.done && from >= 0 && from < nd.cfg.Ranks && from != nd.rank {
		// A master sends Done only with every task's result: final even
		// if that master has died since.
		nd.done, nd.total = true, m.Count
		return nil
	}
	if from < 0 || from >= nd.cfg.Ranks || from == nd.rank || nd.dead[from] {
		nd.stats.StaleDropped++
		return nil
	}
	if nd.done {
		return nil
	}
	var outs []Out
	switch m.Kind {
	case KindRequest:
		if len(m.Entries) > 1 {
			return nil
		}
		if !nd.isMaster {
			// Sent to us as the next master before we know we are: keep
			// the result and the worker until we take over.
			for _, e := range m.Entries {
				nd.keep(e)
			}
			if !slices.Contains(nd.idle, from) {
				nd.idle = append(nd.idle, from)
			}
			return nil
		}
		delete(nd.assigned, from) // its task is done or given up
		for _, e := range m.Entries {
			if e.Task >= 0 && e.Task < len(nd.tasks) {
				outs = nd.record(e.Task, e.Count, outs)
			}
		}
		if !slices.Contains(nd.idle, from) {
			nd.idle = append(nd.idle, from)
		}
		outs = nd.maybeFinish(outs)
		outs = nd.dispatch(outs)
	case KindTask:
		if nd.isMaster || m.Task < 0 || m.Task >= len(nd.tasks) {
			return nil
		}
		nd.waiting = false
		nd.last = nil
		nd.current = m.Task
	case KindCheckpoint:
		for _, e := range m.Entries {
			nd.keep(e)
		}
	}
	return outs
}

// keep stores a result in the backup store.
func (nd *Node) keep(e Entry) {
	if e.Task >= 0 && e.Task < len(nd.tasks) {
		nd.store[e.Task] = e.Count
	}
}

// record adds a result on the master and checkpoints when due.
func (nd *Node) record(t int, c uint64, outs []Out) []Out {
	if _, ok := nd.results[t]; ok {
		nd.stats.Duplicates++
		return outs
	}
	nd.results[t] = c
	if i, ok := slices.BinarySearch(nd.pending, t); ok {
		nd.pending = slices.Delete(nd.pending, i, i+1)
	}
	nd.unsent = append(nd.unsent, Entry{Task: t, Count: c})
	if len(nd.unsent) >= nd.cfg.CheckpointEvery && nd.backup >= 0 {
		outs = append(outs, Out{To: nd.backup, Msg: Msg{Kind: KindCheckpoint, Entries: nd.unsent}})
		nd.unsent = nil
		nd.stats.Checkpoints++
	}
	return outs
}

// dispatch hands pending tasks to idle workers.
func (nd *Node) dispatch(outs []Out) []Out {
	for len(nd.idle) > 0 && len(nd.pending) > 0 {
		w := nd.idle[0]
		nd.idle = nd.idle[1:]
		if nd.dead[w] {
			continue
		}
		t := nd.pending[0]
		nd.pending = nd.pending[1:]
		nd.assigned[w] = t
		outs = append(outs, Out{To: w, Msg: Msg{Kind: KindTask, Task: t}})
	}
	return outs
}

// maybeFinish ends the job when every task has a result.
func (nd *Node) maybeFinish(outs []Out) []Out {
	if !nd.isMaster || nd.done || len(nd.results) < len(nd.tasks) {
		return outs
	}
	var total uint64
	for _, c := range nd.results {
		total += c
	}
	nd.done, nd.total = true, total
	for r := range nd.cfg.Ranks {
		if r != nd.rank && !nd.dead[r] {
			outs = append(outs, Out{To: r, Msg: Msg{Kind: KindDone, Count: total}})
		}
	}
	return outs
}

// promote makes this node the master if it is the lowest live rank.
func (nd *Node) promote(outs []Out) []Out {
	if nd.isMaster || nd.Master() != nd.rank {
		return outs
	}
	nd.isMaster = true
	if nd.rank != 0 {
		nd.stats.Takeovers++
	}
	nd.results = make(map[int]uint64, len(nd.tasks))
	nd.assigned = make(map[int]int)
	for t, c := range nd.store {
		nd.results[t] = c
	}
	nd.stats.FromBackup = len(nd.store)
	if nd.last != nil { // our own unanswered result
		nd.results[nd.last.Task] = nd.last.Count
	}
	nd.current, nd.waiting, nd.last = -1, false, nil
	nd.pending = nd.pending[:0]
	for t := range nd.tasks {
		if _, ok := nd.results[t]; !ok {
			nd.pending = append(nd.pending, t)
		}
	}
	// Everything known goes to the backup at once.
	nd.unsent = nd.unsent[:0]
	for _, t := range slices.Sorted(mapsKeys(nd.results)) {
		nd.unsent = append(nd.unsent, Entry{Task: t, Count: nd.results[t]})
	}
	outs = nd.setBackup(outs)
	outs = nd.maybeFinish(outs)
	return nd.dispatch(outs)
}

// setBackup chooses the backup and, if it changed, sends it everything.
func (nd *Node) setBackup(outs []Out) []Out {
	b := nd.liveAfter(nd.rank)
	if b == nd.backup {
		return outs
	}
	nd.backup = b
	if b < 0 {
		return outs
	}
	all := make([]Entry, 0, len(nd.results))
	for _, t := range slices.Sorted(mapsKeys(nd.results)) {
		all = append(all, Entry{Task: t, Count: nd.results[t]})
	}
	nd.unsent = nil
	nd.stats.Checkpoints++
	return append(outs, Out{To: b, Msg: Msg{Kind: KindCheckpoint, Entries: all}})
}

func mapsKeys(m map[int]uint64) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Failed handles the notice that rank r died. Notices may repeat.
func (nd *Node) Failed(r int) []Out {
	if r < 0 || r >= nd.cfg.Ranks || r == nd.rank || nd.dead[r] {
		return nil
	}
	nd.dead[r] = true
	if nd.done {
		return nil
	}
	var outs []Out
	if nd.isMaster {
		if t, ok := nd.assigned[r]; ok {
			delete(nd.assigned, r)
			if _, done := nd.results[t]; !done {
				i, _ := slices.BinarySearch(nd.pending, t)
				nd.pending = slices.Insert(nd.pending, i, t)
				nd.stats.Reassigned++
			}
		}
		nd.idle = slices.DeleteFunc(nd.idle, func(w int) bool { return w == r })
		outs = nd.setBackup(outs)
		return nd.dispatch(outs)
	}
	outs = nd.promote(outs)
	if nd.isMaster {
		return outs
	}
	// The master we wrote to died before answering: ask the next one.
	if nd.waiting && nd.reported == r {
		outs = nd.request(outs)
	}
	return outs
}
