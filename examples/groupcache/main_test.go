package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang/groupcache/consistenthash"
)

// node is one running groupcache process and the lines it printed.
type node struct {
	name, group, url string
	cmd              *exec.Cmd

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and renewed at every line
	done    bool
}

func startNode(t *testing.T, bin, name string, seeds []string) *node {
	t.Helper()
	args := []string{"-name", name, "-http", "127.0.0.1:0", "-bind", "127.0.0.1:0"}
	if seeds != nil {
		args = append(args, "-seeds", strings.Join(seeds, ","))
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "COHORT_GROUP_SECRET=groupcache-test-secret-0123456789")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, cmd: cmd, changed: make(chan struct{})}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			n.mu.Lock()
			n.lines = append(n.lines, sc.Text())
			close(n.changed)
			n.changed = make(chan struct{})
			n.mu.Unlock()
		}
		io.Copy(io.Discard, out)
		n.mu.Lock()
		n.done = true
		close(n.changed)
		n.mu.Unlock()
	}()
	l := n.await(t, "its addresses", func(l string) bool { return strings.HasPrefix(l, "node "+name+": group ") })
	// node NAME: group ADDR, cache URL
	f := strings.Fields(l)
	n.group, n.url = strings.TrimSuffix(f[3], ","), f[5]
	return n
}

// await returns the first line n printed that satisfies ok.
func (n *node) await(t *testing.T, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for i := 0; ; {
		n.mu.Lock()
		lines, done, ch := n.lines, n.done, n.changed
		n.mu.Unlock()
		for ; i < len(lines); i++ {
			if ok(lines[i]) {
				return lines[i]
			}
		}
		if done {
			t.Fatalf("%s exited without printing %s", n.name, what)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s printed no %s within 30 s", n.name, what)
		}
	}
}

// awaitPeers waits until n sets exactly the peers of ns.
func (n *node) awaitPeers(t *testing.T, ns ...*node) {
	t.Helper()
	var want []string
	for _, m := range ns {
		want = append(want, m.url)
	}
	slices.Sort(want)
	n.await(t, fmt.Sprint("peers ", want), func(l string) bool {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "peers" {
			return false
		}
		got := slices.Sorted(slices.Values(f[2:]))
		return slices.Equal(got, want)
	})
}

// fills counts the "fill KEY" lines n printed.
func (n *node) fills(key string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, l := range n.lines {
		if l == "fill "+key {
			c++
		}
	}
	return c
}

func get(t *testing.T, n *node, key string) string {
	t.Helper()
	resp, err := http.Get(n.url + "/get/" + key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s through %s: %s %s", key, n.name, resp.Status, b)
	}
	return strings.TrimSpace(string(b))
}

// owner is the node groupcache's HTTPPool picks for key among ns: its
// consistent hash (50 points per peer, CRC-32) over their URLs.
func owner(key string, ns ...*node) *node {
	ring := consistenthash.New(50, nil)
	for _, n := range ns {
		ring.Add(n.url)
	}
	u := ring.Get(key)
	for _, n := range ns {
		if n.url == u {
			return n
		}
	}
	return nil
}

// TestPeersFromViews starts three nodes, checks that a Get through any of
// them is filled once, by the key's owner over the three, then makes one
// leave and checks that the others drop it from their pools and that keys
// it owned are filled by their owner over the two left.
func TestPeersFromViews(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := filepath.Join(t.TempDir(), "groupcache")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	a := startNode(t, bin, "a", nil)
	b := startNode(t, bin, "b", []string{a.group})
	c := startNode(t, bin, "c", []string{a.group, b.group})
	all := []*node{a, b, c}
	for _, n := range all {
		n.awaitPeers(t, all...)
	}

	var bKeys []string
	for i := range 30 {
		key := fmt.Sprint("k", i)
		o := owner(key, all...)
		for _, via := range all {
			if got, want := get(t, via, key), "value of "+key+" from "+o.name; got != want {
				t.Fatalf("GET %s through %s: %q, want %q", key, via.name, got, want)
			}
		}
		if f := a.fills(key) + b.fills(key) + c.fills(key); f != 1 || o.fills(key) != 1 {
			t.Fatalf("%s: %d fills, want 1, at its owner %s", key, f, o.name)
		}
	}
	// Keys b owns, not read yet (a reader may keep a copy of a key it
	// read from its owner: groupcache's hot cache).
	for i := 0; len(bKeys) < 10; i++ {
		if key := fmt.Sprint("m", i); owner(key, all...) == b {
			bKeys = append(bKeys, key)
		}
	}

	b.cmd.Process.Signal(syscall.SIGTERM) // b leaves the group
	a.awaitPeers(t, a, c)
	c.awaitPeers(t, a, c)
	for _, key := range bKeys {
		o := owner(key, a, c)
		for _, via := range []*node{a, c} {
			if got, want := get(t, via, key), "value of "+key+" from "+o.name; got != want {
				t.Fatalf("after b left, GET %s through %s: %q, want %q", key, via.name, got, want)
			}
		}
		if o.fills(key) != 1 {
			t.Fatalf("after b left, %s: %d fills at its new owner %s, want 1", key, o.fills(key), o.name)
		}
	}
	t.Logf("%d keys of b moved to a and c", len(bKeys))
}
