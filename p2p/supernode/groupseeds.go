package supernode

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// GroupSeeds are the nodes registered with cohort supernodes (run by
// `cohort supernode`), as a seed source of package group
// (group.Config.Seeds), for groups whose hosts already belong to a cohort
// cluster with its CA.
//
// A supernode keeps one address per certificate name, and a host's peer
// daemon registers under the host's certificate: a group member therefore
// registers with a certificate of its own (say "orders-1", issued by the
// cluster's CA) and lists only the names of its group (Prefix "orders-").
// Registrations expire (DefaultExpiry): a member calls Register
// with its address (group.Group.Addr) after group.New and then well within the expiry,
// for as long as it runs. The supernodes are asked anew at every attempt
// to join.
type GroupSeeds struct {
	// Addrs are the supernodes' "host:port" addresses; their lists are
	// merged.
	Addrs []string
	// ServerName is the name on the supernodes' certificates; empty means
	// the host of each address.
	ServerName string
	// Creds are this node's credentials of the cluster's CA.
	Creds *ca.Credentials
	// Prefix keeps only the registrations whose name starts with it.
	Prefix string
}

func (s GroupSeeds) check() error {
	if len(s.Addrs) == 0 {
		return errors.New("GroupSeeds: Addrs is empty")
	}
	if s.Creds == nil {
		return errors.New("GroupSeeds: Creds is nil (a supernode serves members of the cluster's CA only)")
	}
	return nil
}

// Seeds asks every supernode for its registrations and returns the
// addresses of those whose name starts with Prefix, one per name (the most
// recently renewed), sorted by name. It fails only if no supernode
// answered, or if none of the registrations matches.
func (s GroupSeeds) Seeds(ctx context.Context) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var lists [][]Peer
	var errs []error
	for _, a := range s.Addrs {
		c := NewClient(s.Creds, s.ServerName, a)
		ps, err := c.Peers(ctx)
		c.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lists = append(lists, ps)
	}
	if len(lists) == 0 {
		return nil, fmt.Errorf("GroupSeeds: no supernode answered: %w", errors.Join(errs...))
	}
	var out []string
	for _, p := range Merge(lists...) {
		if strings.HasPrefix(p.Name, s.Prefix) {
			out = append(out, p.Addr)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("GroupSeeds: no registration named %q… at %v", s.Prefix, s.Addrs)
	}
	return out, nil
}

// Register registers this node, under the name of its certificate, at
// addr with every supernode (or renews its registration). It fails if a
// supernode refused or could not be reached; the others have registered
// it.
func (s GroupSeeds) Register(ctx context.Context, addr string) error {
	if err := s.check(); err != nil {
		return err
	}
	var errs []error
	for _, a := range s.Addrs {
		c := NewClient(s.Creds, s.ServerName, a)
		if err := c.Register(ctx, addr); err != nil {
			errs = append(errs, err)
		}
		c.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("GroupSeeds: %w", err)
	}
	return nil
}
