package supernode_test

import (
	"context"
	"log"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/supernode"
)

// groupConfig is a group member's configuration for one machine.
func groupConfig(name string) group.Config {
	c := group.DefaultLocalConfig()
	c.Name = name
	c.Cluster = "groupseeds-test"
	c.Secret = []byte("0123456789abcdef-groupseeds")
	c.Detector = group.DetectorBRR
	return c
}

func TestGroupSeedsChecksItsFields(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		src  supernode.GroupSeeds
		want string
	}{
		{supernode.GroupSeeds{}, "Addrs is empty"},
		{supernode.GroupSeeds{Addrs: []string{"127.0.0.1:1"}}, "Creds is nil"},
	} {
		if _, err := c.src.Seeds(ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.src, err, c.want)
		}
	}
}

// TestGroupSeeds: members register with a supernode under their
// certificates' names; a joiner lists those of its group's prefix (not
// the host daemon's) and joins.
func TestGroupSeeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	if err := ca.Init(dir, "cluster"); err != nil {
		t.Fatal(err)
	}
	creds := func(name string) *ca.Credentials {
		if err := ca.Issue(dir, dir, name); err != nil {
			t.Fatal(err)
		}
		c, err := ca.Load(filepath.Join(dir, "ca.crt"), dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	snCreds := creds("127.0.0.1")
	srv := httptest.NewUnstartedServer(supernode.Handler(supernode.NewRegistry(0, nil), nil))
	srv.TLS = snCreds.ServerConfig(nil)
	srv.StartTLS()
	defer srv.Close()
	sn := []string{srv.Listener.Addr().String()}

	daemon := supernode.GroupSeeds{Addrs: sn, Creds: creds("host-daemon")}
	if err := daemon.Register(ctx, "127.0.0.1:1"); err != nil { // not a group member
		t.Fatal(err)
	}
	first := supernode.GroupSeeds{Addrs: sn, Creds: creds("orders-1"), Prefix: "orders-"}
	if _, err := first.Seeds(ctx); err == nil {
		t.Fatal("Seeds with no registration of the prefix: no error")
	}
	a, err := group.New(ctx, groupConfig("n1"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if err := first.Register(ctx, a.Addr()); err != nil {
		t.Fatal(err)
	}
	cfg := groupConfig("n2")
	cfg.Seeds = supernode.GroupSeeds{Addrs: sn, Creds: creds("orders-2"), Prefix: "orders-"}
	if got, err := cfg.Seeds.Seeds(ctx); err != nil || !slices.Equal(got, []string{a.Addr()}) {
		t.Fatalf("seeds %v, %v; want [%s]", got, err, a.Addr())
	}
	b, err := group.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	for joined := false; !joined; {
		select {
		case v := <-a.Views():
			joined = len(v.Members) == 2
		case <-ctx.Done():
			t.Fatal("no view of a with b before the deadline")
		}
	}

	if err := (supernode.GroupSeeds{Addrs: []string{"127.0.0.1:1"}, Creds: snCreds}).Register(ctx, a.Addr()); err == nil {
		t.Error("Register with no supernode listening: no error")
	}
}

// Seeds from the supernodes of a cohort cluster: the node holds a
// certificate of the cluster's CA under a name of its own ("orders-1"),
// lists the registrations of its group's prefix, and, once a member,
// registers itself for the next joiners, renewing the registration before
// it expires.
func ExampleGroupSeeds() {
	creds, err := ca.Load("/etc/cohort/ca.crt", "/etc/cohort", "orders-1")
	if err != nil {
		log.Fatal(err)
	}
	seeds := supernode.GroupSeeds{Addrs: []string{"10.0.0.1:7900"}, Creds: creds, Prefix: "orders-"}
	cfg := group.DefaultLANConfig()
	cfg.Name = "orders-1"
	cfg.AdvertiseAddr = "10.0.0.4:7950"
	cfg.Cluster = "orders"
	cfg.Secret = []byte("use 16+ random bytes in production")
	cfg.Seeds = seeds

	ctx := context.Background()
	g, err := group.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)
	for {
		if err := seeds.Register(ctx, g.Addr()); err != nil {
			log.Print(err)
		}
		time.Sleep(10 * time.Second) // well within the supernodes' expiry
	}
}
