package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-metrics"
	"github.com/hashicorp/memberlist"
)

// mlSystem runs hashicorp/memberlist nodes, each on its own 127.0.0.1 port
// (UDP and TCP), all in this process.
type mlSystem struct {
	rate  float64 // target messages per member per second
	seed  uint64
	t     traffic
	l     *links
	ev    *events
	watch atomic.Pointer[watcher]
	label string // this system's value of the "system" metric label
	mu    sync.Mutex
	nodes []*mlNode // live nodes
	next  int
	all   []*mlNode
}

type mlNode struct {
	name string
	m    *memberlist.Memberlist
	tr   *countingTransport
	sys  *mlSystem

	mu   sync.Mutex
	left map[string]time.Time // node name → when this node declared it dead
}

// NotifyJoin, NotifyLeave and NotifyUpdate make mlNode a
// memberlist.EventDelegate. NotifyLeave is called when this node marks a
// member dead (or when it left).
func (n *mlNode) NotifyJoin(node *memberlist.Node) {
	n.mu.Lock()
	delete(n.left, node.Name) // back alive (it refuted a false death)
	n.mu.Unlock()
	n.sys.ev.poke()
}
func (n *mlNode) NotifyUpdate(*memberlist.Node) {}
func (n *mlNode) NotifyLeave(node *memberlist.Node) {
	now := time.Now()
	n.mu.Lock()
	if _, ok := n.left[node.Name]; !ok {
		n.left[node.Name] = now
	}
	n.mu.Unlock()
	n.sys.ev.declare(node.Name, now)
	n.sys.watch.Load().declared(n.name, node.Name, now)
}

func newMLSystem(rate float64, seed uint64) *mlSystem {
	return &mlSystem{rate: rate, seed: seed, l: newLinks(), ev: newEvents(),
		label: strconv.FormatUint(mlSystems.Add(1), 10)}
}

// mlSystems numbers the memberlist systems of this process, to tell their
// metrics apart.
var mlSystems atomic.Uint64

// mlConfig scales memberlist's LAN configuration (1 s probes, 200 ms
// gossip, 30 s push-pull) so that a quiet member sends rate messages per
// second: a probe round costs a member one ping and, on average, one ack
// (it is probed once per round too), so ProbeInterval = 2/rate; every other
// timing scales by the same factor (at 2 msgs/s this is DefaultLANConfig).
func (s *mlSystem) config(name string, tr memberlist.Transport, ev memberlist.EventDelegate) *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	f := 2 / s.rate
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f) }
	c.ProbeInterval = scale(c.ProbeInterval)
	c.ProbeTimeout = scale(c.ProbeTimeout)
	c.GossipInterval = scale(c.GossipInterval)
	c.PushPullInterval = scale(c.PushPullInterval)
	c.GossipToTheDeadTime = scale(c.GossipToTheDeadTime)
	c.Name = name
	c.MetricLabels = []metrics.Label{{Name: "system", Value: s.label}, {Name: "node", Value: name}}
	c.Transport = tr
	c.Events = ev
	c.LogOutput = io.Discard
	c.Logger = nil
	return c
}

func (s *mlSystem) spawn() (*mlNode, error) {
	s.mu.Lock()
	name := fmt.Sprintf("m%d", s.next)
	s.next++
	s.mu.Unlock()
	tr, err := newCountingTransport(&s.t, s.l, s.seed+uint64(s.next))
	if err != nil {
		return nil, err
	}
	n := &mlNode{name: name, tr: tr, sys: s, left: map[string]time.Time{}}
	m, err := memberlist.Create(s.config(name, tr, n))
	if err != nil {
		tr.Shutdown()
		return nil, err
	}
	n.m = m
	return n, nil
}

func (s *mlSystem) join(n *mlNode) error {
	s.mu.Lock()
	var seeds []string
	for _, o := range s.nodes {
		seeds = append(seeds, o.m.LocalNode().Address())
		if len(seeds) == 3 {
			break
		}
	}
	s.mu.Unlock()
	if len(seeds) > 0 {
		if _, err := n.m.Join(seeds); err != nil {
			n.m.Shutdown()
			return fmt.Errorf("memberlist join: %w", err)
		}
	}
	s.mu.Lock()
	s.nodes = append(s.nodes, n)
	s.all = append(s.all, n)
	s.mu.Unlock()
	return nil
}

func (s *mlSystem) start(n int) error {
	for i := 0; i < n; i++ {
		node, err := s.spawn()
		if err != nil {
			return err
		}
		if err := s.join(node); err != nil {
			return err
		}
	}
	return s.waitAll()
}

// waitAll waits until every live node counts exactly the live nodes.
func (s *mlSystem) waitAll() error {
	return waitFor(s, 120*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, n := range s.nodes {
			if n.m.NumMembers() != len(s.nodes) {
				return false
			}
		}
		return true
	})
}

func (s *mlSystem) traffic() (uint64, uint64) { return s.t.msgs.Load(), s.t.bytes.Load() }

func (s *mlSystem) live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes)
}

func (s *mlSystem) crash(i int) string {
	s.mu.Lock()
	n := s.nodes[i]
	s.nodes = append(s.nodes[:i:i], s.nodes[i+1:]...)
	s.mu.Unlock()
	s.ev.markCrashed(n.name)
	n.m.Shutdown() // no Leave: the others must detect it
	return n.name
}

func (s *mlSystem) detected(victim string) time.Time { return s.ev.first(victim) }

func (s *mlSystem) agreed(victim string) (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, n := range s.nodes {
		n.mu.Lock()
		at, ok := n.left[victim]
		n.mu.Unlock()
		if !ok {
			return false, time.Time{}
		}
		for _, m := range n.m.Members() {
			if m.Name == victim {
				return false, time.Time{}
			}
		}
		if at.After(last) {
			last = at
		}
	}
	return true, last
}

func (s *mlSystem) replace() error {
	n, err := s.spawn()
	if err != nil {
		return err
	}
	if err := s.join(n); err != nil {
		return err
	}
	return s.waitAll()
}

func (s *mlSystem) falseDeaths() int         { return s.ev.falseCount() }
func (s *mlSystem) changed() <-chan struct{} { return s.ev.changed() }

func (s *mlSystem) inject(i int, loss float64, delay time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[i].tr.f.set(loss, delay)
	return true
}

func (s *mlSystem) close() {
	s.mu.Lock()
	nodes := s.nodes
	s.nodes = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.m.Shutdown() }()
	}
	wg.Wait()
}

// whole: every live node counts exactly the live nodes as members.
func (s *mlSystem) whole() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if n.m.NumMembers() != len(s.nodes) {
			return false
		}
	}
	return true
}

// views: each live node's Members(), which holds alive and suspect nodes
// and leaves the dead out.
func (s *mlSystem) views() []nodeView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]nodeView, 0, len(s.nodes))
	for _, n := range s.nodes {
		members := map[string]bool{}
		for _, m := range n.m.Members() {
			members[m.Name] = true
		}
		out = append(out, nodeView{name: n.name, members: members})
	}
	return out
}

// cut: see countingTransport.
func (s *mlSystem) cut(a, b int, oneWay bool) {
	s.mu.Lock()
	ta, tb := s.nodes[a].tr.self, s.nodes[b].tr.self
	s.mu.Unlock()
	s.l.set(ta, tb, true)
	if !oneWay {
		s.l.set(tb, ta, true)
	}
}

func (s *mlSystem) heal() { s.l.healAll() }

// sent: the packets and dials the node at live index i made, per peer.
func (s *mlSystem) sent(i int) map[string]uint64 {
	s.mu.Lock()
	byAddr := s.nodes[i].tr.sent()
	names := make(map[string]string, len(s.all))
	for _, n := range s.all {
		names[n.tr.self] = n.name
	}
	s.mu.Unlock()
	out := make(map[string]uint64, len(byAddr))
	for addr, k := range byAddr {
		out[names[addr]] += k
	}
	return out
}

// setWatcher: memberlist says nothing to its delegates when it starts to
// suspect a member; the suspicions come from its metrics
// (memberlist.msg.suspect, counted when a node marks an alive member
// suspect), which do not name the suspect.
func (s *mlSystem) setWatcher(w *watcher) {
	suspectSinkOnce.Do(func() {
		c := metrics.DefaultConfig("")
		c.EnableHostname, c.EnableRuntimeMetrics = false, false
		if _, err := metrics.NewGlobal(c, &suspectSink{}); err != nil {
			panic(fmt.Sprintf("memberlist bench: metrics: %v", err))
		}
	})
	s.watch.Store(w)
	mlWatched.Lock()
	defer mlWatched.Unlock()
	if w == nil {
		delete(mlWatched.m, s.label)
	} else {
		mlWatched.m[s.label] = s
	}
}

// mlWatched are the memberlist systems whose suspicions are watched, by
// their metric label.
var mlWatched = struct {
	sync.Mutex
	m map[string]*mlSystem
}{m: map[string]*mlSystem{}}

var suspectSinkOnce sync.Once

// suspectSink is a go-metrics sink that passes memberlist's suspicions to
// the watcher of the system they come from and ignores everything else.
type suspectSink struct{ metrics.BlackholeSink }

func (*suspectSink) IncrCounterWithLabels(key []string, _ float32, labels []metrics.Label) {
	if len(key) < 3 || key[len(key)-3] != "memberlist" || key[len(key)-2] != "msg" || key[len(key)-1] != "suspect" {
		return
	}
	var system, node string
	for _, l := range labels {
		switch l.Name {
		case "system":
			system = l.Value
		case "node":
			node = l.Value
		}
	}
	mlWatched.Lock()
	s := mlWatched.m[system]
	mlWatched.Unlock()
	if s != nil {
		s.watch.Load().suspected(node, "", time.Now())
	}
}

// settle: memberlist's traffic is steady once its nodes know each other.
func (s *mlSystem) settle() time.Duration { return 0 }
