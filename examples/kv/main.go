// Command kv is a sharded in-memory key-value HTTP service whose replicas
// place keys by the membership views of package group: in the view
// numbered E, key K belongs to View.Owner(K), which every replica computes
// alike, and a replica asked for a key it does not own forwards the
// request to the owner.
//
// Three replicas on one machine (each in its own terminal, in any order):
//
//	go run ./examples/kv -name a -http 127.0.0.1:8081 -bind 127.0.0.1:7951 -seeds 127.0.0.1:7951,127.0.0.1:7952,127.0.0.1:7953
//	go run ./examples/kv -name b -http 127.0.0.1:8082 -bind 127.0.0.1:7952 -seeds 127.0.0.1:7951,127.0.0.1:7952,127.0.0.1:7953
//	go run ./examples/kv -name c -http 127.0.0.1:8083 -bind 127.0.0.1:7953 -seeds 127.0.0.1:7951,127.0.0.1:7952,127.0.0.1:7953
//
// then write and read through any of them, kill one, and read again:
//
//	curl -X PUT --data blue 127.0.0.1:8081/kv/sky
//	curl 127.0.0.1:8083/kv/sky
//	kill -9 <pid of b>
//	curl 127.0.0.1:8083/kv/sky
//
// # How keys move
//
// Each key is kept at its owner and at its backup, the next member in
// rendezvous order (the owner of the key among the others). A write is
// acknowledged once both hold it, so a replica killed loses no key: its
// keys' backups become their owners in the next view (removing a member
// from a rendezvous ranking moves up the next one).
//
// When a replica installs the view E, it stops serving the epoch before,
// sends every other member of E the keys that member owns or backs in E
// (a hand-off, possibly empty), and serves again once it has every other
// member's hand-off of E. A replica thus serves E only after each member
// of E stopped serving its earlier epochs, and with every key it owns in
// E: at no epoch do two replicas serve one key, and no write acknowledged
// before the view change is missed after it. Requests meanwhile wait.
// A replica drops the keys it neither owns nor backs once its hand-off of
// E is taken by all. Keys survive one crash at a time: a second crash
// before the hand-offs of the view without the first completed can lose
// the keys both held.
//
// Each replica logs its decisions on standard output, so that they can be
// checked from its log alone: "view epoch=E members=a,b,c" when it
// installs a view, "ready epoch=E" when it starts serving it, and
// "serve epoch=E key=K" for each request it answers as K's owner.
//
// The group's secret comes from the environment (COHORT_GROUP_SECRET, at
// least 16 bytes); without it the replicas use a demonstration secret and
// say so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/group"
)

const demoSecret = "cohort example kv: not a secret"

func main() {
	name := flag.String("name", "", "this replica's `name`, unique in the group (default: the host name)")
	httpAddr := flag.String("http", "127.0.0.1:8080", "HTTP `address` to serve on, a specific IP (the others reach it there)")
	bind := flag.String("bind", "127.0.0.1:7950", "group `address` (host:port) to listen on")
	seeds := flag.String("seeds", "", "comma-separated group `addresses` of the replicas; empty: may start alone")
	flag.Parse()
	if err := run(*name, *httpAddr, *bind, *seeds); err != nil {
		fmt.Fprintln(os.Stderr, "kv:", err)
		os.Exit(1)
	}
}

func run(name, httpAddr, bind, seeds string) error {
	secret := os.Getenv("COHORT_GROUP_SECRET")
	if secret == "" {
		secret = demoSecret
		fmt.Fprintln(os.Stderr, "kv: using the demonstration secret: set COHORT_GROUP_SECRET (16+ bytes) for real use")
	}
	var seedList []string
	if seeds != "" {
		seedList = strings.Split(seeds, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := start(ctx, options{name: name, httpAddr: httpAddr, bind: bind, seeds: seedList, secret: []byte(secret)}, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kv: replica %s: group %s, HTTP %s\n", r.node.name, r.node.g.Addr(), r.url)
	<-ctx.Done()
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.node.g.Leave(lctx); err != nil {
		log.Printf("kv: leave: %v", err)
	}
	r.kill()
	return nil
}

// options configure one replica.
type options struct {
	name, httpAddr, bind string
	seeds                []string
	secret               []byte
}

// replica is a running replica: its node and its HTTP server.
type replica struct {
	node *node
	url  string // http://host:port
	srv  *http.Server
}

// start listens on opts.httpAddr, joins the group (publishing its HTTP
// address as its metadata) and serves, logging its decisions to logw.
func start(ctx context.Context, opts options, logw io.Writer) (*replica, error) {
	if h, _, err := net.SplitHostPort(opts.httpAddr); err != nil || net.ParseIP(h) == nil || net.ParseIP(h).IsUnspecified() {
		return nil, fmt.Errorf("-http %q: want a specific IP and a port (the other replicas reach this one there)", opts.httpAddr)
	}
	ln, err := net.Listen("tcp", opts.httpAddr)
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	cfg := group.DefaultLocalConfig()
	cfg.Name = opts.name
	cfg.BindAddr = opts.bind
	cfg.Cluster = "example-kv"
	cfg.Secret = opts.secret
	cfg.Meta = []byte(url)
	if opts.seeds != nil {
		cfg.Seeds = group.SeedList(opts.seeds)
	}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	g, err := group.New(jctx, cfg)
	cancel()
	if err != nil {
		ln.Close()
		return nil, err
	}
	n := newNode(g, log.New(logw, g.Name()+" ", 0))
	go n.run()
	srv := &http.Server{Handler: n.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Printf("http: %v", err)
		}
	}()
	return &replica{node: n, url: url, srv: srv}, nil
}

// kill stops the replica at once: to the others, a crash.
func (r *replica) kill() {
	r.node.close()
	r.srv.Close()
	r.node.g.Close(context.Background())
}
