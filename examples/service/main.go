// Command service is a tiny HTTP service whose replicas keep a consistent
// member list with package group: every replica serves the same list (the
// membership view, numbered by its epoch) at /members, and prints each view
// it installs. Kill a replica and the others print the same new view.
//
// Three replicas on one machine (each in its own terminal):
//
//	go run ./examples/service -id 1 -http 127.0.0.1:8081 -bind 127.0.0.1:7951
//	go run ./examples/service -id 2 -http 127.0.0.1:8082 -bind 127.0.0.1:7952 -join 127.0.0.1:7951
//	go run ./examples/service -id 3 -http 127.0.0.1:8083 -bind 127.0.0.1:7953 -join 127.0.0.1:7951
//
// then `curl 127.0.0.1:8082/members`, and stop one with Ctrl-C (a graceful
// leave) or kill -9 (a crash). The group's secret comes from the
// environment (COHORT_GROUP_SECRET, at least 16 bytes; never on the command
// line, where every user of the machine can read it); without it the
// replicas use a fixed demonstration secret and say so.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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

const demoSecret = "cohort example service: not a secret"

func main() {
	id := flag.Uint("id", 0, "this replica's `id`, unique in the group (1, 2, 3, ...)")
	httpAddr := flag.String("http", "127.0.0.1:8080", "HTTP `address` to serve /members on")
	bind := flag.String("bind", "127.0.0.1:7950", "group `address` (host:port) to listen on")
	join := flag.String("join", "", "comma-separated group `addresses` of running replicas; empty starts a new group")
	detector := flag.String("detector", "brr", "failure `detector`: brr, dbrr or heartbeat")
	flag.Parse()
	if err := run(uint32(*id), *httpAddr, *bind, *join, *detector); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

func run(id uint32, httpAddr, bind, join, detector string) error {
	if id == 0 {
		return errors.New("-id is required (a number unique in the group, not 0)")
	}
	cfg := group.DefaultLocalConfig()
	cfg.ID = group.NodeID(id)
	cfg.BindAddr = bind
	cfg.Cluster = "example-service"
	if err := cfg.Detector.UnmarshalText([]byte(detector)); err != nil {
		return err
	}
	secret := os.Getenv("COHORT_GROUP_SECRET")
	if secret == "" {
		secret = demoSecret
		fmt.Println("using the demonstration secret: set COHORT_GROUP_SECRET (16+ bytes) for real use")
	}
	cfg.Secret = []byte(secret)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var (
		g   *group.Group
		err error
	)
	if join == "" {
		g, err = group.Start(cfg)
	} else {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		g, err = group.Join(jctx, cfg, strings.Split(join, ",")...)
		cancel()
	}
	if err != nil {
		return err
	}
	defer g.Close()

	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(g), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Printf("replica %v: group %s, HTTP http://%s/members\n", g.ID(), g.Addr(), ln.Addr())

	views := g.Views()
	for {
		select {
		case v := <-views:
			fmt.Printf("view %v root %v joined %v departed %v left %v\n", v, v.Root, v.Joined, v.Departed, v.Left)
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := g.Leave(lctx); err != nil {
				log.Printf("leave: %v", err)
			}
			fmt.Println("left the group")
			return nil
		}
	}
}

// members is the JSON answer of /members.
type members struct {
	Self    uint32   `json:"self"`
	Epoch   string   `json:"epoch"`
	Root    uint32   `json:"root"`
	Members []uint32 `json:"members"`
}

func handler(g *group.Group) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /members", func(w http.ResponseWriter, r *http.Request) {
		v := g.View()
		out := members{Self: uint32(g.ID()), Epoch: fmt.Sprintf("%d", v.Epoch), Root: uint32(v.Root)}
		for _, m := range v.Members {
			out.Members = append(out.Members, uint32(m))
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}
