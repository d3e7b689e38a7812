package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// A Resolver answers the DNS queries of [DNSSeeds] and [SRVSeeds].
// *net.Resolver is one; a test gives its own.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

func resolverOr(r Resolver) Resolver {
	if r == nil {
		return net.DefaultResolver
	}
	return r
}

// DNSSeeds are the addresses a DNS name resolves to (its A and AAAA
// records), each at Port: a name with a record per node, such as a
// Kubernetes headless service ("orders.default.svc.cluster.local").
// The name is resolved anew at every attempt to join, so a node that
// probes again sees the records as they are then.
//
// An answer with no address is an error, not an empty list: treating it
// as "no seeds" would let every node that starts before the records exist
// form a group of its own. For Kubernetes, set the service's
// publishNotReadyAddresses, so that pods starting together (not yet
// ready, since readiness waits for New) find each other.
type DNSSeeds struct {
	// Host is the name to resolve.
	Host string
	// Port is the nodes' port (every node listens on the same one).
	Port int
	// Resolver resolves Host; nil means net.DefaultResolver.
	Resolver Resolver
}

// Seeds resolves Host and returns each address at Port, sorted.
func (d DNSSeeds) Seeds(ctx context.Context) ([]string, error) {
	if d.Host == "" {
		return nil, errors.New("DNSSeeds: Host is empty")
	}
	if d.Port <= 0 || d.Port > 65535 {
		return nil, fmt.Errorf("DNSSeeds: Port %d is not in 1..65535", d.Port)
	}
	hosts, err := resolverOr(d.Resolver).LookupHost(ctx, d.Host)
	if err != nil {
		return nil, fmt.Errorf("DNSSeeds: %w", err)
	}
	var out []string
	for _, h := range hosts {
		out = append(out, net.JoinHostPort(h, strconv.Itoa(d.Port)))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("DNSSeeds: %s has no address", d.Host)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// SRVSeeds are the targets of the SRV records of _Service._Proto.Name,
// each at the port its record gives: a Kubernetes headless service with a
// named port ("_gossip._tcp.orders.default.svc.cluster.local"), or any
// registry that publishes SRV records, when nodes listen on different
// ports. The records are looked up anew at every attempt to join; as with
// [DNSSeeds], an answer with no record is an error.
type SRVSeeds struct {
	// Service and Proto name the service ("gossip", "tcp"); both empty
	// means Name is looked up as it is.
	Service, Proto string
	// Name is the domain.
	Name string
	// Resolver looks the records up; nil means net.DefaultResolver.
	Resolver Resolver
}

// Seeds looks the SRV records up and returns "target:port" for each, in
// order of priority, then target and port (weights are ignored: every
// seed is probed).
func (s SRVSeeds) Seeds(ctx context.Context) ([]string, error) {
	if s.Name == "" {
		return nil, errors.New("SRVSeeds: Name is empty")
	}
	if (s.Service == "") != (s.Proto == "") {
		return nil, fmt.Errorf("SRVSeeds: Service %q and Proto %q must both be set or both empty", s.Service, s.Proto)
	}
	_, recs, err := resolverOr(s.Resolver).LookupSRV(ctx, s.Service, s.Proto, s.Name)
	if err != nil {
		return nil, fmt.Errorf("SRVSeeds: %w", err)
	}
	recs = slices.DeleteFunc(slices.Clone(recs), func(r *net.SRV) bool { return r == nil || r.Target == "." || r.Target == "" })
	if len(recs) == 0 {
		return nil, fmt.Errorf("SRVSeeds: %s has no SRV record", s.Name)
	}
	slices.SortFunc(recs, func(a, b *net.SRV) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Target, b.Target), cmp.Compare(a.Port, b.Port))
	})
	var out []string
	for _, r := range recs {
		a := net.JoinHostPort(strings.TrimSuffix(r.Target, "."), strconv.Itoa(int(r.Port)))
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}
