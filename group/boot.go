package group

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// How a group forms. Every node listens first, then probes each of its
// seeds: it connects (the handshake proves both know the Secret and gives
// the seed's id) and asks the seed's state (a [stack.Probe]: undecided,
// joining, member). A node that probes this one while it is undecided is
// known to it too. Then, at one instant (under boot.mu, so that a probe
// answered after it reports the decision):
//
//   - if some known node is a member (of a group, or forming one), join:
//     ask the members first, then the others, lowest id first;
//   - else, if this node's id is the lowest of all the nodes it knows, form
//     a group of one;
//   - else join, asking the known nodes lowest id first.
//
// Two nodes X and Y that have each other as seeds never both form: each
// listens before it probes, so the later prober of the two reaches the
// other. Say Y's probe reaches X. If it arrives after X decided, X answers
// that it is a member (or joining) and Y does not form — or, if X joins,
// X forms nothing. If it arrives before, X knows Y when it decides, and Y
// knows X from the answer: only the lower id of the two may form. A group
// thus forms once among nodes that all list each other, however they
// interleave; the lowest id among them forms it, unless one of them found a
// group already there. A node that reaches none of its seeds forms a group
// of its own (two groups formed so do not merge). A joiner that no contact
// admits within 2·(contacts+1)·JoinRetry (the node it waited for may have
// crashed before forming) stops and probes again, as undecided: the
// argument above holds for every round of probes.
type boot struct {
	mu      sync.Mutex
	state   uint8                 // this node's stack.State…
	known   map[NodeID]bootPeer   // nodes probed, or that probed this one
	replies map[NodeID]chan uint8 // probes waiting for their answer
}

type bootPeer struct {
	state uint8
	addr  string
}

// heard records what a probe from id says.
func (b *boot) heard(id NodeID, p *stack.Probe) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.known[id]
	k.state = max(k.state, p.State)
	b.known[id] = k
	if ch := b.replies[id]; ch != nil && p.Reply {
		select {
		case ch <- p.State:
		default:
		}
	}
}

// bootHandler answers probes until the node's loop takes over the
// transport; every other frame is dropped (their senders repeat them).
func (g *Group) bootHandler() transport.Handler {
	return transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind != stack.KindProbe {
			return
		}
		m, err := g.codec.Unmarshal(f.Kind, f.Payload)
		if err != nil {
			return
		}
		p := m.(*stack.Probe)
		g.boot.heard(f.Src, p)
		if !p.Reply {
			g.boot.mu.Lock()
			state := g.boot.state
			g.boot.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			g.sendProbe(ctx, f.Src, true, state)
		}
	}}
}

func (g *Group) sendProbe(ctx context.Context, to NodeID, reply bool, state uint8) error {
	b, err := g.codec.Marshal(&stack.Probe{Reply: reply, Name: g.name, State: state})
	if err != nil {
		return err
	}
	return g.tr.Send(ctx, to, wire.Frame{Kind: stack.KindProbe, Payload: b})
}

// probe connects to seed and asks its state.
func (g *Group) probe(ctx context.Context, seed string) error {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	id, err := g.tr.Introduce(ictx, seed)
	switch {
	case err != nil && strings.Contains(err.Error(), "our own node id"):
		return fmt.Errorf("%w: %s has id %v, as this node %q", ErrDuplicate, seed, g.id, g.name)
	case errors.Is(err, wire.ErrJob):
		return fmt.Errorf("%w: %s: %v", ErrCluster, seed, err)
	case errors.Is(err, wire.ErrAuth) || errors.Is(err, tcp.ErrHandshake) && !timedOut(err):
		// A handshake that fails without a timeout is, between nodes
		// of one cluster, a proof refused: the transport says so.
		return fmt.Errorf("%w: %s: %v", ErrSecret, seed, err)
	case err != nil:
		return fmt.Errorf("%s: %w", seed, err)
	}
	ch := make(chan uint8, 1)
	g.boot.mu.Lock()
	g.boot.replies[id] = ch
	g.boot.mu.Unlock()
	defer func() {
		g.boot.mu.Lock()
		delete(g.boot.replies, id)
		g.boot.mu.Unlock()
	}()
	if err := g.sendProbe(ictx, id, false, stack.StateUndecided); err != nil {
		return fmt.Errorf("%s: %w", seed, err)
	}
	select {
	case <-ch:
	case <-ictx.Done():
		return fmt.Errorf("%s: no answer to the probe: %w", seed, ictx.Err())
	}
	g.boot.mu.Lock()
	k := g.boot.known[id]
	k.addr = seed
	g.boot.known[id] = k
	g.boot.mu.Unlock()
	return nil
}

// decide probes the seeds and decides to form a group (contacts nil) or
// to join one through contacts, in the order to ask them.
func (g *Group) decide(ctx context.Context) (contacts []NodeID, book map[NodeID]string, err error) {
	var seeds []string
	if g.cfg.Seeds != nil {
		if seeds, err = g.cfg.Seeds.Seeds(ctx); err != nil {
			return nil, nil, fmt.Errorf("%w: the seed source failed: %w", ErrNoSeed, err)
		}
	}
	seeds = slices.DeleteFunc(slices.Clone(seeds), func(s string) bool { return g.isSelf(ctx, s) })
	errs := make([]error, len(seeds))
	var wg sync.WaitGroup
	for i, s := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.probe(ctx, s)
		}()
	}
	wg.Wait()
	var reached int
	for _, e := range errs {
		switch {
		case e == nil:
			reached++
		case errors.Is(e, ErrDuplicate):
			return nil, nil, e
		default:
			g.log.Warn("group: seed not probed", "err", e)
		}
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if reached == 0 && len(seeds) > 0 {
		refused := errors.Join(errs...)
		if errors.Is(refused, ErrSecret) || errors.Is(refused, ErrCluster) {
			return nil, nil, refused
		}
	}

	g.boot.mu.Lock()
	defer g.boot.mu.Unlock()
	known := map[NodeID]uint8{}
	book = map[NodeID]string{}
	for id, k := range g.boot.known {
		known[id] = k.state
		if k.addr != "" {
			book[id] = k.addr
		}
	}
	form, contacts := stack.Decide(g.id, known)
	if form {
		g.boot.state = stack.StateMember
		return nil, nil, nil
	}
	g.boot.state = stack.StateJoining
	return contacts, book, nil
}

func newBoot() *boot {
	return &boot{known: map[core.NodeID]bootPeer{}, replies: map[core.NodeID]chan uint8{}}
}

// isSelf reports whether seed names this node: its advertised or bound
// address, or a name that resolves to one of this host's addresses at the
// port it listens on. Every node may then be given the same seed list,
// itself included (a list written once for the whole group); without the
// check, a node probing itself would find its own id and report a
// duplicate.
func (g *Group) isSelf(ctx context.Context, seed string) bool {
	if seed == g.addr || seed == g.tr.Addr() {
		return true
	}
	host, port, err := net.SplitHostPort(seed)
	if err != nil {
		return false
	}
	var ports []string
	for _, a := range []string{g.addr, g.tr.Addr()} {
		if _, p, err := net.SplitHostPort(a); err == nil {
			ports = append(ports, p)
		}
	}
	if !slices.Contains(ports, port) {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(rctx, host)
	if err != nil {
		return false
	}
	own := g.ownIPs()
	for _, ip := range ips {
		if slices.ContainsFunc(own, ip.IP.Equal) {
			return true
		}
	}
	return false
}

// ownIPs are the addresses this node answers on: its advertised and bound
// IPs, and every interface's when it is bound to all of them.
func (g *Group) ownIPs() []net.IP {
	var out []net.IP
	all := false
	for _, a := range []string{g.addr, g.tr.Addr()} {
		h, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			out = append(out, ip)
			all = all || ip.IsUnspecified()
		}
	}
	if all {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					out = append(out, n.IP)
				}
			}
		}
	}
	return out
}

// timedOut reports whether err is a deadline's.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
