// Command groupcache runs golang/groupcache with its peers set from the
// membership views of package group, instead of a static list: on every
// view, each node calls HTTPPool.Set with the members' URLs (published as
// their metadata), so every node of epoch E hashes keys over the same
// peers, and a node that leaves or crashes drops out of every pool in the
// next view.
//
// Three nodes on one machine (each in its own terminal, in any order):
//
//	go run . -name a -http 127.0.0.1:9081 -bind 127.0.0.1:7961 -seeds 127.0.0.1:7961,127.0.0.1:7962,127.0.0.1:7963
//	go run . -name b -http 127.0.0.1:9082 -bind 127.0.0.1:7962 -seeds 127.0.0.1:7961,127.0.0.1:7962,127.0.0.1:7963
//	go run . -name c -http 127.0.0.1:9083 -bind 127.0.0.1:7963 -seeds 127.0.0.1:7961,127.0.0.1:7962,127.0.0.1:7963
//
// then `curl 127.0.0.1:9081/get/some-key` on any node: the key's owner
// computes the value (it prints "fill") and the others fetch it from the
// owner. The cache's group, "slow", stands for a slow backend: its value
// of a key names the node that computed it.
//
// groupcache allows one peer pool per process, so each node is a process.
// The group's secret comes from the environment (COHORT_GROUP_SECRET, at
// least 16 bytes); without it the nodes use a demonstration secret.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/group"
	"github.com/golang/groupcache"
)

const demoSecret = "cohort example groupcache: not a secret"

func main() {
	name := flag.String("name", "", "this node's `name`, unique in the group (default: the host name)")
	httpAddr := flag.String("http", "127.0.0.1:9080", "HTTP `address` of the cache (peers and /get/), a specific IP")
	bind := flag.String("bind", "127.0.0.1:7960", "group `address` (host:port) to listen on")
	seeds := flag.String("seeds", "", "comma-separated group `addresses` of the nodes; empty: may start alone")
	flag.Parse()
	if err := run(*name, *httpAddr, *bind, *seeds); err != nil {
		fmt.Fprintln(os.Stderr, "groupcache:", err)
		os.Exit(1)
	}
}

func run(name, httpAddr, bind, seeds string) error {
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
		return fmt.Errorf("-http %q: want a specific IP (the other nodes reach this one there)", httpAddr)
	}
	self := "http://" + ln.Addr().String()

	// The service author's part: a group whose members publish their URL.
	cfg := group.DefaultLocalConfig()
	cfg.Name = name
	cfg.BindAddr = bind
	cfg.Cluster = "example-groupcache"
	cfg.Secret = []byte(demoSecret)
	if s := os.Getenv("COHORT_GROUP_SECRET"); s != "" {
		cfg.Secret = []byte(s)
	}
	cfg.Meta = []byte(self)
	if seeds != "" {
		cfg.Seeds = group.SeedList(strings.Split(seeds, ","))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	g, err := group.New(jctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer g.Close(context.Background())

	pool := groupcache.NewHTTPPool(self)
	cache := groupcache.NewGroup("slow", 64<<20, groupcache.GetterFunc(
		func(_ context.Context, key string, dest groupcache.Sink) error {
			fmt.Printf("fill %s\n", key)
			return dest.SetString(fmt.Sprintf("value of %s from %s", key, g.Name()))
		}))
	http.HandleFunc("/get/", func(w http.ResponseWriter, r *http.Request) {
		var v string
		if err := cache.Get(r.Context(), strings.TrimPrefix(r.URL.Path, "/get/"), groupcache.StringSink(&v)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, v)
	})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second} // DefaultServeMux: the pool registered there
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Printf("node %s: group %s, cache %s\n", g.Name(), g.Addr(), self)

	for {
		select {
		case v := <-g.Views():
			// The peers of epoch E: the same list at every node.
			var peers []string
			for _, m := range v.Members {
				peers = append(peers, string(m.Meta))
			}
			pool.Set(peers...)
			fmt.Printf("peers epoch=%d %s\n", v.Epoch, strings.Join(peers, " "))
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return g.Leave(lctx)
		}
	}
}
