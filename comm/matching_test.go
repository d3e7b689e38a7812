// TestMatchingScripts replays the scripts of testdata/matching: each file
// is a scenario of MPI's matching rules, played against the matching engine
// of one session (rank 0 of a world of four ranks) whose transport records
// the frames the engine sends instead of sending them. No rank runs: the
// script says what arrives, in which order, and what rank 0 posts.
//
// Commands (src and tag take a rank or tag, or "any"; comm, default 0,
// names a communicator made by dup):
//
//	post recv src=1 tag=5 [buf=64] [comm=0]
//		posts a receive (Irecv) of a buffer of buf bytes; it is named r1,
//		r2, … in the order receives and probes are posted
//	probe src=1 tag=5 [comm=0]
//		posts a blocking probe (Probe) as a request that completes when a
//		matching message is queued
//	iprobe src=1 tag=5 [comm=0]
//		looks for a matching queued message without waiting (Iprobe)
//	arrive src=1 tag=5 [size=8] [rdv] [comm=0]
//		a message from rank src arrives: eager (its data, size bytes,
//		default the length of its name) or, with rdv, a ready-to-send of
//		a large message (rendezvous.go); messages are named m1, m2, … in
//		arrival order, and an eager message's data is its name padded
//		with dots, so that a receive's buffer shows which message it got
//	cancel req=3
//		cancels request r3 (Request.Cancel)
//	fail rank=2
//		world rank 2 fails, as a membership view excluding it says
//		(Session.fail); rank=(2,3) fails several at once
//	ack [comm=0]
//		acknowledges the failures known (Comm.AckFailed)
//	dup
//		makes a new communicator (Comm.Dup) of the world and prints its
//		number
//	show [comm=0]
//		lists the posted receives, the waiting probes and the unexpected
//		messages of a communicator's point-to-point context, in order
//
// After each command, the output lists what the command caused, in this
// order: an arrival that no receive took ("m2 unexpected"), each request
// that completed or was matched to a ready-to-send ("r1 received m2:
// src=1 tag=5 count=8", "r2 probed: …", "r3 matched m4 (rendezvous): …,
// waiting for the data", "r4 cancelled", "r5 failed: …"; a receive whose
// buffer was left untouched "received no data"), then each frame the
// engine sent ("send cts to=1 for m4").
//
// Regenerate the expected outputs after a change of behaviour with
//
//	go test ./comm -run TestMatchingScripts -rewrite
//
// and review the diff of testdata/matching: it is the test.

package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest/scripttest"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

func TestMatchingScripts(t *testing.T) {
	scripttest.Walk(t, "testdata/matching", func(t *testing.T, path string) {
		h := newMatchHarness(t, 4)
		scripttest.Run(t, path, h.do)
	})
}

// recordTransport is a transport that keeps the frames sent to it.
type recordTransport struct {
	mu     sync.Mutex
	frames []recordedFrame
}

type recordedFrame struct {
	to core.NodeID
	f  wire.Frame
}

func (r *recordTransport) Self() core.NodeID            { return 0 }
func (r *recordTransport) Addr() string                 { return "record:0" }
func (r *recordTransport) SetPeer(core.NodeID, string)  {}
func (r *recordTransport) RemovePeer(core.NodeID)       {}
func (r *recordTransport) SetHandler(transport.Handler) {}
func (r *recordTransport) Close() error                 { return nil }
func (r *recordTransport) Send(_ context.Context, to core.NodeID, f wire.Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f.Payload = slices.Clone(f.Payload)
	r.frames = append(r.frames, recordedFrame{to, f})
	return nil
}

func (r *recordTransport) take() []recordedFrame {
	r.mu.Lock()
	defer r.mu.Unlock()
	fs := r.frames
	r.frames = nil
	return fs
}

// matchHarness drives the matching engine of one session for a script.
type matchHarness struct {
	t     *testing.T
	tr    *recordTransport
	s     *Session
	comms []*Comm
	reqs  []*harnessReq // r1 is reqs[0]
	msgs  int           // messages arrived
}

type harnessReq struct {
	r       *Request
	buf     []byte
	probe   bool
	matched bool // reported matched to a ready-to-send
	done    bool // reported complete
}

func newMatchHarness(t *testing.T, n int) *matchHarness {
	tr := &recordTransport{}
	s := newSessionAs(tr, 0, n, options{})
	t.Cleanup(s.stop)
	return &matchHarness{t: t, tr: tr, s: s, comms: []*Comm{s.World()}}
}

func (h *matchHarness) do(t *testing.T, c *scripttest.Cmd) string {
	var out []string
	switch c.Name {
	case "post":
		if !c.Has("recv") {
			t.Fatalf("%s: post what? (post recv …)", c.Pos)
		}
		cm := h.comm(c)
		buf := make([]byte, c.IntOr(t, "buf", 64))
		r := cm.Irecv(buf, h.rank(c, "src"), h.rank(c, "tag"))
		id := h.add(&harnessReq{r: r, buf: buf})
		if h.pending(r) {
			out = append(out, fmt.Sprintf("r%d posted", id))
		}
	case "probe":
		cm := h.comm(c)
		src, tag := h.rank(c, "src"), h.rank(c, "tag")
		if err := cm.checkSource(src, tag); err != nil {
			t.Fatalf("%s: %v", c.Pos, err)
		}
		// As Comm.Probe does, without blocking.
		r := newRequest(h.s, cm.st)
		h.s.post(cm.st, subP2P, &recvOp{src: cm.node(src), tag: tag, anyV: true, probe: true, req: r})
		id := h.add(&harnessReq{r: r, probe: true})
		if h.pending(r) {
			out = append(out, fmt.Sprintf("r%d waiting", id))
		}
	case "iprobe":
		st, ok, err := h.comm(c).Iprobe(h.rank(c, "src"), h.rank(c, "tag"))
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("error: %v", err))
		case ok:
			out = append(out, "found: "+statusString(st))
		default:
			out = append(out, "none")
		}
	case "arrive":
		out = append(out, h.arrive(t, c)...)
	case "cancel":
		id := c.Int(t, "req")
		if id < 1 || id > len(h.reqs) {
			t.Fatalf("%s: no request r%d", c.Pos, id)
		}
		hr := h.reqs[id-1]
		if hr.matched && !hr.done {
			// Cancel would wait for the data, which no command delivers.
			t.Fatalf("%s: r%d waits for the data of a rendezvous: Cancel would block", c.Pos, id)
		}
		if !hr.r.Cancel() {
			out = append(out, fmt.Sprintf("r%d not cancelled: complete", id))
		}
	case "fail":
		h.s.fail(c.Ints(t, "rank"), 1)
	case "ack":
		h.comm(c).AckFailed()
	case "dup":
		d, err := h.comms[0].Dup()
		if err != nil {
			t.Fatalf("%s: %v", c.Pos, err)
		}
		h.comms = append(h.comms, d)
		out = append(out, fmt.Sprintf("comm %d", len(h.comms)-1))
	case "show":
		out = append(out, h.show(h.comm(c))...)
	default:
		t.Fatalf("%s: unknown command %q", c.Pos, c.Name)
	}
	out = append(out, h.report()...)
	out = append(out, h.frames()...)
	return strings.Join(out, "\n")
}

// arrive delivers a message as the session's inbound path does.
func (h *matchHarness) arrive(t *testing.T, c *scripttest.Cmd) []string {
	cm := h.comm(c)
	src, tag := h.rank(c, "src"), h.rank(c, "tag")
	if src == AnySource || tag == AnyTag {
		t.Fatalf("%s: a message has a source and a tag", c.Pos)
	}
	h.msgs++
	name := fmt.Sprintf("m%d", h.msgs)
	size := c.IntOr(t, "size", len(name))
	node := int(cm.st.members[src])
	ctxID := cm.st.id | subP2P
	h.s.mu.Lock()
	queued := len(h.s.queueLocked(ctxID).unexpected)
	h.s.mu.Unlock()
	if c.Has("rdv") {
		p := binary.AppendUvarint(nil, uint64(h.msgs))
		p = binary.AppendUvarint(p, ctxID)
		p = binary.AppendVarint(p, int64(tag))
		p = binary.AppendUvarint(p, uint64(size))
		if err := h.s.onRTS(node, p); err != nil {
			t.Fatalf("%s: %v", c.Pos, err)
		}
	} else {
		data := []byte(strings.Repeat(".", max(size, len(name))))
		copy(data, name)
		h.s.deliver(node, ctxID, tag, 0, data[:size], false)
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if q := h.s.queueLocked(ctxID); len(q.unexpected) > queued {
		return []string{name + " unexpected"}
	}
	return nil
}

// report lists the requests that completed, or were matched to a
// ready-to-send, since the last report.
func (h *matchHarness) report() []string {
	h.s.mu.Lock()
	rdv := map[*Request]string{}
	for k, in := range h.s.rdvIn {
		rdv[in.op.req] = fmt.Sprintf("m%d (rendezvous): %s", k.id, statusString(in.st))
	}
	h.s.mu.Unlock()
	var out []string
	for i, hr := range h.reqs {
		id := i + 1
		if hr.done {
			continue
		}
		if st, done, err := hr.r.Test(); done {
			hr.done = true
			out = append(out, fmt.Sprintf("r%d %s", id, outcome(hr, st, err)))
			continue
		}
		if m, ok := rdv[hr.r]; ok && !hr.matched {
			hr.matched = true
			out = append(out, fmt.Sprintf("r%d matched %s, waiting for the data", id, m))
		}
	}
	return out
}

func outcome(hr *harnessReq, st Status, err error) string {
	switch {
	case err == context.Canceled:
		return "cancelled"
	case hr.probe && err == nil:
		return "probed: " + statusString(st)
	case hr.probe, err != nil && !isTruncate(err):
		return "failed: " + err.Error()
	}
	n := min(st.Count, len(hr.buf))
	got := dataName(hr.buf[:n])
	if !slices.ContainsFunc(hr.buf[:n], func(b byte) bool { return b != 0 }) {
		got = "no data" // the buffer as posted
	}
	s := fmt.Sprintf("received %s: %s", got, statusString(st))
	if err != nil {
		s += ", error: " + err.Error()
	}
	return s
}

// dataName names the message whose data b is (or starts with), or quotes
// b if it names none.
func dataName(b []byte) string {
	if name := strings.TrimRight(string(b), "."); msgNameRE.MatchString(name) {
		return name
	}
	return "data=" + strconv.Quote(string(b))
}

var msgNameRE = regexp.MustCompile(`^m[0-9]+$`)

// frames lists the frames the engine sent since the last call.
func (h *matchHarness) frames() []string {
	var out []string
	for _, fr := range h.tr.take() {
		switch fr.f.Kind {
		case kindCTS:
			id, flag, credit, err := parseCTS(fr.f.Payload)
			if err != nil {
				h.t.Fatalf("a clear-to-send that does not parse: %v", err)
			}
			s := fmt.Sprintf("send cts to=%d for m%d", fr.to, id)
			if flag == 1 {
				s += " (truncated: do not send the data)"
			}
			if credit != 0 {
				s += fmt.Sprintf(" credit=%d", credit)
			}
			out = append(out, s)
		case kindCredit:
			n, err := parseCredit(fr.f.Payload)
			if err != nil {
				h.t.Fatalf("a credit frame that does not parse: %v", err)
			}
			out = append(out, fmt.Sprintf("send credit to=%d bytes=%d", fr.to, n))
		default:
			out = append(out, fmt.Sprintf("send %v to=%d", fr.f.Kind, fr.to))
		}
	}
	return out
}

// show lists the matching state of cm's point-to-point context.
func (h *matchHarness) show(cm *Comm) []string {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	q := h.s.queueLocked(cm.st.id | subP2P)
	ops := func(l []*recvOp) string {
		var ws []string
		for _, op := range l {
			ws = append(ws, fmt.Sprintf("r%d(src=%s tag=%s)", h.idOf(op.req), h.rankName(cm, op.src), tagName(op.tag)))
		}
		return listOrNone(ws)
	}
	var ms []string
	for _, m := range q.unexpected {
		r, _ := cm.st.rankOf(m.src)
		w := fmt.Sprintf("%s(src=%d tag=%d size=%d", msgName(m), r, m.tag, h.s.statusLocked(q, &m).Count)
		if m.rdv != 0 {
			w += " rdv"
		}
		ms = append(ms, w+")")
	}
	return []string{
		"posted: " + ops(q.posted),
		"probes: " + ops(q.probes),
		"unexpected: " + listOrNone(ms),
	}
}

func listOrNone(ws []string) string {
	if len(ws) == 0 {
		return "none"
	}
	return strings.Join(ws, " ")
}

// msgName names a queued message: m<id> of its ready-to-send, or the name
// its data starts with.
func msgName(m message) string {
	if m.rdv != 0 {
		return fmt.Sprintf("m%d", m.rdv)
	}
	return dataName(m.data)
}

func (h *matchHarness) add(hr *harnessReq) int {
	h.reqs = append(h.reqs, hr)
	return len(h.reqs)
}

func (h *matchHarness) idOf(r *Request) int {
	for i, hr := range h.reqs {
		if hr.r == r {
			return i + 1
		}
	}
	h.t.Fatal("a request the script did not post")
	return 0
}

// pending reports whether r neither completed nor was matched to a
// ready-to-send.
func (h *matchHarness) pending(r *Request) bool {
	if r.isDone() {
		return false
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	for _, in := range h.s.rdvIn {
		if in.op.req == r {
			return false
		}
	}
	return true
}

func (h *matchHarness) comm(c *scripttest.Cmd) *Comm {
	i := c.IntOr(h.t, "comm", 0)
	if i < 0 || i >= len(h.comms) {
		h.t.Fatalf("%s: no communicator %d (make one with dup)", c.Pos, i)
	}
	return h.comms[i]
}

// rank returns argument key as a rank or tag: "any" is AnySource (AnyTag).
func (h *matchHarness) rank(c *scripttest.Cmd, key string) int {
	if c.StringOr(h.t, key, "") == "any" {
		return AnySource
	}
	return c.Int(h.t, key)
}

func (h *matchHarness) rankName(cm *Comm, n core.NodeID) string {
	if n == core.None {
		return "any"
	}
	r, _ := cm.st.rankOf(n)
	return strconv.Itoa(r)
}

func tagName(tag int) string {
	if tag == AnyTag {
		return "any"
	}
	return strconv.Itoa(tag)
}

func statusString(st Status) string {
	return fmt.Sprintf("src=%d tag=%d count=%d", st.Source, st.Tag, st.Count)
}
