package member

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest/scripttest"
)

// TestScripts replays the scenarios of testdata/*.txt, the paper's
// walk-throughs (§3.2 to §3.7) and the cases the implementation adds to
// them, on a script: Members on scripted environments, every message in one
// FIFO queue, delivered, lost and timed only as the script says.
//
// Commands that deliver messages print them in delivery order, one a line,
// "n5->n0 NODE_FAILURE [n1]"; a message to a crashed node or across a
// partition ends in " (lost)", one a drop rule takes in " (dropped)".
// Commands that only feed the machines (detector verdicts, crashes, the
// clock) print nothing: what they cause shows at the next delivery, and in
// the events. The commands:
//
//	init n=7 [fanout=2] [policy=paper|majority] [probes]
//	    Starts nodes n0..n(n-1) from the initial member list, with
//	    ProbeInterval 0 (no periodic probes), or with probes the default
//	    one (a root probes the nodes outside its view every second, and
//	    a merge given up is retried at each probe). Prints nothing.
//	fail at=(5,6) node=(1) [mutual]
//	recovered at=(5,6) node=(1) [mutual]
//	    For each node of at in turn, and for each of node in turn, the
//	    failure detector of the first declares the second failed (fail) or
//	    alive again (recovered); mutual makes the second's detector say the
//	    same of the first right after. Prints nothing.
//	hear at=0 from=(4)
//	    Node at's stack shows it a message of another layer from each
//	    node of from (a heartbeat, say): core.TrafficObserver's
//	    ObserveReceive. Prints nothing.
//	crash node=(1,5)
//	    The nodes stop: they receive nothing more. Prints nothing.
//	leave node=(3)
//	    The nodes leave the group (LeaveRequest): each sends LEAVE to the
//	    members and takes no further part. Prints nothing.
//	notify at=0 node=(2,3) [final]
//	    Node at tells each of node that its view does not contain it
//	    (NotifyExcluded, Final with final). Prints nothing.
//	partition a=(0,1) b=(2,3,4)
//	    Messages between groups (any names, one list each) are lost; nodes
//	    in no group form one more group. Prints nothing.
//	heal
//	    Ends the partition. Prints nothing.
//	join node=5 contacts=(3,0) [recovered]
//	    Starts node 5 as a joiner (a recovered process with recovered) that
//	    asks its contacts in order. Prints "n5 incarnation 42".
//	drop [from=2] [to=5] [kind=FAILURE_ACK] [type=Prepare] [count=1]
//	    Loses the matching messages when their turn comes (count of them,
//	    or all until "drop clear"); kind is a kind name, type a message
//	    type (Prepare, Ack, Commit, JoinDetAck, ...). Prints nothing.
//	step [count=4]
//	    Delivers the count oldest queued messages (1 by default). Prints
//	    them.
//	deliver [hop=1ms]
//	    Delivers until the queue is empty; hop moves the clock by that much
//	    before each delivery (no timer fires: it only dates events). Prints
//	    the messages.
//	advance d=AckTimeout
//	    Moves every live node's clock by d, firing due timers; d is a
//	    duration ("200ms") or a sum of [k*]Config field terms
//	    ("CommitTimeout+9*AckTimeout"). Prints nothing.
//	rounds n=100 d=50ms [at=(0) from=(1)]
//	    Delivers until the queue is empty and advances the clock by d, n
//	    times; with at and from, each node of at hears from each node of
//	    from (as hear does) at the start of every round. Prints the
//	    messages.
//	queue
//	    Prints the queued messages without delivering them.
//	events [times] [detector]
//	    Prints the events emitted since the last "events" and forgets them:
//	    "n0 starts 2.n0 FAILED_NODE -[n1] +[]", "n0 aborts 2.n0", "n0 stable
//	    2.n0", "n2 installs 2.n0 [n0 n2]", "n3 evicted by 2.n0", "n0
//	    minority 1.n0 2/5", "n1 hears n3 leaves"; an install that
//	    excludes leavers ends in " left [n3]". times adds the instants of stabilizations
//	    (began=, at=); detector adds the MembersChanged events the failure
//	    detector gets ("n0 detector 2.n0 [n0 n1] renew [n1]").
//	view [at=(0,1)] [incs]
//	    Prints the installed view of each node (of every live node by
//	    default), "n0 2.n0 [n0 n2 n3]", followed by " pending 3.n2 [n2 n0]"
//	    when the node holds an accepted proposal, and "n5 joining" for a
//	    node not yet admitted; incs writes the members admitted with an
//	    incarnation as "n3@42".
//	tree at=3
//	    Prints the radix tree of node 3's installed view, a line per
//	    member: "n1 parent n0 children [n3 n4]".
func TestScripts(t *testing.T) {
	scripttest.Walk(t, "testdata", func(t *testing.T, path string) {
		var s *script
		scripttest.Run(t, path, func(t *testing.T, c *scripttest.Cmd) string {
			if c.Name != "init" && s == nil {
				t.Fatalf("%s: %s before init", c.Pos, c.Name)
			}
			if c.Name == "init" {
				s = initScript(t, c)
				return ""
			}
			return s.run(t, c)
		})
	})
}

// initScript starts the nodes of an init command.
func initScript(t *testing.T, c *scripttest.Cmd) *script {
	cfg := DefaultConfig()
	cfg.Fanout = c.IntOr(t, "fanout", 2)
	if !c.Has("probes") {
		cfg.ProbeInterval = 0
	}
	switch p := c.StringOr(t, "policy", "paper"); p {
	case "paper":
		cfg.Partition = PartitionPaper
	case "majority":
		cfg.Partition = PartitionMajority
	default:
		t.Fatalf("%s: unknown policy %q", c.Pos, p)
	}
	return newScriptCfg(t, cfg, c.Int(t, "n"))
}

// run carries out one command of a script and returns its output.
func (s *script) run(t *testing.T, c *scripttest.Cmd) string {
	switch c.Name {
	case "fail", "recovered":
		tell := s.fail
		if c.Name == "recovered" {
			tell = s.recovered
		}
		for _, at := range nodeIDs(t, c, "at") {
			for _, x := range nodeIDs(t, c, "node") {
				tell(at, x)
				if c.Has("mutual") {
					tell(x, at)
				}
			}
		}
	case "hear":
		for _, at := range nodeIDs(t, c, "at") {
			for _, x := range nodeIDs(t, c, "from") {
				s.hear(at, x)
			}
		}
	case "crash":
		for _, id := range nodeIDs(t, c, "node") {
			s.crash(id)
		}
	case "leave":
		for _, id := range nodeIDs(t, c, "node") {
			s.leave(id)
		}
	case "notify":
		s.nodes[core.NodeID(c.Int(t, "at"))].m.Handle(NotifyExcluded{Nodes: nodeIDs(t, c, "node"), Final: c.Has("final")})
		s.collect(core.NodeID(c.Int(t, "at")))
	case "partition":
		var groups [][]core.NodeID
		for _, a := range c.Args {
			groups = append(groups, nodeIDs(t, c, a.Key))
		}
		s.partition(groups...)
	case "heal":
		s.heal()
	case "join":
		id := core.NodeID(c.Int(t, "node"))
		m := s.join(id, c.Has("recovered"), nodeIDs(t, c, "contacts")...)
		return fmt.Sprintf("%v incarnation %d", id, m.Incarnation())
	case "drop":
		if c.Has("clear") {
			s.rules = nil
			break
		}
		r := dropRule{from: core.None, to: core.None, kind: c.StringOr(t, "kind", ""), typ: c.StringOr(t, "type", ""), count: c.IntOr(t, "count", 0)}
		if c.Has("from") {
			r.from = core.NodeID(c.Int(t, "from"))
		}
		if c.Has("to") {
			r.to = core.NodeID(c.Int(t, "to"))
		}
		s.rules = append(s.rules, r)
	case "step":
		for range c.IntOr(t, "count", 1) {
			if !s.step() {
				t.Fatalf("%s: the queue is empty", c.Pos)
			}
		}
		return strings.Join(s.takeTrace(), "\n")
	case "deliver":
		hop := s.duration(t, c, c.StringOr(t, "hop", "0s"))
		for i := 0; ; i++ {
			if i > 100000 {
				t.Fatalf("%s: message storm", c.Pos)
			}
			s.now += hop
			if !s.step() {
				break
			}
		}
		return strings.Join(s.takeTrace(), "\n")
	case "advance":
		s.advance(s.duration(t, c, c.StringOr(t, "d", "")))
	case "rounds":
		d := s.duration(t, c, c.StringOr(t, "d", ""))
		var trace []string
		var at, from []core.NodeID
		if c.Has("at") {
			at, from = nodeIDs(t, c, "at"), nodeIDs(t, c, "from")
		}
		for range c.Int(t, "n") {
			for _, a := range at {
				for _, x := range from {
					s.hear(a, x)
				}
			}
			s.deliver()
			trace = append(trace, s.takeTrace()...)
			s.advance(d)
		}
		return strings.Join(trace, "\n")
	case "queue":
		var out []string
		for _, q := range s.queue {
			out = append(out, fmt.Sprintf("%v->%v %s", q.from, q.to, scriptDescribe(q.m)))
		}
		return strings.Join(out, "\n")
	case "events":
		return strings.Join(s.takeEventsAs(eventFormat{times: c.Has("times"), detector: c.Has("detector")}), "\n")
	case "view":
		at := s.ids
		if c.Has("at") {
			at = nodeIDs(t, c, "at")
		}
		var out []string
		for _, id := range at {
			if c.Has("at") || !s.nodes[id].down {
				out = append(out, s.describeView(id, c.Has("incs")))
			}
		}
		return strings.Join(out, "\n")
	case "tree":
		return strings.Join(s.tree(core.NodeID(c.Int(t, "at"))), "\n")
	default:
		t.Fatalf("%s: unknown command %q", c.Pos, c.Name)
	}
	return ""
}

// describeView renders what node id holds: "n0 2.n0 [n0 n2 n3]", with its
// pending proposal if any.
func (s *script) describeView(id core.NodeID, incs bool) string {
	in := s.nodes[id].m.Inspect()
	if in.Installed == nil {
		return fmt.Sprintf("%v joining", id)
	}
	line := fmt.Sprintf("%v %s", id, describeState(in.Installed, incs))
	if in.Pending != nil {
		line += " pending " + describeState(in.Pending, incs)
	}
	return line
}

func describeState(v *ViewState, incs bool) string {
	members := make([]string, len(v.Members))
	for i, id := range v.Members {
		members[i] = id.String()
		if inc := v.Inc(id); incs && inc != 0 {
			members[i] += "@" + strconv.FormatUint(inc, 10)
		}
	}
	return fmt.Sprintf("%s [%s]", FormatEpoch(v.Epoch), strings.Join(members, " "))
}

// nodeIDs returns the values of argument key as node ids.
func nodeIDs(t *testing.T, c *scripttest.Cmd, key string) []core.NodeID {
	t.Helper()
	var out []core.NodeID
	for _, x := range c.Ints(t, key) {
		out = append(out, core.NodeID(x))
	}
	return out
}

// duration parses a duration argument: a Go duration ("200ms") or a sum of
// terms, each a duration or a Config field name with an optional integer
// factor ("CommitTimeout+9*AckTimeout").
func (s *script) duration(t *testing.T, c *scripttest.Cmd, arg string) time.Duration {
	t.Helper()
	fields := map[string]time.Duration{
		"AckTimeout":     s.cfg.AckTimeout,
		"ReportRetry":    s.cfg.ReportRetry,
		"JoinRetry":      s.cfg.JoinRetry,
		"CommitTimeout":  s.cfg.CommitTimeout,
		"NoticeInterval": s.cfg.NoticeInterval,
	}
	var sum time.Duration
	for term := range strings.SplitSeq(arg, "+") {
		k := 1
		if f, rest, ok := strings.Cut(term, "*"); ok {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s: duration %q: factor %q is not an integer", c.Pos, arg, f)
			}
			k, term = n, rest
		}
		d, ok := fields[term]
		if !ok {
			var err error
			if d, err = time.ParseDuration(term); err != nil {
				t.Fatalf("%s: duration %q: %q is neither a duration nor a Config duration", c.Pos, arg, term)
			}
		}
		sum += time.Duration(k) * d
	}
	return sum
}
