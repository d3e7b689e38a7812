package group

import "context"

// A SeedSource names the nodes a starting node asks to join, as
// "host:port" addresses: a fixed list ([SeedList]), DNS records
// ([DNSSeeds], [SRVSeeds]) or cohort supernodes (supernode.GroupSeeds in
// package p2p/supernode). [New]
// calls it at each attempt to join (again when a joiner nobody admitted
// probes anew), so a source that changes is read as it is then; its
// errors are returned by New wrapping ErrNoSeed.
type SeedSource interface {
	Seeds(ctx context.Context) ([]string, error)
}

// SeedList is a fixed list of seeds.
type SeedList []string

// Seeds returns the list.
func (l SeedList) Seeds(context.Context) ([]string, error) { return l, nil }
