// Command service is a tiny HTTP service whose replicas keep a consistent
// member list with package group: every replica serves the same list (the
// membership view, numbered by its epoch) at /members, and prints each view
// it installs. Kill a replica and the others print the same new view.
//
// Three replicas on one machine (each in its own terminal):
//
//	go run ./examples/service -name a -http 127.0.0.1:8081 -bind 127.0.0.1:7951 -seeds 127.0.0.1:7952,127.0.0.1:7953
//	go run ./examples/service -name b -http 127.0.0.1:8082 -bind 127.0.0.1:7952 -seeds 127.0.0.1:7951,127.0.0.1:7953
//	go run ./examples/service -name c -http 127.0.0.1:8083 -bind 127.0.0.1:7953 -seeds 127.0.0.1:7951,127.0.0.1:7952
//
// in any order, or at once: every replica starts the same way, and they
// form one group.
// then `curl 127.0.0.1:8082/members`, and stop one with Ctrl-C (a graceful
// leave) or kill -9 (a crash). The group's secret comes from the
// environment (COHORT_GROUP_SECRET, at least 16 bytes; never on the command
// line, where every user of the machine can read it); without it the
// replicas use a fixed demonstration secret and say so.
package main

import (
	"context"
	"encoding/json"
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
	name := flag.String("name", "", "this replica's `name`, unique in the group (default: the host name)")
	httpAddr := flag.String("http", "127.0.0.1:8080", "HTTP `address` to serve /members on")
	bind := flag.String("bind", "127.0.0.1:7950", "group `address` (host:port) to listen on")
	seeds := flag.String("seeds", "", "comma-separated group `addresses` of the other replicas; empty: may start alone")
	meta := flag.String("meta", "", "this replica's `metadata`, shown to every replica with the views")
	detector := flag.String("detector", "brr", "failure `detector`: brr, dbrr or heartbeat")
	flag.Parse()
	if err := run(*name, *httpAddr, *bind, *seeds, *meta, *detector); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

func run(name, httpAddr, bind, seeds, meta, detector string) error {
	cfg := group.DefaultLocalConfig()
	cfg.Name = name
	cfg.Meta = []byte(meta)
	cfg.BindAddr = bind
	if seeds != "" {
		cfg.Seeds = group.SeedList(strings.Split(seeds, ","))
	}
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
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	g, err := group.New(jctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer g.Close(context.Background())

	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(g), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Printf("replica %s: group %s, HTTP http://%s/members\n", g.Name(), g.Addr(), ln.Addr())

	views := g.Views()
	for {
		select {
		case v := <-views:
			fmt.Printf("view %v leader %v joined %v departed %v left %v\n", v, v.Leader(), v.Joined, v.Departed, v.Left)
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
	Self    string   `json:"self"`
	Epoch   string   `json:"epoch"`
	Leader  string   `json:"leader"`
	Members []member `json:"members"`
}

type member struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	Meta string `json:"meta"`
}

func handler(g *group.Group) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /members", func(w http.ResponseWriter, r *http.Request) {
		v := g.View()
		out := members{Self: g.Name(), Epoch: fmt.Sprintf("%d", v.Epoch), Leader: v.Leader().Name}
		for _, m := range v.Members {
			out.Members = append(out.Members, member{m.Name, m.Addr, string(m.Meta)})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}
