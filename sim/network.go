package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Network decides how long a message takes from its sender to its receiver.
// It is called once per message, in the deterministic order of the
// simulation, with the network's own random source; it may keep state (link
// queues). Returning ok=false drops the message.
type Network interface {
	Transit(from, to core.NodeID, size int, now time.Duration, rng *rand.Rand) (delay time.Duration, ok bool)
}

// inOrder is implemented by networks that never reorder messages between a
// pair by themselves, so the world need not enforce FIFO order.
type inOrder interface{ inOrder() }

// Constant is a network in which every message takes the same time.
type Constant time.Duration

// Transit implements Network.
func (c Constant) Transit(_, _ core.NodeID, _ int, _ time.Duration, _ *rand.Rand) (time.Duration, bool) {
	return time.Duration(c), true
}

func (Constant) inOrder() {}

func (c Constant) String() string { return fmt.Sprintf("constant(%v)", time.Duration(c)) }

// UniformNet draws each message's latency uniformly from [Min, Max]. The
// world keeps messages between a pair in FIFO order (a message never arrives
// before one sent earlier on the same pair) unless Config.Reorder is set.
type UniformNet struct{ Min, Max time.Duration }

// Uniform returns a UniformNet over [min, max].
func Uniform(min, max time.Duration) UniformNet { return UniformNet{Min: min, Max: max} }

// Transit implements Network.
func (u UniformNet) Transit(_, _ core.NodeID, _ int, _ time.Duration, rng *rand.Rand) (time.Duration, bool) {
	if u.Max <= u.Min {
		return u.Min, true
	}
	return u.Min + time.Duration(rng.Int64N(int64(u.Max-u.Min)+1)), true
}

func (u UniformNet) String() string { return fmt.Sprintf("uniform(%v,%v)", u.Min, u.Max) }

// SlowNode is network Net with one slow, lossy node: every message Node
// sends is lost with probability Loss and otherwise arrives Delay later
// than Net says. Messages of other nodes are Net's.
type SlowNode struct {
	Net   Network
	Node  core.NodeID
	Loss  float64
	Delay time.Duration
}

// Transit implements Network.
func (s SlowNode) Transit(from, to core.NodeID, size int, now time.Duration, rng *rand.Rand) (time.Duration, bool) {
	d, ok := s.Net.Transit(from, to, size, now, rng)
	if !ok || from != s.Node {
		return d, ok
	}
	if rng.Float64() < s.Loss {
		return 0, false
	}
	return d + s.Delay, true
}

func (s SlowNode) String() string {
	return fmt.Sprintf("%v, %v slow (loss %.3g, +%v)", s.Net, s.Node, s.Loss, s.Delay)
}

// router is implemented by networks that carry a message themselves, link by
// link, as events of the world (see [Graph]). The world calls route instead
// of Transit once the message has passed the sender's overhead and the
// world's reachability checks (crash, cut, partition, loss). The router must
// eventually call w.deliverInc with the incarnation of to captured now, or
// count the message in w.stats.Dropped. Routers keep each pair FIFO by
// themselves (fixed routes over FIFO links), so the world does not reorder
// or clamp their deliveries.
type router interface {
	Network
	route(w *World, from, to core.NodeID, m core.Msg, size int, depart time.Duration)
}

// useNetwork installs n as the world's network and derives the per-send
// dispatch: hop-by-hop routing, and whether the world must enforce FIFO
// order per pair.
func (w *World) useNetwork(n Network) {
	w.cfg.Network = n
	w.rt, _ = n.(router)
	_, ordered := n.(inOrder)
	w.fifo = !ordered && w.rt == nil && !w.cfg.Reorder
}
