package main

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/group"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/fault"
	"github.com/cohort-mp/cohort/wire"
)

var benchSecret = []byte("cohort-vs-memberlist-bench-secret")

// cohortEvents, if not nil, receives every cohort node's events as JSON
// lines (--events).
var cohortEvents io.Writer

// cohortSystem runs cohort group nodes, each on its own 127.0.0.1 port, all
// in this process.
type cohortSystem struct {
	det   group.Detector
	rate  float64
	seed  uint64
	ev    *events
	mu    sync.Mutex
	nodes []*cohortNode // live nodes
	dead  []*cohortNode
	next  int
	wg    sync.WaitGroup
	// faults holds each node's fault-injecting wrapper of its transport
	// (no rules but during the faults window or a cut), by node name.
	faults map[string]*fault.Transport
	// cuts are the node ids each node's frames to are lost (the ids the
	// fault wrapper sees), by the sending node's name.
	cuts map[string][]group.NodeID
	// senders count each node's frames per peer id, by node name.
	senders map[string]*sendCounter

	joinRetries atomic.Int64
	size        int // the group's size, set by start
	watch       atomic.Pointer[watcher]
}

type cohortNode struct {
	g    *group.Group
	name string

	mu   sync.Mutex
	view group.View
	at   time.Time // when this node installed view
}

func newCohortSystem(det group.Detector, rate float64, seed uint64) *cohortSystem {
	return &cohortSystem{det: det, rate: rate, seed: seed, ev: newEvents(), next: 1}
}

// config sets the detector's timings so that a quiet member sends rate
// messages per second. The heartbeat detector sends one heartbeat to each
// of its k = 2 monitors every T_interval and an insurance heartbeat to each
// of its other connections (two ring neighbours and, on average, the k
// nodes that chose it as a monitor) every 40 T_interval, so
// T_interval = (2 + 4/40)/rate; its suspicion and failure timeouts keep
// DefaultLocalConfig's ratios (2 and 1 intervals). BRR sends its table to one peer per round, so T_gossip =
// 1/rate, with pings timing out after 2.5 rounds as in DefaultLocalConfig.
func (s *cohortSystem) config(id int) group.Config {
	c := group.DefaultLocalConfig()
	c.Name = fmt.Sprint(id)
	c.Cluster = "mlbench"
	c.Secret = benchSecret
	c.Detector = s.det
	c.RandomSeed = s.seed*1000003 + uint64(id)
	if cohortEvents != nil {
		c.Events = cohortEvents
	}
	hb := s.heartbeatInterval()
	c.HeartbeatMonitors = 2
	c.HeartbeatInterval = hb
	c.SuspectTimeout = 2 * hb
	c.FailTimeout = hb
	gi := time.Duration(float64(time.Second) / s.rate)
	c.GossipInterval = gi
	c.PingTimeout = gi * 5 / 2
	if s.det != group.DetectorHeartbeat {
		// The gossip targets are view positions: every view change
		// moves them (a departure shifts every later member), and the
		// membership tree with them, so each opens new connections
		// while the old ones wait out the idle timeout. This one process
		// holds both ends of every connection: at n = 256 the default
		// 30 s ran it out of file descriptors. A BRR node talks to each
		// of its targets every ⌈log2 n⌉ rounds; the idle timeout is 2.5
		// such cycles.
		c.IdleTimeout = time.Duration(2.5 * float64(bits.Len(uint(max(s.size, 2)-1))) * float64(gi))
	}
	c.WrapTransport = func(tr transport.Transport) transport.Transport {
		ft, err := fault.New(tr, fault.Config{Seed: c.RandomSeed})
		if err != nil {
			return nil // group refuses to start, saying why
		}
		s.mu.Lock()
		if s.faults == nil {
			s.faults = map[string]*fault.Transport{}
		}
		s.faults[c.Name] = ft
		sc := &sendCounter{Transport: ft, sent: map[group.NodeID]uint64{}}
		if s.senders == nil {
			s.senders = map[string]*sendCounter{}
		}
		s.senders[c.Name] = sc
		s.mu.Unlock()
		return sc
	}
	return c
}

// settle: the heartbeat detector's connections opened by the joins (each
// node talked to many others while the tree grew) close after at most two
// T_insurance of silence; until then they get insurance heartbeats.
func (s *cohortSystem) settle() time.Duration {
	if s.det != group.DetectorHeartbeat {
		return 0
	}
	return 2 * 40 * s.heartbeatInterval()
}

// heartbeatInterval is T_interval at s.rate (see config).
func (s *cohortSystem) heartbeatInterval() time.Duration {
	return time.Duration(float64(time.Second) * (2 + 4.0/40) / s.rate)
}

func (s *cohortSystem) add(g *group.Group) *cohortNode {
	n := &cohortNode{g: g, name: g.Name(), view: g.View(), at: time.Now()}
	views, susp := g.Views(), g.Suspicions()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for v := range views {
			now := time.Now()
			n.mu.Lock()
			n.view, n.at = v, now
			n.mu.Unlock()
			for _, d := range v.Departed {
				s.ev.declare(fmt.Sprint(d), now)
			}
			s.ev.poke()
		}
	}()
	go func() {
		defer s.wg.Done()
		for x := range susp {
			m, ok := g.View().Member(x.Node)
			if !ok {
				continue
			}
			switch x.Kind {
			case group.Suspected:
				s.watch.Load().suspected(n.name, m.Name, x.At)
			case group.Declared:
				s.ev.declare(m.Name, time.Now())
				s.watch.Load().declared(n.name, m.Name, x.At)
			}
		}
	}()
	s.mu.Lock()
	s.nodes = append(s.nodes, n)
	s.mu.Unlock()
	return n
}

func (s *cohortSystem) newID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	return id
}

// seeds are up to three live nodes' addresses.
func (s *cohortSystem) seeds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.nodes {
		out = append(out, n.g.Addr())
		if len(out) == 3 {
			break
		}
	}
	return out
}

func (s *cohortSystem) start(n int) error {
	s.size = n
	g, err := group.New(context.Background(), s.config(s.newID()))
	if err != nil {
		return err
	}
	s.add(g)
	// Join in small concurrent batches: the membership admits joiners
	// that arrive together in one view change.
	for s.live() < n {
		k := min(joinBatch, n-s.live())
		errs := make(chan error, k)
		seeds := s.seeds()
		for range k {
			go func() { errs <- s.join(seeds) }()
		}
		for range k {
			if err := <-errs; err != nil {
				return fmt.Errorf("with %d of %d nodes in: %w", s.live(), n, err)
			}
		}
	}
	return s.waitAll()
}

// join adds one node through seeds. A joiner not admitted within
// joinTimeout is closed and replaced by a fresh one with a new id, up to
// joinAttempts times; the closed joiner counts as crashed (the group may
// have admitted it just before) and the retry is counted.
func (s *cohortSystem) join(seeds []string) error {
	var err error
	for range joinAttempts {
		id := s.newID()
		ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
		cfg := s.config(id)
		cfg.Seeds = group.SeedList(seeds)
		var g *group.Group
		g, err = group.New(ctx, cfg)
		cancel()
		if err == nil {
			s.add(g)
			return nil
		}
		s.ev.markCrashed(fmt.Sprint(id))
		s.joinRetries.Add(1)
	}
	return fmt.Errorf("cohort join: %w", err)
}

// waitAll waits until every live node has installed one same view of
// exactly the live nodes.
func (s *cohortSystem) waitAll() error {
	err := waitFor(s, 60*time.Second, s.whole)
	if err != nil {
		return fmt.Errorf("the %d live nodes do not agree on a view of them all: %w (%s)", s.live(), err, s.viewSummary())
	}
	return nil
}

// whole: every live node has installed one same view of exactly the live
// nodes.
func (s *cohortSystem) whole() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var want []string
	for _, n := range s.nodes {
		want = append(want, n.name)
	}
	slices.Sort(want)
	var epoch uint64
	for i, n := range s.nodes {
		n.mu.Lock()
		v := n.view
		n.mu.Unlock()
		var got []string
		for _, m := range v.Members {
			got = append(got, m.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || (i > 0 && v.Epoch != epoch) {
			return false
		}
		epoch = v.Epoch
	}
	return true
}

// views: each live node's last installed view.
func (s *cohortSystem) views() []nodeView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]nodeView, 0, len(s.nodes))
	for _, n := range s.nodes {
		n.mu.Lock()
		members := make(map[string]bool, len(n.view.Members))
		for _, m := range n.view.Members {
			members[m.Name] = true
		}
		n.mu.Unlock()
		out = append(out, nodeView{name: n.name, members: members})
	}
	return out
}

// cut drops frames where they leave a node, in the fault-injecting
// wrapper every node runs over (group's WrapTransport with
// transport/fault): a's frames to b and, both ways, b's to a. The TCP
// connection between them stays up; what they send each other is lost.
func (s *cohortSystem) cut(a, b int, oneWay bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cuts == nil {
		s.cuts = map[string][]group.NodeID{}
	}
	drop := func(from, to *cohortNode) {
		s.cuts[from.name] = append(s.cuts[from.name], to.g.ID())
		rules := []fault.Rule{{To: slices.Clone(s.cuts[from.name]), Drop: 1}}
		if err := s.faults[from.name].SetRules(rules); err != nil {
			panic(fmt.Sprintf("memberlist bench: a valid cut refused: %v", err))
		}
	}
	na, nb := s.nodes[a], s.nodes[b]
	drop(na, nb)
	if !oneWay {
		drop(nb, na)
	}
}

func (s *cohortSystem) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.cuts {
		s.faults[name].SetRules(nil)
	}
	clear(s.cuts)
}

func (s *cohortSystem) setWatcher(w *watcher) { s.watch.Store(w) }

// sent: the frames the node at live index i has handed to its transport,
// per peer (a cut's lost frames included).
func (s *cohortSystem) sent(i int) map[string]uint64 {
	s.mu.Lock()
	sc := s.senders[s.nodes[i].name]
	names := make(map[group.NodeID]string, len(s.nodes)+len(s.dead))
	for _, n := range append(slices.Clone(s.nodes), s.dead...) {
		names[n.g.ID()] = n.name
	}
	s.mu.Unlock()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := make(map[string]uint64, len(sc.sent))
	for id, k := range sc.sent {
		name, ok := names[id]
		if !ok {
			name = fmt.Sprint(id) // a joiner that failed to join
		}
		out[name] += k
	}
	return out
}

// sendCounter counts the frames a node sends, per peer, above the fault
// wrapper.
type sendCounter struct {
	transport.Transport
	mu   sync.Mutex
	sent map[group.NodeID]uint64
}

func (c *sendCounter) Send(ctx context.Context, to group.NodeID, f wire.Frame) error {
	c.mu.Lock()
	c.sent[to]++
	c.mu.Unlock()
	return c.Transport.Send(ctx, to, f)
}

// viewSummary counts the live nodes per installed view.
func (s *cohortSystem) viewSummary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	count := map[string]int{}
	for _, n := range s.nodes {
		n.mu.Lock()
		count[fmt.Sprintf("epoch %x with %d members", n.view.Epoch, len(n.view.Members))]++
		n.mu.Unlock()
	}
	return fmt.Sprint(count)
}

// traffic: messages are transport frames sent (tcp.Stats FramesOut),
// bytes are the process's write(2) bytes (/proc/self/io wchar), which while
// only cohort runs are the frames written to its connections.
func (s *cohortSystem) traffic() (uint64, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var msgs uint64
	for _, n := range append(slices.Clone(s.nodes), s.dead...) {
		msgs += n.g.Stats().FramesSent
	}
	return msgs, readUsage().wchar
}

func (s *cohortSystem) live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes)
}

func (s *cohortSystem) crash(i int) string {
	s.mu.Lock()
	n := s.nodes[i]
	s.nodes = append(s.nodes[:i:i], s.nodes[i+1:]...)
	s.dead = append(s.dead, n)
	s.mu.Unlock()
	s.ev.markCrashed(n.name)
	n.g.Close(context.Background()) // no Leave: the others must detect it
	return n.name
}

func (s *cohortSystem) detected(victim string) time.Time { return s.ev.first(victim) }

// agreed: every live node has installed one same view without victim.
func (s *cohortSystem) agreed(victim string) (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	var first group.View
	for i, n := range s.nodes {
		n.mu.Lock()
		v, at := n.view, n.at
		n.mu.Unlock()
		if slices.ContainsFunc(v.Members, func(m group.Member) bool { return m.Name == victim }) {
			return false, time.Time{}
		}
		if i == 0 {
			first = v
		} else if v.Epoch != first.Epoch || !slices.EqualFunc(v.Members, first.Members, func(a, b group.Member) bool { return a.ID == b.ID }) {
			return false, time.Time{}
		}
		if at.After(last) {
			last = at
		}
	}
	return true, last
}

func (s *cohortSystem) replace() error {
	if err := s.join(s.seeds()); err != nil {
		return err
	}
	return s.waitAll()
}

func (s *cohortSystem) falseDeaths() int         { return s.ev.falseCount() }
func (s *cohortSystem) changed() <-chan struct{} { return s.ev.changed() }

// inject sets the fault model on the outgoing frames of the node at live
// index i, through the transport wrapper every node runs over (group's
// WrapTransport with transport/fault): loss 0 and delay 0 clear it.
func (s *cohortSystem) inject(i int, loss float64, delay time.Duration) bool {
	s.mu.Lock()
	if i < 0 || i >= len(s.nodes) {
		s.mu.Unlock()
		return false
	}
	ft := s.faults[s.nodes[i].name]
	s.mu.Unlock()
	if ft == nil {
		return false
	}
	var rules []fault.Rule
	if loss > 0 || delay > 0 {
		rules = []fault.Rule{{Drop: loss, Delay: delay}}
	}
	return ft.SetRules(rules) == nil
}

func (s *cohortSystem) close() {
	s.mu.Lock()
	nodes := s.nodes
	s.nodes = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.g.Close(context.Background()) }()
	}
	wg.Wait()
	s.wg.Wait()
}

// joinBatch is how many nodes join at once when a cohort group starts.
var joinBatch = 8

// joinTimeout bounds one attempt to join; joinAttempts bounds the attempts
// for one new node.
var (
	joinTimeout  = 10 * time.Second
	joinAttempts = 4
)
