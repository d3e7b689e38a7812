// Package job runs fault-tolerant N-Queens over package comm: one call of
// [Run] per rank, driving the state machine of package steal (random work
// stealing, Phoenix §5.2.2) or package master (master–worker with a
// checkpointed master, §5.2.1) with the messages, failure notices and local
// work of a real job.
//
// Each rank runs a receiver goroutine (Probe and Recv from any source and
// tag, acknowledging failures so that wildcard receives keep working) and a
// main loop that hands the machine, in this order, every message received,
// every [comm.Failure] of the session, and otherwise one unit of local work.
// An idle rank waits for the next message; a rank refused work (steal mode)
// waits a little longer each time before asking again, up to 8 ms.
//
// The rank that finishes the job (the root holder in steal mode, the master
// in master mode) gets an [Outcome] with Reporter set; the other ranks learn
// the count from its Done message and answer it with Bye (tag TagBye); the
// finishing rank returns once every other rank has said Bye or is known
// failed (at most 10 s), so that it never leaves while its Done messages
// are still queued. It reports the result (Config.Report) before its Done
// messages leave: the others leave once told, so a reporter that died
// while waiting for their Byes would otherwise take the result with it.
package job

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/examples/nqueens/internal/master"
	"github.com/cohort-mp/cohort/examples/nqueens/internal/queens"
	"github.com/cohort-mp/cohort/examples/nqueens/internal/steal"
)

// Mode selects the fault-tolerance model.
type Mode string

// Modes.
const (
	ModeSteal  Mode = "steal"  // random work stealing, Phoenix §5.2.2
	ModeMaster Mode = "master" // master–worker with a checkpointed master, §5.2.1
)

// Tags of the N-Queens messages: the machines' messages, and the empty
// message a rank sends to the sender of Done before it leaves.
const (
	Tag    = 41
	TagBye = 42
)

// lingerMax bounds how long the finishing rank waits for the others' Bye.
const lingerMax = 10 * time.Second

// ErrConfig reports a bad configuration.
var ErrConfig = errors.New("nqueens: invalid configuration")

// Config is the same on every rank.
type Config struct {
	N    int
	Mode Mode
	// LeafDepth (steal mode): prefixes of this many queens are counted in
	// one step; 0 chooses steal.DefaultLeafDepth(N).
	LeafDepth int
	// TaskDepth (master mode): queens placed in a task; 0 chooses 2 for
	// N ≤ 12 and 3 above.
	TaskDepth int
	// CheckpointEvery: master mode, results between checkpoints of the
	// master (0: 8); steal mode, steps of the root holder between snapshots
	// of the root (0: 32).
	CheckpointEvery int
	// Seed seeds the victims' choice (steal mode); rank r uses Seed+r.
	Seed uint64
	// Log, if set, receives one line per event worth watching: failures
	// learned, work taken back, a master taking over.
	Log io.Writer
	// Report, if set, is called once with the outcome by the rank that
	// finished the job, before the messages that tell the others the job
	// is over leave it: the result is out even if the reporter dies while
	// it waits for their answers (the others leave once told).
	Report func(Outcome)
	// crash (tests) is asked after every step whether this rank should stop
	// dead now; Run then returns errCrashed.
	crash func(rank int, p progress) bool
}

// progress is what a crash hook sees of a rank.
type progress struct {
	held     bool // steal: units on the stack; master: a task in hand
	received int  // steal: grants received; master: tasks computed
	given    int  // steal: units given to thieves
	leaves   int  // steal: units counted
	master   bool // master mode: acting master
	results  int  // master mode: results held by the acting master
}

var errCrashed = errors.New("nqueens: crashed by the test hook")

// Outcome is what one rank knows at the end.
type Outcome struct {
	Count    uint64        // the number of solutions found
	Reporter bool          // this rank finished the job (it should print it)
	Known    uint64        // the published count, if HasKnown
	HasKnown bool          // n is in the table of published counts
	Elapsed  time.Duration // from the start of Run
	Summary  string        // this rank's counters
}

// Correct reports whether the count is the published one.
func (o Outcome) Correct() bool { return o.HasKnown && o.Count == o.Known }

type outMsg struct {
	to   int
	data []byte
}

type inMsg struct {
	from int
	tag  int
	data []byte
}

// machine is the part of steal.Node and master.Node the driver uses, with
// messages as bytes.
type machine interface {
	start() []outMsg
	work() ([]outMsg, bool)
	receive(from int, data []byte) ([]outMsg, error)
	failed(r int) []outMsg
	result() (uint64, bool)
	err() error
	reporter() bool
	idle() bool
	refused(data []byte) bool // the message says "no work for you"
	summary() string
	progress() progress
	// news describes what the machine did about failures since the last
	// call (units taken back, grants dropped, takeovers).
	news() []string
}

// Run runs this rank's part of the job on s.World() and returns when the
// job is finished (or cannot finish, or ctx ends). On replicated ranks
// (cohort run -r) it runs the decided loop (runDecided).
func Run(ctx context.Context, s *comm.Session, cfg Config) (Outcome, error) {
	c := s.World()
	m, err := newMachine(cfg, c.Rank(), c.Size())
	if err != nil {
		return Outcome{}, err
	}
	d := &driver{cfg: cfg, s: s, c: c, m: m, begin: time.Now(), lastFrom: -1, byes: make([]bool, c.Size())}
	if err := d.send(ctx, m.start()); err != nil {
		return Outcome{}, err
	}
	if s.Replicas() > 1 {
		return d.runDecided(ctx)
	}
	return d.run(ctx)
}

// driver feeds a rank's machine.
type driver struct {
	cfg Config
	s   *comm.Session
	c   *comm.Comm
	m   interface {
		machine
		outcome(Config, uint64, time.Time) Outcome
	}
	begin    time.Time
	reported bool
	refusals int
	pause    time.Duration // how long to wait before asking again after a refusal
	lastFrom int           // the sender of the last machine message
	byes     []bool
}

func (d *driver) logf(format string, args ...any) {
	if d.cfg.Log != nil {
		fmt.Fprintf(d.cfg.Log, "rank %d: "+format+"\n", append([]any{d.c.Rank()}, args...)...)
	}
}

// report hands the outcome to Config.Report once, if this rank finished
// the job.
func (d *driver) report() {
	if count, done := d.m.result(); done && !d.reported && d.cfg.Report != nil {
		if out := d.m.outcome(d.cfg, count, d.begin); out.Reporter {
			d.reported = true
			d.cfg.Report(out)
		}
	}
}

func (d *driver) send(ctx context.Context, outs []outMsg) error {
	d.report()
	for _, o := range outs {
		err := d.c.Send(ctx, o.data, o.to, Tag)
		// A rank that failed or finished needs nothing more: the
		// failure's own news recovers its work, and a finished rank's
		// counts are in.
		if err != nil && !errors.Is(err, comm.ErrProcFailed) && !errors.Is(err, comm.ErrProcLeft) {
			return fmt.Errorf("send to rank %d: %w", o.to, err)
		}
	}
	return nil
}

func (d *driver) handle(ctx context.Context, in inMsg) error {
	if in.tag == TagBye {
		d.byes[in.from] = true
		return nil
	}
	d.lastFrom = in.from
	outs, err := d.m.receive(in.from, in.data)
	if err != nil {
		d.logf("dropped a malformed message from rank %d: %v", in.from, err)
		return nil
	}
	if d.m.refused(in.data) {
		d.refusals++
		d.pause = time.Duration(min(1<<d.refusals, 16)) * time.Millisecond / 2
	} else {
		d.refusals, d.pause = 0, 0
	}
	return d.send(ctx, outs)
}

func (d *driver) fail(ctx context.Context, f comm.Failure) error {
	d.logf("learned that rank %d failed (view %d)", f.Rank, f.Epoch)
	err := d.send(ctx, d.m.failed(f.Rank))
	for _, n := range d.m.news() {
		d.logf("%s", n)
	}
	return err
}

// step does what comes before each step of both loops: the test's crash
// hook, the end of the job, the machine's error. done reports that the
// loop is over, with out and err.
func (d *driver) step(ctx context.Context, linger func()) (out Outcome, done bool, err error) {
	if d.cfg.crash != nil && d.cfg.crash(d.c.Rank(), d.m.progress()) {
		return Outcome{}, true, errCrashed
	}
	if count, finished := d.m.result(); finished {
		out := d.m.outcome(d.cfg, count, d.begin)
		d.report()
		if !out.Reporter {
			// Tell the rank that sent Done that we have it, so that it
			// does not leave while its Done messages are in flight.
			if d.lastFrom >= 0 {
				_ = d.c.Send(ctx, nil, d.lastFrom, TagBye)
			}
			return out, true, nil
		}
		linger()
		return out, true, nil
	}
	if err := d.m.err(); err != nil {
		return Outcome{}, true, err
	}
	return Outcome{}, false, nil
}

// run is the loop of an unreplicated rank: a receiver goroutine feeds it
// messages, the session its failures, and it selects among them.
func (d *driver) run(ctx context.Context) (Outcome, error) {
	m := d.m
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan inMsg, 256)
	// The receiver ends when the session does (the rank excluded from the
	// job, say): it then closes msgs, and the loop ends with its error
	// rather than wait for messages that cannot come.
	var recvErr error
	go receive(rctx, d.c, msgs, &recvErr)
	ended := func() error {
		if recvErr == nil {
			recvErr = ctx.Err()
		}
		if recvErr == nil {
			recvErr = errors.New("the receiver ended")
		}
		return recvErr
	}
	var pauseUntil time.Time
	handle := func(in inMsg) error {
		err := d.handle(ctx, in)
		if d.pause > 0 {
			pauseUntil = time.Now().Add(d.pause)
		}
		return err
	}
	failures := d.s.Failures()
	for {
		if out, done, err := d.step(ctx, func() { linger(ctx, d.c, msgs, failures, d.byes) }); done {
			return out, err
		}
		// Messages and failure news first.
		select {
		case in, ok := <-msgs:
			if !ok {
				return Outcome{}, ended()
			}
			if err := handle(in); err != nil {
				return Outcome{}, err
			}
			continue
		case f := <-failures:
			if err := d.fail(ctx, f); err != nil {
				return Outcome{}, err
			}
			continue
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		default:
		}
		if m.idle() && time.Now().Before(pauseUntil) {
			// Refused lately: wait before asking again.
			timer := time.NewTimer(time.Until(pauseUntil))
			select {
			case in, ok := <-msgs:
				if !ok {
					return Outcome{}, ended()
				}
				timer.Stop()
				if err := handle(in); err != nil {
					return Outcome{}, err
				}
			case f := <-failures:
				timer.Stop()
				if err := d.fail(ctx, f); err != nil {
					return Outcome{}, err
				}
			case <-timer.C:
				pauseUntil = time.Time{}
			case <-ctx.Done():
				timer.Stop()
				return Outcome{}, ctx.Err()
			}
			continue
		}
		outs, busy := m.work()
		if err := d.send(ctx, outs); err != nil {
			return Outcome{}, err
		}
		if busy {
			continue
		}
		// Nothing to compute: wait for news.
		select {
		case in, ok := <-msgs:
			if !ok {
				return Outcome{}, ended()
			}
			if err := handle(in); err != nil {
				return Outcome{}, err
			}
		case f := <-failures:
			if err := d.fail(ctx, f); err != nil {
				return Outcome{}, err
			}
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		}
	}
}

// Replicated ranks: every replica of a rank must feed its machine the same
// inputs in the same order, whatever the timing it sees. The decided loop
// has no receiver goroutine and no select: it looks for news with
// operations whose outcome the rank's master replica decides — a
// Session.Decide naming the next failure to handle, then an Iprobe from
// any source — every newsEvery steps of work and whenever it waits, and
// it waits by sleeping (the time slept changes no outcome: the next
// decided probe does). Failures reach every replica at different times;
// a replica handles one when the master's decision names it.
const (
	newsEvery = 4                      // steps of work between looks for news
	pollWait  = 200 * time.Microsecond // sleep between looks for news while waiting
)

func (d *driver) runDecided(ctx context.Context) (Outcome, error) {
	news := &decidedNews{handled: map[int]bool{}}
	waiting, sinceNews := false, 0
	for {
		out, done, err := d.step(ctx, func() { d.lingerDecided(ctx, news) })
		if done {
			return out, err
		}
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		if waiting || sinceNews >= newsEvery {
			sinceNews = 0
			got, err := d.news(ctx, news)
			if err != nil {
				return Outcome{}, err
			}
			if got {
				waiting = false
				continue
			}
			if waiting {
				time.Sleep(pollWait)
				continue
			}
		}
		if d.m.idle() && d.pause > 0 {
			// Refused lately: wait before asking again.
			time.Sleep(d.pause)
			d.pause, sinceNews = 0, newsEvery
			continue
		}
		outs, busy := d.m.work()
		if err := d.send(ctx, outs); err != nil {
			return Outcome{}, err
		}
		sinceNews++
		waiting = !busy
	}
}

// decidedNews is what a replica knows of failures: those its session
// reported and the loop has not handled, and those handled.
type decidedNews struct {
	pending []comm.Failure
	handled map[int]bool
}

// news handles the next failure or message, as the master replica decides,
// and reports whether there was one.
func (d *driver) news(ctx context.Context, n *decidedNews) (bool, error) {
	// Failures this replica learned, in order.
	for {
		select {
		case f := <-d.s.Failures():
			if !n.handled[f.Rank] {
				n.pending = append(n.pending, f)
			}
			continue
		default:
		}
		break
	}
	prop := comm.Failure{Rank: -1}
	if len(n.pending) > 0 {
		prop = n.pending[0]
	}
	v, err := d.s.Decide(ctx, binary.AppendVarint(binary.AppendUvarint(nil, prop.Epoch), int64(prop.Rank)))
	if err != nil {
		return false, err
	}
	epoch, k := binary.Uvarint(v)
	rank, k2 := binary.Varint(v[max(k, 0):])
	if k <= 0 || k2 <= 0 {
		return false, errors.New("a malformed failure decision")
	}
	if rank >= 0 && int(rank) < d.c.Size() && !n.handled[int(rank)] {
		n.handled[int(rank)] = true
		n.pending = slices.DeleteFunc(n.pending, func(f comm.Failure) bool { return f.Rank == int(rank) })
		return true, d.fail(ctx, comm.Failure{Rank: int(rank), Epoch: epoch})
	}
	in, ok, err := d.probe(ctx)
	if !ok || err != nil {
		return false, err
	}
	return true, d.handle(ctx, in)
}

// probe receives the next message if the master replica's Iprobe found
// one.
func (d *driver) probe(ctx context.Context) (inMsg, bool, error) {
	st, ok, err := d.c.Iprobe(comm.AnySource, comm.AnyTag)
	if errors.Is(err, comm.ErrProcFailed) {
		// An AnySource probe fails while a failure is not acknowledged;
		// the failure itself comes through the decided failure news.
		d.c.AckFailed()
		return inMsg{}, false, nil
	}
	if err != nil || !ok {
		return inMsg{}, false, err
	}
	buf := make([]byte, st.Count)
	if _, err := d.c.Recv(ctx, buf, st.Source, st.Tag); err != nil {
		if errors.Is(err, comm.ErrProcFailed) {
			return inMsg{}, false, nil
		}
		return inMsg{}, false, err
	}
	return inMsg{from: st.Source, tag: st.Tag, data: buf}, true, nil
}

// lingerDecided is linger for replicated ranks: decided probes until every
// other rank has said Bye or is known failed, or lingerMax has passed.
func (d *driver) lingerDecided(ctx context.Context, n *decidedNews) {
	gone := d.byes
	gone[d.c.Rank()] = true
	for _, r := range d.c.Failed() {
		gone[r] = true
	}
	deadline := time.Now().Add(lingerMax)
	for slices.Contains(gone, false) && time.Now().Before(deadline) && ctx.Err() == nil {
		for {
			select {
			case f := <-d.s.Failures():
				if f.Rank >= 0 && f.Rank < len(gone) {
					gone[f.Rank] = true
				}
				continue
			default:
			}
			break
		}
		in, ok, err := d.probe(ctx)
		switch {
		case err != nil:
			return
		case ok && in.tag == TagBye:
			gone[in.from] = true
		case !ok:
			time.Sleep(pollWait)
		}
	}
}

// linger waits until every other rank has said Bye or is known failed, or
// lingerMax has passed.
func linger(ctx context.Context, c *comm.Comm, msgs <-chan inMsg, failures <-chan comm.Failure, byes []bool) {
	gone := byes
	gone[c.Rank()] = true
	for _, r := range c.Failed() {
		gone[r] = true
	}
	timer := time.NewTimer(lingerMax)
	defer timer.Stop()
	for slices.Contains(gone, false) {
		select {
		case in, ok := <-msgs:
			if !ok {
				return // the session ended
			}
			if in.tag == TagBye {
				gone[in.from] = true
			}
		case f := <-failures:
			if f.Rank >= 0 && f.Rank < len(gone) {
				gone[f.Rank] = true
			}
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// receive pulls every message into msgs until ctx ends or the session
// does; then it closes msgs, having set *errp to the session's error (nil
// if ctx ended first).
func receive(ctx context.Context, c *comm.Comm, msgs chan<- inMsg, errp *error) {
	defer close(msgs)
	for {
		st, err := c.Probe(ctx, comm.AnySource, comm.AnyTag)
		if err != nil {
			if errors.Is(err, comm.ErrProcFailed) {
				c.AckFailed()
				continue
			}
			if ctx.Err() == nil {
				*errp = err
			}
			return
		}
		buf := make([]byte, st.Count)
		if _, err := c.Recv(ctx, buf, st.Source, st.Tag); err != nil {
			if errors.Is(err, comm.ErrProcFailed) {
				continue
			}
			if ctx.Err() == nil {
				*errp = err
			}
			return
		}
		select {
		case msgs <- inMsg{from: st.Source, tag: st.Tag, data: buf}:
		case <-ctx.Done():
			return
		}
	}
}

func newMachine(cfg Config, rank, size int) (interface {
	machine
	outcome(Config, uint64, time.Time) Outcome
}, error) {
	if cfg.N < 1 || cfg.N > queens.MaxN {
		return nil, fmt.Errorf("%w: n = %d, want 1 … %d", ErrConfig, cfg.N, queens.MaxN)
	}
	switch cfg.Mode {
	case ModeSteal, "":
		leaf := cfg.LeafDepth
		if leaf == 0 {
			leaf = steal.DefaultLeafDepth(cfg.N)
		}
		every := cfg.CheckpointEvery
		if every == 0 {
			every = 32
		}
		nd, err := steal.New(steal.Config{N: cfg.N, LeafDepth: leaf, Ranks: size, CheckpointEvery: every}, rank, rand.New(rand.NewPCG(cfg.Seed+uint64(rank), 0x9e3779b9)))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return &stealMachine{nd: nd, rank: rank}, nil
	case ModeMaster:
		depth := cfg.TaskDepth
		if depth == 0 {
			depth = 2
			if cfg.N > 12 {
				depth = 3
			}
		}
		depth = min(depth, cfg.N)
		every := cfg.CheckpointEvery
		if every == 0 {
			every = 8
		}
		nd, err := master.New(master.Config{N: cfg.N, TaskDepth: depth, Ranks: size, CheckpointEvery: every}, rank)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return &masterMachine{nd: nd}, nil
	}
	return nil, fmt.Errorf("%w: mode %q (want steal or master)", ErrConfig, cfg.Mode)
}

func outcome(cfg Config, count uint64, begin time.Time, reporter bool, summary string) Outcome {
	known, ok := queens.KnownCount(cfg.N)
	return Outcome{Count: count, Reporter: reporter, Known: known, HasKnown: ok, Elapsed: time.Since(begin), Summary: summary}
}

type stealMachine struct {
	nd   *steal.Node
	rank int
	seen steal.Stats
}

func (s *stealMachine) news() []string {
	st, old := s.nd.Stats(), s.seen
	s.seen = st
	var out []string
	if d := st.Requeued - old.Requeued; d > 0 {
		out = append(out, fmt.Sprintf("took back %d unit(s) a dead thief held", d))
	}
	if d := st.Abandoned - old.Abandoned; d > 0 {
		out = append(out, fmt.Sprintf("dropped %d grant(s) of a dead giver (its giver redoes them)", d))
	}
	if st.Takeovers > old.Takeovers {
		if st.FromCkpt > 0 {
			out = append(out, fmt.Sprintf("took over the root of the search from a snapshot of %d unit(s)", st.FromCkpt))
		} else {
			out = append(out, "took over the root of the search with no snapshot: starting over")
		}
	}
	return out
}

func encodeSteal(outs []steal.Out) []outMsg {
	res := make([]outMsg, len(outs))
	for i, o := range outs {
		res[i] = outMsg{to: o.To, data: o.Msg.AppendBinary(nil)}
	}
	return res
}

func (s *stealMachine) start() []outMsg { return encodeSteal(s.nd.Start()) }
func (s *stealMachine) work() ([]outMsg, bool) {
	outs, busy := s.nd.Work()
	return encodeSteal(outs), busy
}
func (s *stealMachine) receive(from int, data []byte) ([]outMsg, error) {
	m, err := steal.DecodeMsg(data)
	if err != nil {
		return nil, err
	}
	return encodeSteal(s.nd.Receive(from, m)), nil
}
func (s *stealMachine) failed(r int) []outMsg  { return encodeSteal(s.nd.Failed(r)) }
func (s *stealMachine) result() (uint64, bool) { return s.nd.Result() }
func (s *stealMachine) err() error             { return s.nd.Err() }
func (s *stealMachine) reporter() bool         { return s.nd.FinishedRoot() }
func (s *stealMachine) idle() bool             { return s.nd.Idle() }
func (s *stealMachine) refused(data []byte) bool {
	return len(data) > 0 && steal.Kind(data[0]) == steal.KindNoWork
}
func (s *stealMachine) progress() progress {
	st := s.nd.Stats()
	return progress{held: !s.nd.Idle(), received: st.Received, given: st.Given, leaves: st.Units}
}
func (s *stealMachine) summary() string {
	st := s.nd.Stats()
	return fmt.Sprintf("leaves %d, splits %d, steals %d, given %d, received %d, taken back %d, abandoned %d, root snapshots %d, root takeovers %d (from %d checkpointed units)",
		st.Units, st.Expanded, st.Steals, st.Given, st.Received, st.Requeued, st.Abandoned, st.Snapshots, st.Takeovers, st.FromCkpt)
}
func (s *stealMachine) outcome(cfg Config, count uint64, begin time.Time) Outcome {
	return outcome(cfg, count, begin, s.reporter(), s.summary())
}

type masterMachine struct {
	nd   *master.Node
	seen master.Stats
}

func (m *masterMachine) news() []string {
	st, old := m.nd.Stats(), m.seen
	m.seen = st
	var out []string
	if st.Takeovers > old.Takeovers {
		out = append(out, fmt.Sprintf("became the master with %d checkpointed result(s) of %d tasks", st.FromBackup, m.nd.Tasks()))
	}
	if d := st.Reassigned - old.Reassigned; d > 0 {
		out = append(out, fmt.Sprintf("put %d task(s) of a dead worker back in the queue", d))
	}
	return out
}

func encodeMaster(outs []master.Out) []outMsg {
	res := make([]outMsg, len(outs))
	for i, o := range outs {
		res[i] = outMsg{to: o.To, data: o.Msg.AppendBinary(nil)}
	}
	return res
}

func (m *masterMachine) start() []outMsg { return encodeMaster(m.nd.Start()) }
func (m *masterMachine) work() ([]outMsg, bool) {
	outs, busy := m.nd.Work()
	return encodeMaster(outs), busy
}
func (m *masterMachine) receive(from int, data []byte) ([]outMsg, error) {
	msg, err := master.DecodeMsg(data)
	if err != nil {
		return nil, err
	}
	return encodeMaster(m.nd.Receive(from, msg)), nil
}
func (m *masterMachine) failed(r int) []outMsg  { return encodeMaster(m.nd.Failed(r)) }
func (m *masterMachine) result() (uint64, bool) { return m.nd.Result() }
func (m *masterMachine) err() error             { return m.nd.Err() }
func (m *masterMachine) reporter() bool         { return m.nd.IsMaster() }
func (m *masterMachine) idle() bool             { return true }
func (m *masterMachine) refused([]byte) bool    { return false }
func (m *masterMachine) progress() progress {
	return progress{received: m.nd.Stats().Computed, master: m.nd.IsMaster(), results: m.nd.Results()}
}
func (m *masterMachine) summary() string {
	st := m.nd.Stats()
	return fmt.Sprintf("tasks computed %d, takeovers %d (from %d checkpointed results), reassigned %d, duplicates %d, checkpoints sent %d",
		st.Computed, st.Takeovers, st.FromBackup, st.Reassigned, st.Duplicates, st.Checkpoints)
}
func (m *masterMachine) outcome(cfg Config, count uint64, begin time.Time) Outcome {
	return outcome(cfg, count, begin, m.reporter(), m.summary())
}
