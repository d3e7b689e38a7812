package comm

import (
	"context"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// Failure is one notification of [Session.Failures]: rank Rank of the world
// communicator failed, as the membership view numbered Epoch says, or (Err
// not nil) this process cut it off for sending beyond a limit of its own
// (an [*OverrunError]; Epoch is then the view current at the time). In a
// job with spares, Rank is the process number, as in [Session.Processes].
type Failure struct {
	Rank  int
	Epoch uint64
	Err   error
}

// Session is one process's place in a job: its world communicator, the
// matching engine every communicator of the process shares, and the host
// (failure detector and membership) that tells it which ranks failed. Build
// one with [Init] (a process started by `cohort run`) or [Local] (a job
// inside one process). Its methods are safe for concurrent use.
type Session struct {
	self core.NodeID
	size int
	tr   transport.Transport
	host *host.Host
	log  *slog.Logger
	try  context.Context // already done: Send without waiting
	base context.Context // cancelled by Finalize
	stop context.CancelFunc

	epoch atomic.Uint64 // the newest view's epoch, stamped on frames

	// mu guards the matching engine and everything marked "under mu".
	mu        hotsync.Mutex
	queues    map[uint64]*queue          // by context id
	lastQ     *queue                     // the last queue queueLocked returned (mu)
	spare     atomic.Pointer[Request]    // a pooled request, reset; taken under mu (takeSpareLocked)
	comms     map[uint64]*commState      // by communicator id
	revokedID map[uint64]bool            // revoked communicators not created here yet
	failed    []bool                     // by world rank; never cleared
	nfailed   int                        // count of true entries in failed
	left      []bool                     // by world rank: a view says it left the job (leave.go); never cleared
	state     error                      // nil, ErrFinalized or ErrEvicted
	out       []*outq                    // by world rank, created lazily
	agreeBuf  map[uint64][]agreeNote     // agreement steps for communicators not created here yet
	vmapBuf   map[uint64][]vmapMsg       // mapping updates for virtual layers not created here yet
	placing   map[core.NodeID]*placement // receives being filled straight from a sender's stream (place.go)
	posts     uint64                     // receives posted (recvOp.seq)
	rdvOut    map[uint64]*Request        // large sends waiting for their clear-to-send (rendezvous.go)
	rdvIn     map[rdvKey]rdvRecv         // receives matched to a ready-to-send, waiting for the data
	rdvSeq    uint64                     // rendezvous ids given
	rdvJobs   chan rdvJob                // to idle rendezvous writers (unbuffered; rendezvous.go)
	credit    []peerCredit               // eager credit by world rank (credit.go)

	// eagerCredit is the budget of eager bytes granted to each peer and
	// assumed from each, and unexpectedLimit what each peer's messages
	// outside the credit may hold here (credit.go); set before the
	// session runs.
	eagerCredit, unexpectedLimit int

	failures chan Failure
	excluded exclusions // the processes the views excluded, for the launcher (ft.go)
	// failWake is closed (and replaced, under mu) each time requests are
	// failed because ranks failed: WaitAll blocked on a request of a live
	// rank wakes up and looks for the failed ones.
	failWake chan struct{}
	world    *Comm

	finalizeOnce sync.Once
	hostDone     chan struct{} // closed when the host's Run returned
	onFinal      func()        // closes the transport and the rest, after the host stopped
	crash        func()        // closes the transport at once (kill)

	stats sessionStats
	spin  atomic.Int64 // ns a blocking wait polls before parking (spin.go)
	// prog, if set, lets a blocking wait poll the transport's
	// shared-memory rings itself for up to progTime (spin.go).
	prog progresser
	// tcpTr is tr when it is transport/tcp's (not wrapped): its direct
	// data path (SendDirect) writes a data frame on the caller's
	// goroutine, and an eager send tries that write without its queue's
	// lock first (outq.sendData).
	tcpTr    *tcp.Transport
	progTime time.Duration
	// single, if set, reads large messages from the memory of the ranks
	// of this host (transport/tcp's single copy; singlecopy.go).
	single singleCopier
	// collPoll is how long a collective's receive polls prog's rings
	// when it is longer than progTime (coll_fast.go).
	collPoll time.Duration
	// collHost numbers, by process, the host each runs on: the ranks
	// of a communicator on this host run its collectives on shared
	// memory (coll_shm.go, coll_hier.go); nil turns that off. With
	// collNoShm (COHORT_SHM=off, COHORT_UNIX=off, TLS) this rank maps no
	// segment, and its communicators' ranks agree to do without.
	collHost  []int
	collNoShm bool
	// wholeProcess: this session is its process's only rank (Init's, not
	// one of the ranks a test or Local runs in one process), so that a
	// wait on a segment may hold the process's scheduler while it sleeps,
	// and a segment's set-up settles the runtime (coll_shm_settle.go).
	wholeProcess bool

	// rep is set when each rank runs as several replicas (replicated.go):
	// frames then travel through package replica's layer, and failures
	// are the layer's RankFailed, not the membership's views.
	rep *replicated
	// addrs are the job's processes' addresses, by process (Init's).
	addrs []string
	// procs is the communicator of every process, spares included
	// (spares.go); world when the job has no spares.
	procs *Comm
	// spares is the number of spare processes: the last spares of the
	// size processes (spares.go).
	spares int

	// links tells of this rank's links relayed and direct again; nil
	// unless the launcher asked (links.go).
	links *linkNotices
	// nc is what the session knows of the processes that joined after
	// the start (newcomer.go).
	nc newcomers
	// local is the in-process job of Local, which JoinLocal adds to.
	local *localJob
}

type sessionStats struct {
	malformed atomic.Uint64 // comm frames that did not decode
	dropped   atomic.Uint64 // data frames from failed ranks or after Finalize
	placed    atomic.Uint64 // messages read straight into their receive's buffer (place.go)
	// placedHeld counts unexpected messages read straight into the
	// buffer they are kept in (place.go).
	placedHeld atomic.Uint64
	// creditFallbacks counts messages of at most EagerMax bytes sent
	// through the rendezvous for want of credit; creditFrames the credit
	// frames sent (credit.go).
	creditFallbacks atomic.Uint64
	creditFrames    atomic.Uint64
	// backlogged counts the frames that waited in a destination's backlog
	// (outq) for want of room in the transport's queue.
	backlogged atomic.Uint64
	// pulled counts the large messages read from their sender's memory,
	// pullFallbacks those asked for after a read failed, withdrawals the
	// offers taken back by blocking sends that gave up (singlecopy.go).
	pulled        atomic.Uint64
	pullFallbacks atomic.Uint64
	withdrawals   atomic.Uint64
}

// Option configures a session ([Init], [Local]).
type Option func(*options)

type options struct {
	fanout   int
	detector string
	logger   *slog.Logger
	events   io.Writer
	seed     uint64
	// eagerCredit: bytes (0: DefaultEagerCredit; see WithEagerCredit);
	// unexpectedLimit: bytes (0: DefaultUnexpectedLimit; see
	// WithUnexpectedLimit)
	eagerCredit, unexpectedLimit int
	// shmInProcess: ranks of one process (tests) still connect over
	// shared memory (tcp.Config.ShmInProcess)
	shmInProcess bool
	// queueLen: the transport's queue per peer (tcp.Config.QueueLen; 0:
	// its default), small in tests that fill it; sockBuf: the kernel's
	// socket buffers (tcp.Config.SocketBuffer; 0: the system's), small in
	// tests that must fill a TCP connection
	queueLen, sockBuf int
	// quietDetector: the detector sends its traffic but its verdicts wait
	// stack.QuietDelay (stack.Options.QuietDetector), for tests that are
	// not about failures, in which a rank waiting for a CPU on a loaded
	// machine must not be taken for a crashed one
	quietDetector bool
	// editStack, if not nil, edits the stack's configuration before it
	// is built (newStackJoin): tests give a detector the timeouts a
	// loaded machine needs
	editStack stackEdit
	// maxBackup: the replication layer's backup table bound in sends
	// (replica.Config.MaxBackup; 0: its default), small in tests
	maxBackup int
	// spares: the job's last spares processes are spares (spares.go);
	// allowSpares: the program takes spares (AllowSpares)
	spares      int
	allowSpares bool
	// links, if not nil, receives the notices of this rank's links
	// relayed and direct again (links.go)
	links io.Writer
	// collShm: the ranks of a Local job, which share this process's
	// host, run collectives on shared memory as a job's ranks of one
	// host do (tests); collHosts, if set, are the hosts they would run
	// on, by rank, to test the collectives across hosts
	collShm   bool
	collHosts []int
}

// WithFanout sets the membership radix tree's fan-out (a power of two ≥ 2);
// it overrides COHORT_FANOUT in Init.
func WithFanout(a int) Option { return func(o *options) { o.fanout = a } }

// WithDetector selects the failure detector: "brr" (default), "dbrr" or
// "heartbeat"; it overrides COHORT_DETECTOR in Init.
func WithDetector(name string) Option { return func(o *options) { o.detector = name } }

// WithLogger sends the host's and the transport's logs to l (default: none).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithEvents writes the node's event stream (JSON lines, see
// host.EventLine) to w. In [Local], every rank writes to w, serialized.
func WithEvents(w io.Writer) Option { return func(o *options) { o.events = w } }

// WithSeed seeds the protocol machines' random source (0: random).
func WithSeed(seed uint64) Option { return func(o *options) { o.seed = seed } }

// newSession builds the session of transport tr's process in a job of size
// ranks, with options o already validated (its logger and credit).
func newSession(tr transport.Transport, size int, o options) *Session {
	return newSessionAs(tr, tr.Self(), size, o)
}

// newSessionAs is newSession for a process that is rank self of size in the
// job's world (not its transport id: a replica).
func newSessionAs(tr transport.Transport, self core.NodeID, size int, o options) *Session {
	try, cancel := context.WithCancel(context.Background())
	cancel()
	base, stop := context.WithCancel(context.Background())
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	budget, unexpected, err := o.flowLimits()
	if err != nil {
		panic("comm: unvalidated options: " + err.Error())
	}
	s := &Session{
		self:      self,
		size:      size,
		tr:        tr,
		log:       logger,
		try:       try,
		base:      base,
		stop:      stop,
		queues:    map[uint64]*queue{},
		comms:     map[uint64]*commState{},
		revokedID: map[uint64]bool{},
		failed:    make([]bool, size+MaxNewcomers),
		left:      make([]bool, size+MaxNewcomers),
		out:       make([]*outq, size+MaxNewcomers),
		agreeBuf:  map[uint64][]agreeNote{},
		vmapBuf:   map[uint64][]vmapMsg{},
		failures:  make(chan Failure, size+MaxNewcomers),
		failWake:  make(chan struct{}),
		rdvJobs:   make(chan rdvJob),
		credit:    make([]peerCredit, size+MaxNewcomers),
		hostDone:  make(chan struct{}),

		eagerCredit:     budget,
		unexpectedLimit: unexpected,
	}
	s.tcpTr, _ = tr.(*tcp.Transport)
	if s.tcpTr != nil {
		s.single = s.tcpTr
	}
	for r := range s.credit {
		s.credit[r].avail = budget
	}
	s.nc.welcome, s.nc.alone = make(chan struct{}), make(chan struct{})
	s.world, s.procs = s.worldsOf(o.spares)
	s.spinFromEnv()
	return s
}

// run builds the host over the session's transport and starts it.
func (s *Session) run(stack core.Machine, codec *wire.Codec, o options, events io.Writer) error {
	h, err := host.New(stack, host.Config{
		Transport: s.tr,
		Codec:     codec,
		Seed:      o.seed,
		Logger:    s.log,
		Events:    events,
		DataPath:  (*framePath)(s),
		Placer:    placer{s},
		OnEvent:   s.onEvent,
	})
	if err != nil {
		return err
	}
	s.host = h
	go func() {
		defer close(s.hostDone)
		h.Run(s.base)
	}()
	return nil
}

// World returns the communicator of every rank of the job (MPI_COMM_WORLD):
// rank r is node core.NodeID(r). A job with spares leaves them out of it:
// World returns nil at a spare (see [Session.IsSpare]).
func (s *Session) World() *Comm { return s.world }

// Failures returns a channel that receives one [Failure] for each rank of
// the world communicator that the membership service declares failed, in
// the order the views say, or that this process cut off for sending
// beyond its limits (Failure.Err says why). It has room for every rank, so
// it never holds the session back; nobody has to read it.
func (s *Session) Failures() <-chan Failure { return s.failures }

// Replicas returns how many replicas each rank of the job runs as (1: the
// job is not replicated; see replicated.go).
func (s *Session) Replicas() int {
	if s.rep == nil {
		return 1
	}
	return s.rep.layout.Replicas
}

// Finalize leaves the job: it waits (at most until ctx is done) until the
// messages this process has sent have reached their ranks, tells the
// membership that it leaves (and waits until that has reached the others
// too), stops the host and the transport, and fails every pending
// operation with [ErrFinalized]. It does not wait for the other ranks (it
// is not collective). The others' views then show the rank as left, not
// failed: [Session.Failures] does not report it, and only the operations
// that still need it fail, with a [*ProcLeftError] (see leave.go). A
// Finalize whose ctx is done first leaves as a crash does, unannounced.
// Finalize is idempotent; later calls return nil.
func (s *Session) Finalize(ctx context.Context) error {
	var err error
	s.finalizeOnce.Do(func() {
		if s.links != nil {
			s.links.quiet.Store(true)
		}
		s.excluded.wait(ctx) // the notices' bounded waits (tellExcluded)
		err = s.flush(ctx)
		if err == nil && ctx.Err() == nil {
			err = s.announceLeave(ctx)
		}
		s.shutdown(ErrFinalized)
		<-s.hostDone
		if s.onFinal != nil {
			s.onFinal()
		}
	})
	return err
}

// flush waits until the send backlogs are empty and, if the transport can
// say so, until what it was given has reached its peers.
func (s *Session) flush(ctx context.Context) error {
	if s.rep != nil {
		if err := s.rep.wait(ctx, s); err != nil {
			return err
		}
		if err := s.rep.finish(ctx, s); err != nil {
			return err
		}
	}
	s.mu.Lock()
	qs := slices.Clone(s.out)
	s.mu.Unlock()
	for _, q := range qs {
		if q == nil {
			continue
		}
		if err := q.wait(ctx); err != nil {
			return err
		}
		if err := q.ctl.wait(ctx); err != nil {
			return err
		}
	}
	if f, ok := s.tr.(interface{ Flush(context.Context) error }); ok {
		return f.Flush(ctx)
	}
	return nil
}

// kill stops the process's host and transport at once, as a crash would
// (tests); pending operations fail with ErrFinalized.
func (s *Session) kill() {
	s.finalizeOnce.Do(func() {
		if s.crash != nil {
			s.crash()
		} else {
			s.tr.Close()
		}
		s.shutdown(ErrFinalized)
		<-s.hostDone
	})
}

// shutdown marks the session ended with err and fails everything pending.
func (s *Session) shutdown(err error) {
	s.mu.Lock()
	if s.state == nil {
		s.state = err
	}
	s.failAllLocked(s.state)
	outs := slices.Clone(s.out)
	s.mu.Unlock()
	for _, q := range outs {
		if q != nil {
			q.cancel()
		}
	}
	s.stop()
	s.closeSegs()
}

// onEvent follows the node's events on the host's loop: views tell which
// ranks failed.
func (s *Session) onEvent(_ time.Duration, e core.Event) {
	switch e := e.(type) {
	case core.MembersChanged:
		s.epoch.Store(e.Epoch)
	case member.ViewInstalled:
		s.epoch.Store(e.Epoch)
		s.excluded.view(e)
		if s.rep != nil {
			return // failures of ranks come from the replication layer
		}
		s.mu.Lock()
		s.markLeftLocked(e.Left)
		gone := s.viewLocked(e.Epoch, e.Members)
		s.mu.Unlock()
		s.fail(gone, e.Epoch)
	case member.Evicted:
		s.log.Warn("comm: this process was excluded from the job", "epoch", e.Epoch)
		s.shutdown(ErrEvicted)
	default:
		if s.links != nil {
			s.links.event(e)
		}
	}
}

// fail records that the world ranks listed have failed (those already known
// are skipped) and fails every operation that now involves a failed rank.
func (s *Session) fail(ranks []int, epoch uint64) { s.failWith(ranks, epoch, nil) }

// failWith is fail; cause, if not nil, is why this process counts the
// ranks failed on its own (it cut them off), reported with each.
func (s *Session) failWith(ranks []int, epoch uint64, cause error) {
	var sends []outgoing
	var newly []int
	s.mu.Lock()
	for _, r := range ranks {
		if r < 0 || r >= s.limit() || s.failed[r] || core.NodeID(r) == s.self {
			continue
		}
		s.failed[r] = true
		s.nfailed++
		newly = append(newly, r)
	}
	if len(newly) == 0 {
		s.mu.Unlock()
		return
	}
	for _, c := range s.comms {
		for _, r := range newly {
			if cr, ok := c.rankOf(core.NodeID(r)); ok {
				c.markGoneLocked(cr, s.left[r])
			}
		}
	}
	for _, q := range s.queues {
		s.recheckLocked(q)
	}
	s.rdvRecheckLocked()
	close(s.failWake)
	s.failWake = make(chan struct{})
	for _, c := range s.comms {
		sends = append(sends, s.agreeOnFailureLocked(c)...)
	}
	var cancel []*outq
	var failed []int // not those that left: they close their connections as they end
	for _, r := range newly {
		if q := s.out[r]; q != nil {
			cancel = append(cancel, q)
		}
		if !s.left[r] {
			failed = append(failed, r)
		}
	}
	s.mu.Unlock()
	for _, q := range cancel {
		q.cancel()
	}
	if cause == nil && s.rep == nil && s.host != nil && len(failed) > 0 {
		// Its connection goes once it carried the notice that the
		// process was excluded (tellExcluded).
		s.excluded.start()
		go s.tellExcluded(failed)
		failed = nil
	}
	s.dropPeers(failed)
	s.tellGone(newly, epoch, cause)
	s.sendAll(sends)
}

// dropPeers forgets what is queued for the failed world ranks listed
// and their connections, and keeps their addresses.
func (s *Session) dropPeers(failed []int) {
	for _, r := range failed {
		// A failed rank never comes back (comm has no recovery): drop
		// what is queued for it and its connection. Its address stays:
		// a process excluded while alive (or one that took the others
		// for dead) learns that its view is over only from the
		// membership's notices, and with the address forgotten on both
		// sides neither could reach the other, and such a process would
		// run on alone for ever.
		for _, p := range s.processesOf(r) {
			s.tr.RemovePeer(p)
			if int(p) < len(s.addrs) && s.addrs[p] != "" {
				s.tr.SetPeer(p, s.addrs[p])
			}
		}
	}
}

// dataPath is the host's Config.DataPath: every comm frame is consumed here,
// on the transport's reader goroutine.
func (s *Session) dataPath(f wire.Frame) bool { return (*framePath)(s).TakeFrame(f) }

// framePath is the session as the host's data path (host.DataPath), the
// body of dataPath in its method: the host calls it through the interface
// without a method value's wrapper.
type framePath Session

// TakeFrame is dataPath.
func (fp *framePath) TakeFrame(f wire.Frame) bool {
	s := (*Session)(fp)
	if f.Kind.Proto() != core.ProtoComm {
		if f.Kind.Proto() == core.ProtoReplica && s.rep != nil {
			return s.rep.receive(f)
		}
		return false
	}
	src := int(f.Src)
	if src >= s.limit() {
		s.stats.malformed.Add(1)
		return true
	}
	var err error
	switch f.Kind {
	case kindData, kindCData, kindVData:
		// A small message's header on the world's communicators
		// (parseData's first case) is decoded here, without a call.
		var h dataHeader
		var data []byte
		if p := f.Payload; f.Kind == kindCData && len(p) >= 3 && p[0]|p[1]|p[2] < 0x80 {
			h.credit, h.ctxID, h.tag = uint64(p[0]), uint64(p[1]), unzigzag(p[2])
			data = p[3:]
		} else {
			h, data, err = parseData(f.Payload, f.Kind)
		}
		if err == nil {
			// The credit the frame returns, and the message, under one
			// lock.
			// Field by field, as irecvReq fills its operation.
			var m message
			m.src, m.tag, m.vnode, m.data = core.NodeID(src), h.tag, VNode(h.vnode), data
			var out outgoing
			var cut error
			s.mu.Lock()
			if h.credit > 0 {
				s.addCreditLocked(m.src, h.credit)
			}
			// matchLocked's common case, without its call: the session
			// runs unreplicated with no process gone, the message is a
			// point-to-point one from another process on the last
			// queue looked at, of a world-numbered communicator that is
			// not revoked, within the sender's credit, and the first
			// receive posted there takes it.
			if q := s.lastQ; q != nil && q.id == h.ctxID && h.ctxID&subMask == subP2P &&
				s.state == nil && s.nfailed == 0 && s.rep == nil && m.src != s.self &&
				q.comm != nil && !q.comm.revoked && q.comm.ranks == nil && src < len(q.comm.members) &&
				s.credit[src].held+s.credit[src].owed+eagerCharge(len(data)) <= s.eagerCredit &&
				len(q.posted) > 0 && q.posted[0].matches(m.src, m.tag, m.vnode) {
				op := q.posted[0]
				q.unpost(0)
				s.completeRecvLocked(q, op, &m, false, eagerCharge(len(data)), &out)
			} else {
				cut = s.matchLocked(src, h.ctxID, &m, false, &out)
			}
			s.mu.Unlock()
			if out.kind != 0 { // a credit frame is due
				s.sendOne(out)
			}
			if cut != nil {
				s.cutOff(src, cut)
			}
		}
	case kindRTS:
		err = s.onRTS(src, f.Payload)
	case kindCTS:
		err = s.onCTS(src, f.Payload)
	case kindRData:
		err = s.onRData(src, f.Payload)
	case kindRStop:
		err = s.onRStop(src, f.Payload)
	case kindCredit:
		err = s.onCredit(src, f.Payload)
	case kindRevoke:
		err = s.onRevoke(src, f.Payload)
	case kindAgree:
		var m agreeMsg
		if m, err = unmarshalAgree(f.Payload); err == nil {
			s.onAgree(src, m)
		}
	case kindWelcome:
		err = s.onWelcome(src, f.Payload)
	case kindVMap:
		var m vmapMsg
		if m, err = unmarshalVMap(f.Payload); err == nil {
			s.onVMap(src, m)
		}
	default:
		err = fmt.Errorf("%w: unknown kind %v", errMalformed, f.Kind)
	}
	if err != nil {
		s.stats.malformed.Add(1)
		s.log.Warn("comm: dropping a frame", "from", src, "kind", f.Kind.String(), "err", err)
	}
	return true
}

// outgoing is one frame to send once the engine's lock is released.
type outgoing struct {
	to      int // world rank
	kind    core.Kind
	payload []byte
	// pull and addr, when addr is not 0: instead of a frame, the data of
	// ready-to-send pull from rank to is to be read from its memory at
	// addr (singlecopy.go).
	pull, addr uint64
}

// sendAll sends control frames without waiting (a full queue goes to the
// backlog); errors are ignored: the protocols above tolerate a peer that
// fails.
func (s *Session) sendAll(msgs []outgoing) {
	for _, m := range msgs {
		if core.NodeID(m.to) == s.self {
			continue
		}
		s.sendFrame(m.to, wire.Frame{Kind: m.kind, Payload: m.payload}, nil, nil)
	}
}

// sendOne is sendAll of one frame (none if m has no kind), without a slice.
func (s *Session) sendOne(m outgoing) {
	if m.addr != 0 {
		s.rdvPull(core.NodeID(m.to), m.pull, m.addr)
		return
	}
	if m.kind != 0 && core.NodeID(m.to) != s.self {
		s.sendFrame(m.to, wire.Frame{Kind: m.kind, Payload: m.payload}, nil, nil)
	}
}

// sendFrame hands f, whose payload is f.Payload followed by body, to the
// transport for world rank to, in order with every earlier frame to the
// same rank. A data frame (body not nil) goes through the transport's
// direct path if it has one (transport/tcp's SendDirect: written on this
// goroutine with one writev of header and body, without copying body, when
// the connection is idle; otherwise copied and queued); control frames
// (body nil) are only queued, so
// that a reader goroutine that sends one never blocks on a socket. If the
// transport's queue is full the frame waits in the rank's backlog; req, if
// not nil, completes when the frame has been handed over or has failed.
func (s *Session) sendFrame(to int, f wire.Frame, body []byte, req *Request) error {
	if s.rep != nil {
		return s.replicaSend(to, f, body, req)
	}
	q := s.outq(to)
	if q == nil {
		err := s.stateErr()
		if req != nil {
			req.complete(Status{}, err)
		}
		return err
	}
	if controlKind(f.Kind) {
		q = q.ctl
	}
	return q.sendEpoch(f, body, req)
}

// sendEpoch is send of a frame of the session's current epoch.
func (q *outq) sendEpoch(f wire.Frame, body []byte, req *Request) error {
	f.Epoch = q.s.epoch.Load()
	return q.send(f, body, req)
}

func (s *Session) stateErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != nil {
		return s.state
	}
	return ErrFinalized
}

// outq returns the backlog of world rank r (nil once the session ended).
func (s *Session) outq(r int) *outq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outqLocked(r)
}

func (s *Session) outqLocked(r int) *outq {
	if s.state != nil {
		return nil
	}
	q := s.out[r]
	if q == nil {
		ctx, cancel := context.WithCancel(s.base)
		q = &outq{s: s, to: core.NodeID(r), ctx: ctx, stop: cancel}
		q.ctl = &outq{s: s, to: q.to, ctx: ctx, stop: cancel}
		if s.failed[r] {
			cancel()
		}
		s.out[r] = q
	}
	return q
}

// peerFailedError is a send's failure because its destination, world rank
// world, failed; a Request turns it into a [*ProcFailedError] in the ranks
// of its communicator.
type peerFailedError struct {
	world int
	left  bool // it left the job (a *ProcLeftError then)
}

func (e *peerFailedError) Error() string { return fmt.Sprintf("comm: world rank %d gone", e.world) }

// sendErr translates a transport error about world rank `to`.
func (s *Session) sendErr(to core.NodeID, err error) error {
	if err == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed[to] {
		return &peerFailedError{world: int(to), left: s.left[to]}
	}
	if s.state != nil {
		return s.state
	}
	return fmt.Errorf("comm: sending to rank %d: %w", to, err)
}
