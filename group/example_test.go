package group_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// exampleConfig returns a loopback configuration for node id.
func exampleConfig(id group.NodeID) group.Config {
	cfg := group.DefaultLocalConfig()
	cfg.ID = id
	cfg.Cluster = "example"
	cfg.Secret = []byte("use 16+ random bytes in production")
	return cfg
}

// A group of three on this machine: the first member starts it, two join
// through it, and all three agree on the view.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := group.Start(exampleConfig(1))
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()
	second, err := group.Join(ctx, exampleConfig(2), first.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close()
	third, err := group.Join(ctx, exampleConfig(3), first.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer third.Close()

	for v := range third.Views() {
		if len(v.Members) == 3 {
			fmt.Println("members:", v.Members)
			break
		}
	}
	// Output: members: [n1 n2 n3]
}

// A member that crashes is excluded: every survivor installs the same
// view without it.
func ExampleGroup_Views() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, _ := group.Start(exampleConfig(1))
	defer a.Close()
	b, _ := group.Join(ctx, exampleConfig(2), a.Addr())
	defer b.Close()
	c, err := group.Join(ctx, exampleConfig(3), a.Addr())
	if err != nil {
		log.Fatal(err)
	}
	for v := range a.Views() { // wait until a sees all three
		if len(v.Members) == 3 {
			break
		}
	}
	c.Close() // a crash, as far as a and b can tell

	for v := range a.Views() {
		if !v.Has(3) {
			fmt.Println("members:", v.Members, "departed:", v.Departed, "left:", v.Left)
			break
		}
	}
	// Output: members: [n1 n2] departed: [n3] left: []
}

// A graceful leave is reported as such, not as a failure.
func ExampleGroup_Leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, _ := group.Start(exampleConfig(1))
	defer a.Close()
	b, err := group.Join(ctx, exampleConfig(2), a.Addr())
	if err != nil {
		log.Fatal(err)
	}
	if err := b.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	b.Close()
	for v := range a.Views() {
		if !v.Has(2) {
			fmt.Println("members:", v.Members, "left:", v.Left)
			break
		}
	}
	// Output: members: [n1] left: [n2]
}
