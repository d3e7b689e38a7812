package resil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// Errors of a resilient run.
var (
	// ErrNoSpare: a rank's process failed and no process was left to take
	// the rank; see [NoSpareError].
	ErrNoSpare = errors.New("resil: no spare process left")
	// ErrStateLost: a rank's checkpointed state was lost with its process
	// and every buddy that kept a copy; see [StateLostError].
	ErrStateLost = errors.New("resil: checkpointed state lost")
	// ErrAborted: the run stopped because another rank's function returned
	// an error (not because of a failure).
	ErrAborted = errors.New("resil: another rank's function failed")
	// ErrCheckpoint: a Checkpoint did not commit (a failure interrupted
	// it); the run goes back to the last committed one.
	ErrCheckpoint = errors.New("resil: the checkpoint did not commit")
	// ErrConfig: a Config is invalid.
	ErrConfig = errors.New("resil: bad config")
)

// NoSpareError names the ranks whose processes failed when no process was
// left to take them.
type NoSpareError struct{ Ranks []int }

// Error names the ranks and says what to do.
func (e *NoSpareError) Error() string {
	return fmt.Sprintf("resil: rank(s) %v failed and no spare process is left to take them (start the job with more spares: cohort run --spares)", e.Ranks)
}

// Is makes errors.Is(err, ErrNoSpare) true.
func (e *NoSpareError) Is(target error) bool { return target == ErrNoSpare }

// StateLostError names a rank whose state of the last committed epoch no
// survivor holds: the processes of Keepers (the rank and its buddies)
// were all lost.
type StateLostError struct {
	Rank, Epoch int
	Keepers     []int // ranks
}

// Error names the rank, the epoch and the keepers lost.
func (e *StateLostError) Error() string {
	return fmt.Sprintf("resil: the state of rank %d at checkpoint epoch %d is lost: the processes of ranks %v, which kept it, all failed (use more buddies)", e.Rank, e.Epoch, e.Keepers)
}

// Is makes errors.Is(err, ErrStateLost) true.
func (e *StateLostError) Is(target error) bool { return target == ErrStateLost }

// Config configures a [Job].
type Config struct {
	// Buddies is k, how many other ranks keep a copy of each rank's
	// checkpointed state, in memory: ranks on other hosts than the rank's
	// first, each on a host that holds no copy yet while there are such
	// hosts (on one host: ranks r+1 … r+k, mod N). The state survives the
	// loss of any k of those k+1 processes, and that of any one host when
	// the ranks span two hosts or more. 1 ≤ Buddies < N (a job of one
	// rank has none and keeps only its own copy).
	Buddies int
	// Dir, if not "", is a directory for a copy on disk of each rank's
	// state of every committed epoch (its last two), for a whole-job
	// restart: a job started again with the same Dir and number of ranks
	// resumes from the newest epoch every rank has there (disk.go). Each
	// rank's process must reach it (on several hosts, a shared file
	// system). It is created if missing.
	Dir string
	// Shrink, if set, makes the run continue on fewer ranks when a rank's
	// process fails and no process is left to take the rank, instead of
	// failing with a [*NoSpareError]: the failed ranks are dropped, the
	// others numbered again in their order, and the function starts again
	// on the smaller communicator from the last checkpoint, the dropped
	// ranks' states (from their buddies) given to the ranks next to them
	// ([Job.Restored]) for the program to spread its data over the ranks
	// left. A run that shrank stays so. A whole-job restart from Dir
	// needs the job's first number of ranks: after a shrink, the disk is
	// not read.
	Shrink bool
}

// DefaultConfig is one buddy per rank.
func DefaultConfig() Config { return Config{Buddies: 1} }

// Func is the resilient function: the program's main loop. c is the
// communicator of this attempt (rank c.Rank() of c.Size(), the same rank
// numbers in every attempt unless the run shrank, see Config.Shrink),
// state and epoch this rank's state of the last committed checkpoint (nil
// and 0 on the first attempt, or if none was committed). After a shrink,
// state is the one this rank's process took under its former number, and
// [Job.Restored] has every state that falls to this rank. ctx ends when
// a rank of c fails: the function should then return (any call on c also
// fails). It returns nil when its part of the work is done.
type Func func(ctx context.Context, c *comm.Comm, state []byte, epoch int) error

// Job runs a resilient function over a session (see the package
// documentation). Build it with [New]; its methods are for the goroutine
// that called Run, and Checkpoint for the function it runs.
type Job struct {
	s       *comm.Session
	buddies int // Config.Buddies
	k       int // buddies, bounded by the job's ranks
	n, n0   int // ranks now and at the start (fewer after a shrink)
	shrink  bool
	procs   *comm.Comm // the live processes, agreed at the last recovery
	// mapping is the rank→process map (process numbers of
	// Session.Processes), the same at every survivor.
	mapping []int
	c, cc   *comm.Comm // this attempt's communicator and its checkpoint twin (nil at an idle process)
	// keep and keptBy are the keepers of each rank's state under the
	// map, and the ranks each rank keeps copies of (keeperTable).
	keep, keptBy [][]int
	dir          string // Config.Dir
	st           store
	// space says which rank restores each slot of st's committed epoch.
	space space
	watch *watcher
	stats Stats
	// duringRecovery, if set (tests), is called in each recovery round
	// between the plan and the transfers.
	duringRecovery func()
	// attemptAgreed, if set (tests), is called once the agreement that
	// ends an attempt decided, before the Shrink that follows it.
	attemptAgreed func()
}

// Stats counts what a run did at this process.
type Stats struct {
	// Restarts is how many times the function was restarted after a
	// failure; Recoveries lists how long each restart took here, from the
	// agreement that the attempt ended to the start of the next: the
	// agreement on the failed processes, the new map and the state
	// transfers. The failure's detection comes before and is not
	// included.
	Restarts   int
	Recoveries []time.Duration
	// Takeovers is each restart's time line here (see [Takeover]).
	Takeovers []Takeover
	// Checkpoints counts the committed checkpoints; CheckpointBytes the
	// bytes this process sent to its buddies for them.
	Checkpoints     int
	CheckpointBytes int64
	// TookOver reports whether this process started as a spare and holds
	// a rank now.
	TookOver bool
	// Shrunk reports whether the run continued on fewer ranks
	// (Config.Shrink).
	Shrunk bool
	// Resumed is the epoch the run resumed from on disk (Config.Dir), 0
	// if it started afresh.
	Resumed int
}

// Takeover is the time line of one restart at a process, for measuring
// what a takeover costs: detection and view change end at Heard, the
// attempt's end at Ended, the recovery (the survivors' agreement, the new
// map, the inventories and the state transfers) at Restarted.
type Takeover struct {
	// Heard is when this process first heard (Session.Failures) of the
	// failure of a process that held a rank in the attempt: after the
	// failure detector's verdict and the view change. Zero if it heard of
	// none: the attempt may end for a process through a call that failed
	// before the report came, the report lagging the agreement.
	Heard time.Time
	// Ended is when the agreement that the attempt ended returned here.
	Ended time.Time
	// Restarted is when the recovery ended here and the function could
	// start again.
	Restarted time.Time
}

// New prepares a resilient run over s (a session of [comm.Init] with
// [comm.AllowSpares], or of [comm.LocalSpares]; or a newcomer's, see
// [comm.JoinLocal]: its run learns the job's shape when the survivors add
// it, newcomer.go).
func New(s *comm.Session, cfg Config) (*Job, error) {
	procs := s.Processes()
	n := 0
	if procs != nil {
		n = procs.Size() - s.Spares()
	}
	if err := checkBuddies(cfg.Buddies, n); err != nil {
		return nil, err
	}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("%w: Dir: %w", ErrConfig, err)
		}
	}
	j := &Job{s: s, buddies: cfg.Buddies, k: min(cfg.Buddies, n-1), n: n, n0: n, shrink: cfg.Shrink, procs: procs, mapping: identity(n), dir: cfg.Dir, space: identitySpace(n)}
	j.st.reset()
	return j, nil
}

// checkBuddies checks Config.Buddies for a job of n ranks (0: not known
// yet, at a newcomer).
func checkBuddies(k, n int) error {
	if k < 1 || (k >= n && n > 1) {
		return fmt.Errorf("%w: %d buddies for %d ranks (want 1 to %d)", ErrConfig, k, n, max(n-1, 1))
	}
	return nil
}

// Rank returns the rank this process holds (-1: none, an idle spare).
func (j *Job) Rank() int {
	if j.procs == nil {
		return -1 // a newcomer not added yet
	}
	me := j.procs.WorldRank(j.procs.Rank())
	return slices.Index(j.mapping, me)
}

// space is how the slots of a committed epoch (the ranks that took it)
// fall to the ranks of the run: rank holder[x] restores slot x's state,
// and own[r] is the slot of rank r's own state, the one its process took.
// It is the identity but after a shrink (Config.Shrink), until the next
// commit.
type space struct{ holder, own []int }

func identitySpace(n int) space { return space{holder: identity(n), own: identity(n)} }

// Restored is what a rank resumes from: the states of the last committed
// checkpoint that fall to it.
type Restored struct {
	// Epoch is the checkpoint's epoch (0: none, the run starts afresh) and
	// Ranks how many ranks took it: the communicator's size, unless the
	// run continued on fewer ranks since (Config.Shrink).
	Epoch, Ranks int
	// States are the states this rank restores, by the rank that took each
	// one (of Ranks): its own (Func's state), and after a shrink those of
	// the dropped ranks next to it. Every state of the epoch falls to
	// exactly one rank. The caller must not modify them.
	States map[int][]byte
}

// Restored returns what this rank resumes from in the running attempt
// (for the function of Run; empty at an idle process). A program that
// sets Config.Shrink calls it when Ranks differs from its
// communicator's size, to spread the dropped ranks' data over the ranks
// left.
func (j *Job) Restored() Restored {
	out := Restored{Epoch: j.st.epoch, Ranks: j.st.width, States: map[int][]byte{}}
	r := j.Rank()
	if r < 0 || j.st.epoch == 0 {
		out.Ranks = j.n
		return out
	}
	for x, h := range j.space.holder {
		if h == r {
			out.States[x] = j.st.states[x]
		}
	}
	return out
}

// Stats returns what the run did so far at this process.
func (j *Job) Stats() Stats {
	st := j.stats
	st.Recoveries = slices.Clone(st.Recoveries)
	st.Takeovers = slices.Clone(st.Takeovers)
	return st
}

// Run runs fn at every rank until every rank's fn returned nil in the
// same attempt, and returns nil (at a spare that never took a rank too).
// When a process holding a rank fails, every survivor's fn is ended (its
// ctx ends and calls on its communicator fail), a spare takes the failed
// rank, the last committed checkpoint is restored at every rank (the
// spare's from a buddy) and fn starts again, at every rank, on a new
// communicator. Run returns an error that every survivor shares when no
// spare is left ([*NoSpareError]), when a rank's state is lost
// ([*StateLostError]), or when fn failed without a failure (fn's error at
// that rank, [ErrAborted] at the others); and ctx's error or the
// session's when they end. Run reads the session's Failures channel
// (comm.Session.Failures) while it runs: the program must not.
func (j *Job) Run(ctx context.Context, fn Func) error {
	j.watch = newWatcher()
	stop := make(chan struct{})
	defer close(stop)
	go j.watch.loop(j.s.Failures(), stop)
	if j.procs == nil {
		if done, err := j.awaitWelcome(ctx); done || err != nil {
			return err
		}
	} else if err := j.begin(); err != nil {
		return err
	}
	for {
		var fnErr error
		if j.c != nil {
			actx, cancel := j.watch.arm(ctx, j.mapping)
			// Until an epoch is committed in memory (agreed, so every rank
			// decides alike), the disk may hold one: also after a failure
			// that struck before the first commit.
			if j.dir != "" && j.st.epoch == 0 && j.n == j.n0 {
				fnErr = j.resumeFromDisk(actx)
			}
			if fnErr == nil {
				fnErr = fn(actx, j.c, j.st.states[j.space.own[j.c.Rank()]], j.st.epoch)
			}
			cancel()
			if fnErr != nil {
				// The other ranks may wait for this one in a call on c that
				// no failure will end (its error is the program's): the
				// revocation ends it, so that they reach the agreement too.
				j.c.Revoke()
				j.cc.Revoke()
			}
		}
		// Bit 0: this rank's function returned nil; the others: the
		// newcomers seen admitted here (newcomer.go), so that the AND
		// lists those every survivor knows.
		flag := j.newcomerBits() << 1
		if fnErr == nil {
			flag |= 1
		}
		v, err := j.procs.Agree(ctx, flag)
		if err != nil {
			return fmt.Errorf("resil: agreeing on the attempt's end: %w", err)
		}
		if j.attemptAgreed != nil {
			j.attemptAgreed()
		}
		ended := time.Now()
		next, err := j.procs.Shrink(ctx)
		if err != nil {
			return fmt.Errorf("resil: agreeing on the survivors: %w", err)
		}
		lostHolder := false
		for _, p := range j.mapping {
			lostHolder = lostHolder || !inComm(next, p)
		}
		outcome, result := outcomeRecover, error(nil)
		switch {
		case v&1 == 1 && !lostHolder:
			outcome = outcomeDone
		case !lostHolder && fnErr != nil && !errors.Is(fnErr, comm.ErrRevoked):
			outcome, result = outcomeAborted, fnErr
		case !lostHolder:
			outcome, result = outcomeAborted, ErrAborted
		}
		if next, err = j.admit(next, v>>1, outcome); err != nil {
			return err
		}
		if outcome != outcomeRecover {
			return result
		}
		if j.c != nil {
			j.c.Revoke()
			j.cc.Revoke()
		}
		var lost []int
		for _, p := range j.mapping {
			if !inComm(next, p) {
				lost = append(lost, p)
			}
		}
		j.procs = next
		if err := j.recover(ctx); err != nil {
			return err
		}
		restarted := time.Now()
		j.stats.Restarts++
		j.stats.Recoveries = append(j.stats.Recoveries, restarted.Sub(ended))
		j.stats.Takeovers = append(j.stats.Takeovers, Takeover{Heard: j.watch.heard(lost), Ended: ended, Restarted: restarted})
	}
}

// begin builds the attempt's communicators from the map: every process
// of procs calls it at the same point.
func (j *Job) begin() error {
	ranks := make([]int, len(j.mapping))
	for r, p := range j.mapping {
		ranks[r] = procsRank(j.procs, p)
		if ranks[r] < 0 {
			panic(fmt.Sprintf("resil: rank %d mapped to process %d, not a survivor", r, p))
		}
	}
	// Both from procs, which is never revoked: a fast survivor may already
	// have revoked the new attempt's communicators (its function failed at
	// once) when a slow one creates them, and a Dup of a revoked one would
	// fail here instead of in the function, where a failure belongs.
	c, err := j.procs.Create(ranks)
	if err != nil {
		return fmt.Errorf("resil: the attempt's communicator: %w", err)
	}
	cc, err := j.procs.Create(ranks)
	if err != nil {
		return fmt.Errorf("resil: the attempt's communicator: %w", err)
	}
	j.keep, j.keptBy = keeperTable(j.k, j.rankHosts(j.mapping))
	j.c, j.cc = c, cc
	return nil
}

// rankHosts returns the host of each rank's process under mapping.
func (j *Job) rankHosts(mapping []int) []string {
	out := make([]string, len(mapping))
	for r, p := range mapping {
		out[r] = j.s.HostOf(p)
	}
	return out
}

// inComm reports whether process p is a member of c.
func inComm(c *comm.Comm, p int) bool { return procsRank(c, p) >= 0 }

// procsRank returns the rank of process p in c, -1 if none.
func procsRank(c *comm.Comm, p int) int {
	for r := range c.Size() {
		if c.WorldRank(r) == p {
			return r
		}
	}
	return -1
}

// watcher follows the session's failures and ends the running attempt's
// context when a process holding a rank fails.
type watcher struct {
	mu      sync.Mutex
	failed  map[int]time.Time // when each failed process was reported
	holders map[int]bool
	cancel  context.CancelFunc
}

func newWatcher() *watcher { return &watcher{failed: map[int]time.Time{}} }

// heard returns when the first of procs was reported failed (zero if none
// was).
func (w *watcher) heard(procs []int) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for _, p := range procs {
		if t, ok := w.failed[p]; ok && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

func (w *watcher) loop(failures <-chan comm.Failure, stop <-chan struct{}) {
	for {
		select {
		case f := <-failures:
			w.mu.Lock()
			if _, ok := w.failed[f.Rank]; !ok {
				w.failed[f.Rank] = time.Now()
			}
			if w.holders[f.Rank] && w.cancel != nil {
				w.cancel()
			}
			w.mu.Unlock()
		case <-stop:
			return
		}
	}
}

// arm returns the context of an attempt over mapping: it ends with ctx,
// when a process of mapping fails, or (at once) if one already has.
func (w *watcher) arm(ctx context.Context, mapping []int) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holders = map[int]bool{}
	w.cancel = cancel
	for _, p := range mapping {
		w.holders[p] = true
		if _, ok := w.failed[p]; ok {
			cancel()
		}
	}
	return actx, func() {
		w.mu.Lock()
		w.cancel = nil
		w.mu.Unlock()
		cancel()
	}
}
