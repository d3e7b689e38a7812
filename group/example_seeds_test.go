package group_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// Three nodes started at the same moment, each given the same list of
// the three addresses (its own among them): they form one group, whatever
// the order in which their probes cross.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for range 3 { // three free ports on loopback
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		l.Close()
	}

	nodes := make([]*group.Group, 3)
	errs := make(chan error, 3)
	for i, name := range []string{"a", "b", "c"} {
		go func() {
			cfg := exampleConfig(name, addrs...)
			cfg.BindAddr = addrs[i]
			g, err := group.New(ctx, cfg)
			nodes[i] = g
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			log.Fatal(err)
		}
	}
	for _, g := range nodes {
		defer g.Close(ctx)
	}

	var epochs []uint64
	for _, g := range nodes {
		for v := range g.Views() {
			if len(v.Members) == 3 {
				epochs = append(epochs, v.Epoch)
				break
			}
		}
	}
	fmt.Println("one view of three at every node:", len(slices.Compact(epochs)) == 1)
	// Output: one view of three at every node: true
}

// Seeds from DNS: the A records of a Kubernetes headless service, every
// node at the same port, or its SRV records, each with its port. Both are
// read again at each attempt to join.
func ExampleDNSSeeds() {
	cfg := group.DefaultLANConfig()
	cfg.AdvertiseAddr = "10.0.0.4:7950" // this pod's IP
	cfg.Cluster = "orders"
	cfg.Secret = []byte("use 16+ random bytes in production")
	cfg.Seeds = group.DNSSeeds{Host: "orders.default.svc.cluster.local", Port: 7950}
	// or, with a named port "gossip" in the service:
	cfg.Seeds = group.SRVSeeds{Service: "gossip", Proto: "tcp", Name: "orders.default.svc.cluster.local"}

	g, err := group.New(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(context.Background())
}
