package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/tracker"
	"github.com/cohort-mp/cohort/member"
)

// SpawnOptions describe a node added to a running job.
type SpawnOptions struct {
	// ID is the new node's id; it must not be in use.
	ID core.NodeID
	// Secret, if not nil, replaces the job's secret (a node that cannot
	// authenticate, for tests).
	Secret []byte
	// Contacts are the nodes the joiner asks, in order; nil means the live
	// members of the newest view, in view order (the root first).
	Contacts []core.NodeID
}

// Spawn starts a node that joins the running group (NEW_NODE, §3.7) and
// returns once it listens and was told to start; it does not wait for its
// admission.
func (j *Job) Spawn(ctx context.Context, o SpawnOptions) error {
	secret := o.Secret
	if secret == nil {
		secret = j.secret
	}
	for attempt := 1; ; attempt++ {
		var peers []Peer
		var err error
		j.mu.Lock()
		if _, used := j.procs[o.ID]; used && attempt == 1 {
			err = fmt.Errorf("%w: node %v exists", ErrJob, o.ID)
		}
		contacts := o.Contacts
		if contacts == nil {
			contacts = j.liveViewLocked()
		}
		for _, c := range contacts {
			if n := j.tracker.Lookup(c); n != nil && n.Addr != "" {
				peers = append(peers, Peer{ID: c, Addr: n.Addr})
			}
		}
		j.mu.Unlock()
		if err != nil {
			return err
		}
		if len(peers) == 0 {
			return fmt.Errorf("%w: no contact for joiner %v", ErrJob, o.ID)
		}
		addrs, err := freeAddrs(1)
		if err != nil {
			return err
		}
		self := Peer{ID: o.ID, Addr: addrs[0]}
		peers = append(peers, self)
		if err := j.announce(ctx, self); err != nil {
			return err
		}
		j.mu.Lock()
		delete(j.procs, o.ID)
		j.mu.Unlock()
		if err := j.spawn(o.ID, peers, secret, true); err != nil {
			return err
		}
		err = j.awaitListening(ctx, []core.NodeID{o.ID})
		if err == nil {
			j.tell(o.ID, "start")
			return nil
		}
		if !errors.Is(err, ErrPortTaken) || attempt == 3 {
			return err
		}
		j.mu.Lock()
		p := j.procs[o.ID]
		j.mu.Unlock()
		<-p.done // its Exited record is in
		j.mu.Lock()
		j.tracker.Forget(o.ID)
		j.mu.Unlock()
	}
}

// announce tells every live node the address of a node about to start,
// and waits until each has added it to its address book: the members of
// the view that will admit it must be able to send to it.
func (j *Job) announce(ctx context.Context, p Peer) error {
	j.mu.Lock()
	var told []core.NodeID
	for _, n := range j.tracker.Nodes() {
		if n.Live() && n.Listening && n.ID != p.ID {
			told = append(told, n.ID)
		}
	}
	j.mu.Unlock()
	for _, id := range told {
		j.tell(id, "peer "+FormatNodes([]Peer{p}))
	}
	err := j.Wait(ctx, func(t *tracker.Tracker) (bool, error) {
		for _, id := range told {
			if n := t.Node(id); n.Live() && n.Told[p.ID] != p.Addr {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: telling the nodes where %v listens: %w", ErrJob, p.ID, err)
	}
	return nil
}

// liveViewLocked returns the live members of the newest view a live node
// holds, in view order.
func (j *Job) liveViewLocked() []core.NodeID {
	var newest member.ViewInstalled
	for _, n := range j.tracker.Nodes() {
		if n.Live() && n.View.Epoch > newest.Epoch {
			newest = n.View
		}
	}
	var out []core.NodeID
	for _, id := range newest.Members {
		if n := j.tracker.Lookup(id); n != nil && n.Live() {
			out = append(out, id)
		}
	}
	return out
}
