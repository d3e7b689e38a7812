package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/workload"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// Errors of a node.
var (
	// ErrListen: the node could not listen on its address (typically
	// "address already in use").
	ErrListen = errors.New("runner: cannot listen")
	// ErrSupervisor: a supervised node's standard input did not say
	// "start".
	ErrSupervisor = errors.New("runner: supervisor")

	errSupervisorGone = errors.New("runner: the supervisor's stream ended before \"start\"")
)

// NodeOptions configure one node beyond its bootstrap.
type NodeOptions struct {
	// Fanout is the radix tree's fan-out a (a power of two ≥ 2); 0 means
	// member.DefaultConfig's. Every node of a job must use the same.
	Fanout int
	// Detector is the failure detector; 0 means DetectorBRR.
	Detector Detector
	// QuietDetector runs the detector with its verdicts postponed by
	// [QuietDelay] ([Detector.NewQuiet]): failures are then reported only
	// by the supervisor's "fail" lines.
	QuietDetector bool
	// Join makes the node join the running group through the other listed
	// nodes (NEW_NODE, paper §3.7), in the listed order, instead of being
	// one of the initial members.
	Join bool
	// PingCount > 0 makes the node run a ping-pong of that many round trips
	// (after a warm-up) with PingPeer once it has a view, and emit a
	// [record.PingPong].
	PingPeer  core.NodeID
	PingCount int
	// Seed seeds the machines' random source; 0 draws one.
	Seed uint64
	// Events receives the node's event stream (JSON lines); nil writes none.
	Events io.Writer
	// Logger receives the host's and the transport's logs; nil discards.
	Logger *slog.Logger
	// Multicast, if not nil, adds the multicast workload layer (stability
	// detection, view-synchronous multicast and a load generator; see
	// [workload.MulticastOptions]). RunNode reads it from [workload.MulticastEnv] when nil.
	Multicast *workload.MulticastOptions
	// Supervisor, if not nil, makes the node supervised: after it listens
	// it writes a [record.Listening] event and waits for a line "start" on
	// Supervisor before it starts its machines; later lines
	// "peer <id>=<addr>" add nodes to its address book (each answered by
	// a [record.PeerAdded] event) and lines "fail <id>" hand core.Failed{Node: id}
	// to the machines as if this node's detector had declared it (each
	// preceded by a [record.FailureInjected] event), and a line "echo" hands
	// it [workload.StartEcho] (the root answers with a [record.EchoOnce]
	// event); once Supervisor ends (EOF),
	// the node stops as if its context were done.
	Supervisor io.Reader
}

// MemberConfig returns the membership configuration of a node with the
// given fan-out: member.DefaultConfig with 200 ms per tree level for
// acknowledgements (stack.DefaultLocalConfig: loopback is fast, but a
// loaded machine can stall a process for tens of milliseconds, and a late
// ACK excludes a live node).
func MemberConfig(fanout int) member.Config {
	c := member.DefaultConfig()
	if fanout != 0 {
		c.Fanout = fanout
	}
	c.AckTimeout = stack.DefaultLocalConfig().AckTimeout
	return c
}

// Node is the machine stack of one node: the failure detector, the
// membership machine and the probe layer (ping-pong and hints), lowest
// first, as package group assembles them.
type Node struct {
	Stack    *core.Stack
	Member   *member.Member
	Detector core.Machine // nil with DetectorOff
	Self     core.NodeID
	Fanout   int // the radix tree's fan-out in use
}

// keepLinks is a host's OnEvent for node: with every view it installs, tr
// keeps the connections of the view's tree open, and those of the next
// one's after a departure (stack.TreeLinks).
func (node *Node) keepLinks(tr any) func(time.Duration, core.Event) {
	return func(_ time.Duration, e core.Event) {
		if v, ok := e.(member.ViewInstalled); ok {
			stack.KeepTreeLinks(tr, v.Members, node.Self, node.Fanout)
		}
	}
}

// NewNode builds the stack of node self in a job whose nodes are listed
// (self among them). An initial member starts from the default view of the
// listed nodes (§3.2); a joiner (opts.Join) asks the other listed nodes, in
// order, to admit it.
func NewNode(self core.NodeID, listed []core.NodeID, opts NodeOptions) (*Node, error) {
	cfg := LocalConfig(self, opts.Detector, opts.Fanout)
	so := stack.Options{
		Join:          opts.Join,
		Contacts:      listed,
		QuietDetector: opts.QuietDetector,
		WrapMember:    func(m *member.Member) core.Machine { return workload.TimeMember(m) },
		Layers:        []core.Machine{workload.NewProbe(opts.PingPeer, opts.PingCount, cfg.Fanout)},
	}
	if opts.Multicast != nil {
		stableView := listed
		if opts.Join {
			stableView = []core.NodeID{self} // until its first view
		}
		stableView = slices.Sorted(slices.Values(stableView))
		ml, err := workload.NewMulticastLayer(*opts.Multicast, stableView)
		if err != nil {
			return nil, err
		}
		so.Layers = append(so.Layers, ml)
	}
	st, err := stack.New(cfg, listed, so)
	if err != nil {
		return nil, err
	}
	return &Node{Stack: st.Machine, Member: st.Member, Detector: st.Detector, Self: self, Fanout: cfg.Fanout}, nil
}

// NewCodec returns a codec with every kind a node sends: group's (fd,
// member, stable, vsync, the directory) and the probe layer's.
func NewCodec() (*wire.Codec, error) { return stack.NewCodec(workload.RegisterProbeCodecs) }

// RunNode runs one node of a job over TCP until ctx is done (or, supervised,
// its supervisor's stream ends). It returns nil after an orderly stop, and
// writes a final [record.Exit] event then.
func RunNode(ctx context.Context, boot Bootstrap, opts NodeOptions) error {
	if opts.Multicast == nil {
		mo, err := workload.MulticastFromEnv(os.Getenv)
		if err != nil {
			return err
		}
		opts.Multicast = mo
	}
	node, err := NewNode(boot.Self, boot.IDs(), opts)
	if err != nil {
		return err
	}
	codec, err := NewCodec()
	if err != nil {
		return err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tcfg := tcp.DefaultConfig()
	tcfg.Node = boot.Self
	tcfg.ListenAddr = boot.Addr(boot.Self)
	tcfg.JobID = boot.JobID
	tcfg.Secret = boot.Secret
	tcfg.Logger = logger
	tr, err := tcp.Listen(tcfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrListen, err)
	}
	defer tr.Close()
	for _, p := range boot.Peers {
		if p.ID != boot.Self {
			tr.SetPeer(p.ID, p.Addr)
		}
	}

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := opts.Events
	var sv *supervisor
	if opts.Supervisor != nil {
		if events != nil {
			// The supervisor's goroutine writes PeerAdded lines beside the
			// host's loop.
			events = host.NewLockedWriter(events)
			if err := record.WriteLine(events, boot.Self, 0, "Listening", record.Listening{Addr: tr.Addr(), PID: os.Getpid()}); err != nil {
				return err
			}
		}
		started := make(chan error, 1)
		sv = &supervisor{self: boot.Self, tr: tr, events: events, log: logger, ctx: ctx, ready: make(chan struct{})}
		go sv.run(opts.Supervisor, started, cancel)
		select {
		case err := <-started:
			if errors.Is(err, errSupervisorGone) {
				return nil // nobody wants this node any more
			}
			if err != nil {
				return err
			}
		case <-parent.Done():
			return nil
		}
	}

	h, err := host.New(node.Stack, host.Config{
		Transport: tr,
		Codec:     codec,
		Seed:      opts.Seed,
		Logger:    logger,
		Events:    events,
		OnEvent:   node.keepLinks(tr),
	})
	if err != nil {
		return err
	}
	if sv != nil {
		sv.host = h
		close(sv.ready)
	}
	runErr := h.Run(ctx)
	tr.Close()
	if events != nil {
		exit := record.Exit{Transport: tr.Stats(), Host: h.Stats()}
		if runErr != nil {
			exit.Err = runErr.Error()
		}
		record.WriteLine(events, boot.Self, 0, "Exit", exit)
	}
	return runErr
}

// supervisor follows a supervised node's standard input. Its lines:
//
//	start           (first line) start the machines
//	peer <id>=<addr> add a node to the address book (a joiner that is
//	                about to start); answered by a PeerAdded event
//	fail <id>       hand core.Failed{Node: id} to the machines, as a
//	                detector's verdict; a FailureInjected event first
//
// The end of the stream stops the node.
type supervisor struct {
	self   core.NodeID
	tr     *tcp.Transport
	events io.Writer
	log    *slog.Logger
	ctx    context.Context // the node's
	ready  chan struct{}   // closed once host is set
	host   *host.Host
}

func (s *supervisor) run(r io.Reader, started chan<- error, cancel context.CancelFunc) {
	defer cancel()
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		started <- errSupervisorGone
		return
	}
	if line := strings.TrimSpace(sc.Text()); line != "start" {
		started <- fmt.Errorf("%w: got %q, want \"start\"", ErrSupervisor, line)
		return
	}
	started <- nil
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if arg, ok := strings.CutPrefix(line, "fail "); ok {
			s.fail(line, arg)
			continue
		}
		if line == "echo" {
			if s.waitReady() {
				s.handle(workload.StartEcho{})
			}
			continue
		}
		entry, ok := strings.CutPrefix(line, "peer ")
		if !ok {
			s.log.Warn("runner: ignoring a line from the supervisor", "line", line)
			continue
		}
		peers, err := ParseNodes(entry)
		if err != nil {
			s.log.Warn("runner: ignoring a bad peer line from the supervisor", "line", line, "err", err)
			continue
		}
		for _, p := range peers {
			if p.ID == s.self {
				continue
			}
			s.tr.SetPeer(p.ID, p.Addr)
			if s.events != nil {
				record.WriteLine(s.events, s.self, 0, "PeerAdded", record.PeerAdded{Peer: p.ID, Addr: p.Addr})
			}
		}
	}
}

// fail hands core.Failed about the node named by arg to the machines.
func (s *supervisor) fail(line, arg string) {
	id, err := parseID(arg)
	if err != nil {
		s.log.Warn("runner: ignoring a bad fail line from the supervisor", "line", line, "err", err)
		return
	}
	if !s.waitReady() {
		return
	}
	if s.events != nil {
		record.WriteLine(s.events, s.self, 0, "FailureInjected", record.FailureInjected{Node: id})
	}
	s.handle(core.Failed{Node: id})
}

// waitReady waits until the host runs, and reports false if the node
// stopped first.
func (s *supervisor) waitReady() bool {
	select {
	case <-s.ready:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// handle hands e to the machines; the host runs (waitReady).
func (s *supervisor) handle(e core.Event) {
	if err := s.host.Handle(s.ctx, e); err != nil {
		s.log.Warn("runner: could not hand an event to the machines", "event", host.EventType(e), "err", err)
	}
}
