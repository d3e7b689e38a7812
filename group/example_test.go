package group_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// exampleConfig returns a loopback configuration for the node named name,
// which asks seeds to join.
func exampleConfig(name string, seeds ...string) group.Config {
	cfg := group.DefaultLocalConfig()
	cfg.Name = name
	cfg.Cluster = "example"
	cfg.Secret = []byte("use 16+ random bytes in production")
	cfg.Seeds = group.SeedList(seeds)
	return cfg
}

// A group of three on this machine: every node calls New; the first has
// no seed yet, the others name it, and all three agree on the view.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := group.New(ctx, exampleConfig("a"))
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close(ctx)
	second, err := group.New(ctx, exampleConfig("b", first.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close(ctx)
	third, err := group.New(ctx, exampleConfig("c", first.Addr(), second.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer third.Close(ctx)

	for v := range third.Views() {
		if len(v.Members) == 3 {
			fmt.Println("members:", v.Members)
			break
		}
	}
	// Output: members: [a b c]
}

// A member that crashes is excluded: every survivor installs the same
// view without it.
func ExampleGroup_Views() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, _ := group.New(ctx, exampleConfig("a"))
	defer a.Close(ctx)
	b, _ := group.New(ctx, exampleConfig("b", a.Addr()))
	defer b.Close(ctx)
	c, err := group.New(ctx, exampleConfig("c", a.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	for v := range a.Views() { // wait until a sees all three
		if len(v.Members) == 3 {
			break
		}
	}
	c.Close(ctx) // a crash, as far as a and b can tell

	for v := range a.Views() {
		if !v.Has(c.ID()) {
			fmt.Println("members:", v.Members, "departed:", v.Departed, "left:", v.Left)
			break
		}
	}
	// Output: members: [a b] departed: [c] left: []
}

// A graceful leave is reported as such, not as a failure.
func ExampleGroup_Leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, _ := group.New(ctx, exampleConfig("a"))
	defer a.Close(ctx)
	b, err := group.New(ctx, exampleConfig("b", a.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	if err := b.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	b.Close(ctx)
	for v := range a.Views() {
		if !v.Has(b.ID()) {
			fmt.Println("members:", v.Members, "left:", v.Left)
			break
		}
	}
	// Output: members: [a] left: [b]
}

// Every member that delivers a view agrees on who owns each key, and on
// the leader; the epoch goes with a write as its fencing token.
func ExampleView_Owner() {
	v := group.View{Epoch: 12, Members: []group.Member{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	for _, key := range []string{"user:1", "user:2", "user:3"} {
		fmt.Printf("%s → %s (epoch %d)\n", key, v.Owner(key), v.Epoch)
	}
	fmt.Println("leader:", v.Leader())
	// Output:
	// user:1 → a (epoch 12)
	// user:2 → a (epoch 12)
	// user:3 → c (epoch 12)
	// leader: a
}

// Metadata changed at run time is delivered with a view, the same at
// every member.
func ExampleGroup_SetMeta() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := exampleConfig("a")
	cfg.Meta = []byte("weight=1")
	a, err := group.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := group.New(ctx, exampleConfig("b", a.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(ctx)

	if err := a.SetMeta(ctx, []byte("weight=2")); err != nil {
		log.Fatal(err)
	}
	for v := range b.Views() {
		if m, _ := v.Member(a.ID()); string(m.Meta) == "weight=2" {
			fmt.Printf("b sees %s with %s\n", m.Name, m.Meta)
			break
		}
	}
	// Output: b sees a with weight=2
}
