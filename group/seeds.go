package group

import "context"

// A SeedSource names the nodes a starting node asks to join, as
// "host:port" addresses. [New] calls it once. Sources other than a fixed
// list (DNS records, a registry) implement it; their errors are returned
// by New wrapping ErrNoSeed.
type SeedSource interface {
	Seeds(ctx context.Context) ([]string, error)
}

// SeedList is a fixed list of seeds.
type SeedList []string

// Seeds returns the list.
func (l SeedList) Seeds(context.Context) ([]string, error) { return l, nil }
