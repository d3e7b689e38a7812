package comm

import (
	"bytes"
	"context"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/wire"
)

// Replication (P2P-MPI §4): with launch.Bootstrap.Replicas = R > 1, each
// logical rank of the job runs as R processes, and package replica's layer
// sits above the membership in every process's stack. The session is
// then the logical rank's: its world has the logical ranks, and every frame
// comm sends to a rank (data, collective steps, revocations, agreement
// steps) is a replica.Send toward that logical rank, which the layer's
// master/commit protocol delivers exactly once and in order at every live
// replica of the destination, whichever replica of the source survives.
// Frames come back as replica.Delivered events and enter the matching
// engine as if they had come from the source rank. A replica's death is
// invisible (the layer's ReplicaLost is only logged); a rank fails, with
// the ordinary ULFM error naming it, when its last replica leaves the view
// (replica.RankFailed).
//
// Every replica must run the same deterministic program: the same sends in
// the same order. What depends on timing (wildcard receives and probes,
// Iprobe, Test, WaitAny, Session.Seed and Session.Decide) is decided by the
// rank's master replica (decide.go); a nonblocking receive from AnySource
// is refused with [ErrReplicatedWildcard].
//
// The layer runs on the data path, not on the event loop (replicapath.go):
// a send reaches the destination's master from the program's goroutine
// (its other replicas a few sends at a time, replicalazy.go), and a
// message is delivered from the transport's reader.
//
// Memory: the layer keeps each send in its backup table until every live
// replica of the destination acknowledged it, so a destination that does
// not acknowledge would grow the table without bound. A send therefore
// goes to the layer only while its table has room
// (replica.Config.MaxBackup sends and MaxBackupBytes bytes: 4096 and 64
// MiB by default); once it is full, sends are held here, in order, and
// handed over as commits make room; meanwhile the program's sends do not
// complete (a blocking Send waits, an Isend's request stays pending), so
// the program is held back rather than its sends piling up. Frames the
// engine answers with (no request) are held too: the protocol bounds
// them. Revocations, agreement steps and welcomes wait only for the
// layer to start (they are its control channels). A receiving replica
// acknowledges a message once its matching engine has it, received or
// not: what its program has not received yet is kept without a bound of
// comm's (eager credit and the unexpected limit count only the messages
// of unreplicated jobs).

// replicated is a session's replication state.
type replicated struct {
	layout replica.Layout
	phys   core.NodeID
	sess   *Session
	codec  *wire.Codec

	// lmu guards the layer and what its calls leave (replicapath.go).
	lmu     sync.Mutex
	layer   *replica.Layer
	loopEnv core.Env   // the stack's Env for the layer (its clock and random source)
	started bool       // the loop has started the layer: it takes sends
	early   []earlyMsg // received before it started, for Start
	// startedFlag is started, for the data path's look without the lock.
	startedFlag atomic.Bool
	enc         wire.Encoder // the layer's messages are encoded here
	// rdec and rdata decode every Data received (receive), lent to the
	// layer for the call.
	rdec  wire.Decoder
	rdata replica.Data
	// rack and rcommit decode every Ack and Commit received
	// (receiveLevel).
	rack    replica.Ack
	rcommit replica.Commit
	// timers are the runtime timers of the layer's, armed or not
	// (layerEnv.SetTimer); lmu.
	timers []*layerTimer
	// shared is the last large message sent and its encoding, which its
	// frames to every destination replica share (layerEnv.Send).
	shared struct {
		d replica.Data
		b []byte
	}
	// collecting is set while a program's data send is in the layer
	// (replicaSend): the Data messages it makes wait in direct, and the
	// caller writes them once it has left the lock (sendDirect).
	collecting bool
	direct     []directData
	// lazy holds the Data for replicas that are not their rank's master,
	// to write together (replicapath.go, "Data to non-masters"); lmu.
	lazy lazyData
	// ackHeld is set while the transport holds its prompt
	// acknowledgements for this process, a non-master (replicalazy.go);
	// ackMu orders its changes.
	ackHeld     atomic.Bool
	ackMu       sync.Mutex
	selfQ       []core.Msg   // messages the layer sent to its own process
	events      []layerEvent // emitted, not yet dispatched
	spareEvents []layerEvent
	dispatching bool
	// held are the sends waiting for room in the backup table, in
	// program order; completed, the requests of held sends handed over
	// since the last dispatch.
	held []pendingSend
	// heldControl counts the sends of control channels in held (held
	// before the layer started).
	heldControl int
	completed   []*Request
	idle        chan struct{} // closed when held empties; nil if nobody waits
	// stalled is set while sends are held: a program's send then
	// completes only once handed to the layer.
	stalled atomic.Bool
	dropped atomic.Uint64 // messages of the layer dropped by a full queue
	// lanes are the control messages' lanes, by process (replicalane.go;
	// lmu).
	lanes []*ctlLane
	// laned counts the control messages that waited in a lane (the
	// transport's control lane toward their process was full).
	laned atomic.Uint64
	// batched counts the Data to non-masters written in a batch's one
	// write (writeLazy).
	batched atomic.Uint64
	// controlNow counts the control messages written at once on the
	// sender's goroutine (sendControl).
	controlNow atomic.Uint64
	// placing are the Data being read into a posted receive's buffer, by
	// sending process (replicapath.go; lmu).
	placing map[core.NodeID]*replicaPlacement

	// free holds large payload buffers the layer released (its
	// Config.KeepReleased), for replicaSend to reuse, and small holds the
	// small ones by size class (smallClass): a send then costs no
	// allocation. released is TakeReleased's buffer (lmu).
	fmu        sync.Mutex
	free       [][]byte
	freeBytes  int
	small      [smallClasses][][]byte
	smallBytes int
	released   [][]byte
	// loans are the large payload buffers lent to a transport's resend
	// log, by address (lend); spareLoans, records for the next (fmu).
	loans      map[*byte]*loan
	spareLoans []*loan

	finished chan struct{} // closed on replica.Finished

	// pollTime is the readers' polling time Init chose (pollingRanks),
	// which a large send turns off (pollForSend); pollOff says it is off.
	pollTime time.Duration
	pollOff  atomic.Bool

	decMu   sync.Mutex             // one decision at a time, in program order
	mu      sync.Mutex             // guards decided
	decK    uint64                 // the last decision requested
	decided map[uint64]chan []byte // decision → its waiter (under mu)
}

// directData is a Data message for replica to, to write on the sender's
// goroutine after the layer's lock (replicaSend).
type directData struct {
	to core.NodeID
	m  replica.Data
}

// pendingSend is a send held back, and the request to complete once it is
// handed to the layer (nil: completed already).
type pendingSend struct {
	send replica.Send
	req  *Request
}

func newReplicated(layout replica.Layout, phys core.NodeID, layer *replica.Layer) *replicated {
	return &replicated{layout: layout, phys: phys, layer: layer,
		finished: make(chan struct{})}
}

// machine returns the layer as the host's stack drives it.
func (r *replicated) machine() core.Machine { return layerMachine{r} }

// bind gives the replication state its session and the job's codec,
// before the host starts.
func (r *replicated) bind(s *Session, codec *wire.Codec) { r.sess, r.codec = s, codec }

// replicaSend hands frame f (payload f.Payload then body) to the layer for
// logical rank to. The frame is copied: the caller may reuse body at once.
// req, if not nil, completes when the frame is handed over (sends are
// eager).
func (s *Session) replicaSend(to int, f wire.Frame, body []byte, req *Request) error {
	// A send to a failed rank does not fail here: a replica behind its
	// master may reach a send its master made while the destination lived
	// (the destination has since finished or died), and failing it would
	// make the replicas' programs diverge on timing. The layer drops sends
	// to a failed rank; the failure shows on receives and collectives,
	// which every replica meets at the same point of its program.
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state != nil {
		if req != nil {
			req.complete(Status{}, state)
		}
		return state
	}
	// One allocation, not cleared first: append grows a full slice (and
	// returns it as it is when there is nothing to add). A small one is
	// made at its size class's capacity, to serve any send of the class
	// once released.
	var payload []byte
	n := len(f.Payload) + len(body)
	if b := s.rep.reuse(n); b != nil {
		payload = append(append(b, f.Payload...), body...)
	} else if n < reuseMin {
		payload = append(append(s.rep.newSmall(n), f.Payload...), body...)
	} else if len(body) > 0 {
		payload = append(f.Payload[:len(f.Payload):len(f.Payload)], body...)
	} else {
		payload = bytes.Clone(f.Payload)
	}
	// Revocations, agreement steps and welcomes are control channels of
	// the layer: they travel in the transport's control lane, and are
	// handed to the layer even while its backup table is full, never
	// waiting behind data (package doc, "Control frames").
	control := controlKind(f.Kind)
	if body != nil {
		s.rep.pollForSend(len(payload))
	}
	e := pendingSend{send: replica.Send{Comm: uint64(f.Kind), Dst: to, Payload: payload, Control: control}}
	r := s.rep
	r.lmu.Lock()
	if r.started && (control || len(r.held) == 0 && !r.layer.BackupFull()) {
		// A data send (body not nil) comes from a program's goroutine,
		// which may wait on a socket as an unreplicated send does; a
		// frame the engine answers with comes from a reader, which must
		// not: its messages go under the lock, never waiting.
		r.collecting = body != nil && s.tcpTr != nil
		r.layer.Handle(e.send)
		r.collecting = false
		var local [8]directData
		direct, due := r.deferLocked(append(local[:0], r.direct...))
		clear(r.direct)
		r.direct = r.direct[:0]
		r.afterCallLocked()
		r.lmu.Unlock()
		for i := range direct {
			r.sendDirect(direct[i].to, &direct[i].m)
		}
		if due {
			r.flushLazy()
		}
		if req != nil {
			req.complete(Status{}, nil)
		}
		r.dispatch()
		return nil
	}
	// The loop has not started the layer yet, or its backup table is
	// full: the send waits, and its request completes once it is handed
	// over. A pooled request must not go back to its pool before.
	if req != nil {
		req.unpooled.Store(true)
		e.req = req
	}
	r.held = append(r.held, e)
	if control {
		r.heldControl++
	}
	r.stalled.Store(true)
	r.lmu.Unlock()
	return nil
}

// Reuse of released payload buffers. A send of n bytes under reuseMin is
// made at the capacity of its size class (smallClass), so that once
// released it serves any send of that class. Buffers of reuseMin bytes or
// more are kept in free, at most freeMax bytes, and searched for one of
// n to 2n bytes; smaller ones in small, at most smallMax bytes, by the
// largest class they serve (class c: sends of at most smallMin<<c bytes),
// taken at once, without a search, which would cost more than the
// allocation it saves. A send of the last class, above
// smallMin<<(smallClasses-1) bytes, is served from free.
//
// So a replicated send allocates nothing once the buffers cover the most
// sends its backup table ever held unreleased at once; until then a miss
// costs one allocation for a slab of a class's buffers (newSmall). That
// number grows with the replicas' lag, not with the traffic: it is the
// one allocation of the replicated data path that stays, as the pools'
// growth, and the unexpected messages' pools (engine.go) grow the same
// way at a replica that runs behind.
const (
	reuseMin     = 4 << 10
	freeMax      = 16 << 20
	smallMin     = 64
	smallClasses = 6 // smallMin<<5 is half of reuseMin
	smallMax     = 1 << 20
)

// smallClass is the size class of a send of n bytes, under reuseMin: the
// smallest c with n ≤ smallMin<<c.
func smallClass(n int) int {
	if n <= smallMin {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(smallMin-1)
}

// newSmall returns a new empty buffer for a send of n bytes, under
// reuseMin, at its class's capacity, cut from a slab of slabBytes (one
// allocation): the slab's other buffers are kept for the class's next
// sends (within smallMax and freeMax bytes).
//
// The pool of a class grows so, by a slab at a time, until it holds as
// many buffers as the backup table ever held sends of that class at
// once, and then stops growing. That number follows the replicas' lag,
// not the message rate: the layer releases a send once every replica of
// its destination has acknowledged it, and a replica that lost the
// processor for a few milliseconds (replicas share the cores) holds
// back the release of every send made meanwhile, hundreds on a loaded
// machine. A buffer per allocation, each new largest lag would cost an
// allocation per send until it is covered.
func (r *replicated) newSmall(n int) []byte {
	size := smallMin << smallClass(n)
	k := max(1, slabBytes/size)
	slab := make([]byte, k*size)
	r.fmu.Lock()
	defer r.fmu.Unlock()
	for i := 1; i < k; i++ {
		b := slab[i*size : i*size : (i+1)*size]
		if c := smallClass(size); c < smallClasses {
			if r.smallBytes+size > smallMax {
				break
			}
			r.small[c] = append(r.small[c], b)
			r.smallBytes += size
		} else {
			r.keepLargeLocked(b)
		}
	}
	return slab[:0:size]
}

// slabBytes is the size of the slab newSmall cuts buffers from: 256 of
// the smallest class, 4 of the largest (4 KiB, sends of 2 to 4 KiB).
const slabBytes = 16 << 10

// reuse returns an empty buffer with room for n bytes, at most twice
// that for a large one, from those the layer released, or nil.
func (r *replicated) reuse(n int) []byte {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if c := smallClass(n); c < smallClasses {
		free := r.small[c]
		if len(free) == 0 {
			return nil
		}
		b := free[len(free)-1]
		free[len(free)-1] = nil
		r.small[c] = free[:len(free)-1]
		r.smallBytes -= cap(b)
		return b[:0]
	}
	for i := len(r.free) - 1; i >= 0; i-- {
		if b := r.free[i]; cap(b) >= n && cap(b) <= 2*n {
			last := len(r.free) - 1
			r.free[i], r.free[last] = r.free[last], nil
			r.free = r.free[:last]
			r.freeBytes -= cap(b)
			return b[:0]
		}
	}
	return nil
}

// keepReleasedLocked takes the payloads the layer released and keeps them
// for reuse (keep). lmu is held.
func (r *replicated) keepReleasedLocked() {
	r.released = r.layer.TakeReleased(r.released[:0])
	if len(r.released) == 0 {
		return
	}
	r.keep(r.released)
	clear(r.released)
}

// keep files released payload buffers for reuse, within freeMax and
// smallMax bytes.
func (r *replicated) keep(bufs [][]byte) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	for _, b := range bufs {
		switch c := cap(b); {
		case c >= reuseMin:
			if ln := r.loans[unsafe.SliceData(b)]; ln != nil {
				ln.released = true // back to reuse once the logs are done with it
				continue
			}
			r.keepLargeLocked(b)
		case c >= smallMin && r.smallBytes+c <= smallMax:
			// The largest class it serves every send of.
			k := bits.Len(uint(c)) - bits.Len(smallMin)
			r.small[k] = append(r.small[k], b)
			r.smallBytes += c
		}
	}
}

// keepLargeLocked keeps b, of reuseMin bytes or more, for reuse, within
// freeMax bytes; fmu is held.
func (r *replicated) keepLargeLocked(b []byte) {
	if c := cap(b); r.freeBytes+c <= freeMax {
		r.free = append(r.free, b)
		r.freeBytes += c
	}
}

// Lending the backup table's buffers. A large Data written to a replica
// by the direct write (sendDirect) is lent to the transport's resend log,
// which then holds the payload by reference instead of a copy of it
// (tcp.TryLendDirectAny): the payload is the backup table's copy of the
// send, which stays unchanged until the layer releases it. A buffer is
// reused only once the layer released it and every log it was lent to
// is done with it (the peer acknowledged the frame, or the frame was
// dropped with the peer), so a log that resends it on a new connection
// never finds another message in it. A buffer the layer never releases
// (a send to the process's own rank) goes to the collector once the
// logs are done with it.

// loan is a large payload buffer lent to resend logs: how many hold it,
// and whether the layer released it.
type loan struct {
	r        *replicated
	b        []byte
	lends    int
	released bool
	done     func() // ln.returned, made once: a lend allocates nothing
}

// lend counts one more lend of the large payload b and returns the
// release to hand the transport with it, to be called once.
func (r *replicated) lend(b []byte) func() {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	key := unsafe.SliceData(b)
	ln := r.loans[key]
	if ln == nil {
		if k := len(r.spareLoans); k > 0 {
			ln, r.spareLoans = r.spareLoans[k-1], r.spareLoans[:k-1]
		} else {
			ln = &loan{r: r}
			ln.done = ln.returned
		}
		ln.b = b
		if r.loans == nil {
			r.loans = make(map[*byte]*loan)
		}
		r.loans[key] = ln
	}
	ln.lends++
	return ln.done
}

// returned ends one lend of ln's buffer (the transport's release): the
// last one gives it back to reuse if the layer released it.
func (ln *loan) returned() {
	r := ln.r
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if ln.lends--; ln.lends > 0 {
		return
	}
	if ln.lends < 0 {
		panic("comm: a lent payload buffer returned more often than lent")
	}
	delete(r.loans, unsafe.SliceData(ln.b))
	if ln.released {
		r.keepLargeLocked(ln.b)
	}
	ln.b, ln.released = nil, false
	if len(r.spareLoans) < spareLoansMax {
		r.spareLoans = append(r.spareLoans, ln)
	}
}

// spareLoansMax bounds the loan records kept for reuse.
const spareLoansMax = 256

// run waits until the session ends, then fails the requests of the sends
// still held.
func (r *replicated) run(s *Session) {
	<-s.base.Done()
	r.failHeld(s)
}

// failHeld fails the requests of the sends the session ended before
// handing over.
func (r *replicated) failHeld(s *Session) {
	r.lmu.Lock()
	rest := r.held
	r.held = nil
	if r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
	r.lmu.Unlock()
	err := s.stateErr()
	for _, e := range rest {
		if e.req != nil {
			e.req.complete(Status{}, err)
		}
	}
}

// wait returns once every send of the program went to the layer (none is
// held for room in the backup table), or ctx is done.
func (r *replicated) wait(ctx context.Context, s *Session) error {
	r.lmu.Lock()
	if len(r.held) == 0 {
		r.lmu.Unlock()
		return nil
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	idle := r.idle
	r.lmu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.base.Done():
		return s.stateErr()
	}
}

// describe is the layer's state, for failure reports.
func (r *replicated) describe() string {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	return r.layer.Describe()
}

// stats returns the layer's counters.
func (r *replicated) stats() replica.Stats {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	return r.layer.Stats()
}

// finish waits, at Finalize, until every process of the job has finished
// its program or left (replica.Finish): a replica behind its peers may
// still need messages and collective steps of ranks whose replicas would
// otherwise be gone, and so failed for it. Then it waits until the
// control messages still queued in comm's lanes (this process's Fin among
// them) reached the transport, which Finalize then flushes.
func (r *replicated) finish(ctx context.Context, s *Session) error {
	if err := s.host.Handle(ctx, replica.Finish{}); err != nil {
		return s.endErr(err)
	}
	select {
	case <-r.finished:
		return r.waitLanes(ctx)
	case <-ctx.Done():
		return ctx.Err()
	case <-s.base.Done():
		return s.stateErr()
	}
}

// onReplicaEvent takes the replication layer's events, in the order the
// layer emitted them (dispatch), on the goroutine that called the layer.
func (s *Session) onReplicaEvent(e core.Event) {
	switch e := e.(type) {
	case replica.Delivered:
		s.onDelivered(e)
	case replica.Decided:
		s.rep.onDecided(e)
	case replica.RankFailed:
		s.rep.stopLanes(s.processesOf(e.Rank)...)
		s.fail([]int{e.Rank}, s.epoch.Load())
	case replica.Finished:
		close(s.rep.finished)
	case replica.ReplicaLost:
		s.rep.stopLanes(e.Phys)
		s.log.Info("comm: a replica was lost; its rank lives on", "rank", e.Rank, "process", uint32(e.Phys))
	case replica.BackupFull:
		s.log.Info("comm: the replication backup table is full; sends wait for acknowledgements", "sends", e.Sends, "bytes", e.Bytes)
	}
}

// onDelivered takes a message the replication layer delivered
// (onReplicaEvent).
func (s *Session) onDelivered(e replica.Delivered) {
	if e.Placed {
		return // its receive has it (placed)
	}
	if e.Comm > 0xffff || core.Kind(e.Comm).Proto() != core.ProtoComm {
		s.stats.malformed.Add(1)
		return
	}
	s.dataPath(wire.Frame{Kind: core.Kind(e.Comm), Src: core.NodeID(e.Src), Payload: e.Payload})
}

// processesOf returns the transport ids of world rank r's processes.
func (s *Session) processesOf(r int) []core.NodeID {
	if s.rep == nil {
		return []core.NodeID{core.NodeID(r)}
	}
	ps := make([]core.NodeID, s.rep.layout.Replicas)
	for j := range ps {
		ps[j] = s.rep.layout.Phys(r, j)
	}
	return ps
}

// pollingRanks is how many ranks of a job share self's host for the
// readers' polling (readerSpinFor): its processes, or with replicas
// (replicas > 1) whose processes of one host talk over shared-memory
// rings (rings), the logical ranks with a process there. Of a rank's
// replicas only its master keeps pace with its peers: data to the others
// leave in batches (replicalazy.go), so they are parked but for one
// wake-up per batch, and do not take the cores that polling needs. A
// replicated pair on two cores then polls as an unreplicated pair does;
// a job with more logical ranks than cores still parks. Over sockets
// (loopback TCP, the Unix socket) each look is a system call, and paired
// runs of a replicated pair on two cores were slower polling them. addrs
// are the processes' addresses, in process order.
func pollingRanks(addrs []string, self, replicas int, rings bool) int {
	local := localRanks(addrs, self)
	if !rings || replicas <= 1 || self < 0 || self >= len(addrs) || len(addrs)%replicas != 0 {
		return local
	}
	layout := replica.Layout{Ranks: len(addrs) / replicas, Replicas: replicas}
	mine := hostIP(addrs[self])
	ranks := make(map[int]bool)
	for p, a := range addrs {
		ip := hostIP(a)
		if ip != nil && mine != nil && (ip.Equal(mine) || ip.IsLoopback() && mine.IsLoopback()) {
			ranks[layout.Rank(core.NodeID(p))] = true
		}
	}
	return max(len(ranks), 1)
}

// pollMaxSend is the largest data send after which a replicated rank's
// readers keep polling (pollForSend).
const pollMaxSend = 16 << 10

// pollForSend turns the readers' polling off while the program sends
// messages of more than pollMaxSend bytes, and back on below: polling
// pays when the answer comes within the polling time, and a replicated
// round trip of 16 KiB or more on a shared host takes longer, so the
// readers would spin for nothing on the cores the copies need. In runs
// of 2,000 round trips of a replicated pair on two cores, polling took
// 11.8 µs against 18 at 1 KiB, 13 against 23 at 8 KiB, but 31 against
// 21.5 at 16 KiB and 69 against 44.5 at 64 KiB.
func (r *replicated) pollForSend(n int) {
	if r.pollTime == 0 || r.sess.tcpTr == nil {
		return
	}
	off := n > pollMaxSend
	if off == r.pollOff.Load() {
		return
	}
	r.pollOff.Store(off)
	spin := r.pollTime
	if off {
		spin = 0
	}
	_ = r.sess.tcpTr.SetSpin(spin) // Init checked pollTime
}
