// Package record is the vocabulary of a job's event streams: the events a
// node writes besides those of its machines ([Listening], [PingPong],
// [TreeEchoTime], [EchoOnce], [ProcessTime], [Hint], [PeerAdded], [FailureInjected],
// [Reports], [Exit], [MulticastReport]), the records an orchestrator adds
// ([Spawned], [Killed], [Exited]), and [Record], one decoded line of a
// stream ([DecodeRecord]; [EncodeLine] and [WriteLine] write them). In a
// stream these events' type is "record.Name"; the streams' other lines are
// the machines' events (member.ViewInstalled, core.Failed, …) as
// host.EventLine writes them.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport/tcp"
)

// Events a node writes to its stream besides those of its machines. In the
// stream their type is "record.Name".

// Listening is written by a supervised node once its transport listens,
// before it waits for the word "start".
type Listening struct {
	Addr string
	PID  int
}

// PingPong reports a ping-pong between this node and Peer over the job's
// transport and host loop (the path every protocol message takes): Count
// round trips after the warm-up ones, their minimum, median, mean and
// maximum. Half the median is the point-to-point latency L of the
// membership paper's base model (§4: "half the round-trip time in a
// ping-pong experiment").
type PingPong struct {
	Peer   core.NodeID
	Count  int
	Min    time.Duration
	Median time.Duration
	Mean   time.Duration
	Max    time.Duration
}

// TreeEchoTime reports the tree echoes the root ran over its view right
// after its ping-pong (see [workload.TreeEcho]): the time from sending an echo to
// its children until every member's answer came back up, on the root's
// monotonic clock. It is the floor of the stabilization time on this
// machine: the same messages along the same tree, with nothing computed.
type TreeEchoTime struct {
	Fanout, Members int
	Count           int
	Min             time.Duration
	Median          time.Duration
	Max             time.Duration
}

// EchoOnce reports one tree echo the root ran alone, when its
// supervisor asked for it ([workload.StartEcho]): the time from sending it
// to its children until every member's answer came back up, on the root's
// monotonic clock. Unlike [TreeEchoTime], whose echoes follow one another
// with the nodes' loops, caches and threads kept busy, it starts from
// whatever idle state the job is in, as a stabilization does: it is the
// floor of one stabilization after the same wait. Err says why no echo
// ran (this node is not its view's root, or an echo is under way).
type EchoOnce struct {
	Fanout, Members int
	Took            time.Duration
	Err             string `json:",omitempty"`
}

// ProcessTime reports how long the membership machine took to handle one
// proposal, on the node's monotonic clock: Kind is its paper name
// (FAILED_NODE, ROOT_DEAD, NEW_NODE_JOIN, …), Epoch the proposed view,
// From its sender (the node's parent in the new tree). For FAILED_NODE it is the computation overhead O_cp of
// the paper (§4: "the time for updating the tree structure on a local
// node"), including handing the message to the children's send queues.
//
// At is when the node began handling it, on the node's monotonic clock
// (the clock of Record.Uptime). The record is written once the node has
// installed the view or stabilized it, after the stabilization it times,
// so that writing it takes nothing from the stabilization.
type ProcessTime struct {
	Kind  string
	Epoch uint64
	From  core.NodeID
	At    time.Duration
	Took  time.Duration
}

// Began returns when the node whose record r is began handling the
// proposal e (r.Event): r's wall clock, moved back by the time on the
// node's monotonic clock from e.At to when r was written.
func (e ProcessTime) Began(r Record) time.Time { return r.Time.Add(e.At - r.Uptime) }

// Hint reports a transport-level problem with Node, as the host passed it
// to the machines (a refused dial, a failed handshake, a lost connection):
// the first hint of an episode, which ends when a message from Node
// arrives.
type Hint struct {
	Node   core.NodeID
	Reason string
}

// PeerAdded is written by a supervised node once it has added Peer's
// address (told by its supervisor) to its address book.
type PeerAdded struct {
	Peer core.NodeID
	Addr string
}

// FailureInjected is written by a supervised node just before it hands
// core.Failed{Node} to its machines on its supervisor's "fail" line (the
// benchmark's single reporter, `--report one`).
type FailureInjected struct {
	Node core.NodeID
}

// Reports is emitted by a root right after each member.Stabilized: the
// failure reports (NODE_FAILURE and ROOT_FAILURE messages) this node
// received since it last installed a view or stabilized one, and their
// distinct senders in order of first arrival. It is written after the
// stabilization, so it does not delay it.
type Reports struct {
	Epoch uint64 // the stabilized view
	Count int
	From  []core.NodeID
}

// Exit is the last line of a node that stopped on request: the counters of
// its transport and host.
type Exit struct {
	Transport tcp.Stats
	Host      host.Stats
	Err       string `json:",omitempty"`
}

// Records the orchestrator adds to a job's record list.

// Killed records that the orchestrator sent SIGKILL to the node.
type Killed struct{}

// Exited records that a node's process ended (ExitCode -1 when it died of a
// signal).
type Exited struct {
	ExitCode int
	Err      string `json:",omitempty"`
}

// Spawned records that the orchestrator started the node's process.
type Spawned struct {
	PID  int
	Addr string
	Join bool
}

// Record is one line of a node's event stream, decoded, or one record of
// the orchestrator.
type Record struct {
	Node   core.NodeID
	Time   time.Time     // wall clock of the node (or the orchestrator)
	Uptime time.Duration // the node's monotonic clock; 0 for orchestrator records
	Type   string        // "member.ViewInstalled", "record.Killed", …
	// Event is the decoded event: a value of member.ViewInstalled,
	// member.Stabilized, member.StabilizationStarted, member.Evicted,
	// core.MembersChanged, core.Suspected, core.Failed, Listening,
	// PingPong, TreeEchoTime, EchoOnce, ProcessTime, Hint,
	// PeerAdded, FailureInjected, Reports,
	// Exit, Killed, Exited or Spawned; a json.RawMessage for other types.
	Event any
	// CPU is the processor time the whole process had used when the
	// record was taken (user and system, all threads), set by in-process
	// jobs on the records whose intervals the benchmarks measure (Killed,
	// PingPong, TreeEchoTime, EchoOnce, member.Stabilized); 0 otherwise.
	CPU time.Duration
}

// ErrRecord is wrapped by the errors of [DecodeRecord].
var ErrRecord = errors.New("record: bad event line")

// DecodeRecord decodes one line of an event stream.
func DecodeRecord(line []byte) (Record, error) {
	var l host.EventLine
	if err := json.Unmarshal(line, &l); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	r := Record{Node: l.Node, Time: l.Time, Uptime: time.Duration(l.UptimeNs), Type: l.Type}
	k, ok := known[l.Type]
	if !ok {
		r.Event = l.Fields
		return r, nil
	}
	var err error
	if r.Event, err = k.decode(l.Fields); err != nil {
		return Record{}, fmt.Errorf("%w: %s: %v", ErrRecord, l.Type, err)
	}
	return r, nil
}

// FromEvent returns the record of event ev, emitted by node at wall-clock
// time at and uptime, as [DecodeRecord] returns it from the line a host
// writes for ev (host.Config.Events), without encoding and decoding the
// line: a value of a type Record.Event lists is kept as it is (a pointer
// to one is read), any other event becomes its encoded fields (a
// json.RawMessage). This is how a
// process that runs the hosts itself (host.Config.OnEvent) takes their
// records off their loops at the cost of a copy. The value shares ev's
// slices, which the emitting machine no longer modifies (member's views
// are immutable); readers must not modify them either.
func FromEvent(node core.NodeID, at time.Time, uptime time.Duration, ev core.Event) Record {
	r := Record{Node: node, Time: at, Uptime: uptime, Type: host.EventType(ev), Event: ev}
	k, ok := known[r.Type]
	if ok && reflect.TypeOf(ev) == k.typ {
		return r // already the value a record holds: kept as it is, not copied
	}
	v := reflect.ValueOf(ev)
	for ok && v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem() // the line holds the pointed-to value
	}
	if !ok || !v.IsValid() || v.Type() != k.typ {
		r.Event = host.EventFields(ev)
		return r
	}
	r.Event = v.Interface()
	return r
}

// knownType is an event type that records hold as values: its Go type and
// its decoder.
type knownType struct {
	typ    reflect.Type
	decode func(json.RawMessage) (any, error)
}

// known maps the event-stream name of each type Record.Event lists to it.
var known = map[string]knownType{}

func init() {
	register[member.ViewInstalled]()
	register[member.Stabilized]()
	register[member.StabilizationStarted]()
	register[member.Evicted]()
	// Every member emits one at every view change, with the whole member
	// list: encoded, it was a twelfth of an in-process benchmark's
	// processor time at n = 256, on the nodes' own loops.
	register[core.MembersChanged]()
	register[core.Suspected]()
	register[core.Failed]()
	register[Listening]()
	register[PingPong]()
	register[TreeEchoTime]()
	register[EchoOnce]()
	register[ProcessTime]()
	register[Hint]()
	register[FailureInjected]()
	register[Reports]()
	register[PeerAdded]()
	register[Exit]()
	register[Killed]()
	register[Exited]()
	register[Spawned]()
}

func register[T any]() {
	var zero T
	known[host.EventType(zero)] = knownType{typ: reflect.TypeOf(zero), decode: func(raw json.RawMessage) (any, error) {
		return decodeAs[T](raw)
	}}
}

func decodeAs[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// EncodeLine renders a record in the event-stream format.
func EncodeLine(r Record) []byte {
	fields, err := json.Marshal(r.Event)
	if err != nil {
		fields, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	b, err := json.Marshal(host.EventLine{Time: r.Time.UTC(), UptimeNs: int64(r.Uptime), Node: r.Node, Type: r.Type, Fields: fields})
	if err != nil {
		panic(fmt.Sprintf("record: encoding an event line: %v", err)) // fields is valid JSON
	}
	return append(b, '\n')
}

// WriteLine writes one event line of this package's type name for e.
func WriteLine(w io.Writer, node core.NodeID, uptime time.Duration, typ string, e any) error {
	_, err := w.Write(EncodeLine(Record{Node: node, Time: time.Now(), Uptime: uptime, Type: "record." + typ, Event: e}))
	return err
}

// MulticastReport is emitted by a node's multicast layer every
// MulticastOptions.Report: cumulative counters since the layer started,
// the buffers now and at their peak, and a histogram of the delivery
// latency of other nodes' messages delivered since the previous report
// (send time stamp in the payload to delivery, both on this machine's wall
// clock). Epoch and Members describe the application's view.
type MulticastReport struct {
	Epoch          uint64
	Members        int
	Sent           uint64 // own messages multicast
	Delivered      uint64 // messages delivered, own included
	DeliveredBytes uint64 // their payload bytes
	Throttled      uint64 // generator turns skipped: the send queue was full
	Refused        uint64
	Resent         uint64 // data messages sent again on a NACK
	Nacks          uint64
	Late           uint64 // messages of a view the node had left
	Flushes        uint64
	Buffered       int // messages held now (all views)
	BufferedBytes  int
	PeakBuffered   int
	PeakBytes      int
	Queued         int // multicasts waiting for the window
	// LatFrom and Lat are the latency histogram: Lat[i] messages took
	// between LatencyBucketStart(LatFrom+i) and LatencyBucketStart(LatFrom+i+1).
	LatFrom int
	Lat     []uint64
}

// latency histogram: bucket b holds [1 µs·r^b, 1 µs·r^(b+1)) with
// r = 1.1, so percentiles are within 10%.
const (
	latRatio       = 1.1
	LatencyBuckets = 220 // up to 1 µs·1.1^220 ≈ 1.3·10^9 µs
)

// LatencyBucket returns the histogram bucket of latency d.
func LatencyBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return min(int(math.Log(us)/math.Log(latRatio)), LatencyBuckets-1)
}

// LatencyBucketStart returns the lower bound of bucket b.
func LatencyBucketStart(b int) time.Duration {
	return time.Duration(math.Pow(latRatio, float64(b)) * float64(time.Microsecond))
}
