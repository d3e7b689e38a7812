package daemon

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/p2p/supernode"
)

// registerLoop registers with every supernode and refreshes the merged
// peer list every Refresh; a supernode that is down is retried with
// exponential back-off (up to 8 × Refresh) while the cached list stays.
func (d *Daemon) registerLoop(ctx context.Context, advertise string) {
	if len(d.cfg.Supernodes) == 0 {
		return
	}
	type sn struct {
		c       *supernode.Client
		backoff time.Duration
		next    time.Time
		list    []supernode.Peer
	}
	sns := make([]*sn, 0, len(d.cfg.Supernodes))
	for _, s := range d.cfg.Supernodes {
		name, addr, _ := ParseSupernode(s) // checked by Validate
		c := supernode.NewClient(d.creds, name, addr)
		defer c.Close()
		sns = append(sns, &sn{c: c})
	}
	refresh := d.cfg.Refresh.Duration
	for {
		now := time.Now()
		var lists [][]supernode.Peer
		for _, s := range sns {
			if now.Before(s.next) {
				lists = append(lists, s.list)
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			register := s.c.Register
			if d.cfg.DialOutOnly {
				register = s.c.RegisterDialOutOnly
			}
			err := register(rctx, advertise)
			var peers []supernode.Peer
			if err == nil {
				peers, err = s.c.Peers(rctx)
			}
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.backoff = min(max(2*s.backoff, refresh), 8*refresh)
				s.next = now.Add(s.backoff/2 + rand.N(s.backoff/2+1))
				d.log.Warn("daemon: supernode unreachable; keeping the cached peer list", "supernode", s.c.Addr, "err", err.Error(), "retry_in", s.backoff.String())
			} else {
				if s.backoff > 0 {
					d.log.Info("daemon: supernode reachable again", "supernode", s.c.Addr)
				}
				s.backoff, s.next, s.list = 0, time.Time{}, peers
				d.m.registrations.Add(1)
			}
			lists = append(lists, s.list)
		}
		d.setPeers(supernode.Merge(lists...))
		select {
		case <-ctx.Done():
			return
		case <-time.After(refresh):
		}
	}
}

// setPeers replaces the cached list, keeping the latencies measured.
func (d *Daemon) setPeers(list []supernode.Peer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := map[string]PeerInfo{}
	for _, p := range d.peers {
		old[p.Name] = p
	}
	peers := make([]PeerInfo, 0, len(list))
	for _, p := range list {
		pi := PeerInfo{Name: p.Name, Addr: p.Addr, DialOutOnly: p.DialOutOnly}
		if o, ok := old[p.Name]; ok && o.Addr == p.Addr {
			pi.RTTMicros = o.RTTMicros
		}
		peers = append(peers, pi)
	}
	d.peers = peers
}

// pingLoop measures the round trip to every cached peer every Ping (the
// latency ranking of P2P-MPI §3: an application-level ping, the daemon's
// own /v1/ping, not ICMP).
func (d *Daemon) pingLoop(ctx context.Context) {
	clients := map[string]*Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	wait := min(time.Second, d.cfg.Ping.Duration) // the first measurement soon after the start
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = d.cfg.Ping.Duration
		d.mu.Lock()
		peers := slices.Clone(d.peers)
		d.mu.Unlock()
		rtts := make([]int64, len(peers))
		var wg sync.WaitGroup
		for i, p := range peers {
			if p.Name == d.cfg.Name || p.DialOutOnly {
				continue
			}
			c := clients[p.Name+"@"+p.Addr]
			if c == nil {
				c = NewClient(d.creds, p.Name, p.Addr)
				clients[p.Name+"@"+p.Addr] = c
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				rtts[i] = -1
				if _, rtt, err := c.Ping(pctx); err == nil {
					rtts[i] = max(rtt.Microseconds(), 1)
				}
			}()
		}
		wg.Wait()
		d.mu.Lock()
		for i, p := range peers {
			for k := range d.peers {
				if d.peers[k].Name == p.Name && d.peers[k].Addr == p.Addr && rtts[i] != 0 {
					d.peers[k].RTTMicros = rtts[i]
				}
			}
		}
		d.mu.Unlock()
	}
}
