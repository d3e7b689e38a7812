// Package netlab builds several "hosts" on one Linux machine for tests that
// need real separate network stacks: each host is a network namespace with
// its own veth pair on one bridge and its own address in a private subnet.
// Faults are data: cut a host's link, heal it, kill every process of a
// host; and, narrower, cut the path between two hosts while both still
// reach everyone else ([Lab.CutPair]), cut one direction of it
// ([Lab.CutOneWay]), heal either, or make a host that nobody can dial but
// that dials out freely, as behind a NAT ([Lab.SetDialOutOnly]). A cut
// drops packets in silence, as a broken network does. A Lab removes
// everything it made when closed (Close, or the test's cleanup), and
// [Leaks] says whether anything of a lab is left.
//
// It needs root and the ip command (iproute2); [New] skips the test, saying
// why, without them. The narrower faults live in each host's firewall and
// need the nft command as well (Debian: apt-get install nftables, with a
// kernel that has nf_tables and connection tracking); [NeedNft] skips a test
// without it. Names carry a per-lab prefix, so labs of tests running in
// parallel (even in several test binaries) do not collide.
package netlab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrUnavailable: this machine cannot build a lab (not root, no ip
// command, no network namespaces).
var ErrUnavailable = errors.New("netlab: network namespaces unavailable")

// Host is one namespace of a lab.
type Host struct {
	// Name is the namespace's name.
	Name string
	// Addr is the host's IPv4 address in the lab's subnet.
	Addr string
	veth string // the host-side end of its veth pair, on the bridge

	// What its firewall holds (links.go), guarded by the lab's mu.
	dropFrom    []string // addresses whose packets it drops, sorted
	dialOutOnly bool     // drops every packet that starts a conversation
}

// Lab is a set of hosts on one bridge.
type Lab struct {
	Prefix string
	// Bridge is the bridge's name; BridgeAddr its address (the machine
	// itself, reachable from every host).
	Bridge, BridgeAddr string
	Hosts              []*Host
	closed             bool
	mu                 sync.Mutex // guards the hosts' firewall records
}

// cmdTimeout bounds every ip command.
const cmdTimeout = 10 * time.Second

func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Available reports whether labs can be built here, and why not.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: no ip command (install iproute2)", ErrUnavailable)
	}
	return nil
}

// New builds a lab of k hosts for the test t, removed at the test's end.
// Without root or ip it skips t with the reason.
func New(t testing.TB, k int) *Lab {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	l, err := Build(k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// Build builds a lab of k hosts (1 ≤ k ≤ 200). The caller closes it.
func Build(k int) (*Lab, error) {
	if k < 1 || k > 200 {
		return nil, fmt.Errorf("netlab: %d hosts (want 1 to 200)", k)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	// A prefix of 4 characters keeps interface names within 15 bytes;
	// the subnet 10.(100+x).(y).0/24 is drawn with it.
	r := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	tag := strconv.FormatUint(r.Uint64()%(36*36*36), 36)
	l := &Lab{Prefix: "nl" + tag, Bridge: "nl" + tag + "br"}
	subnet := fmt.Sprintf("10.%d.%d", 100+r.IntN(100), r.IntN(256))
	l.BridgeAddr = subnet + ".1"
	fail := func(err error) (*Lab, error) {
		l.Close()
		return nil, err
	}
	if err := ip("link", "add", l.Bridge, "type", "bridge"); err != nil {
		return fail(err)
	}
	if err := ip("addr", "add", l.BridgeAddr+"/24", "dev", l.Bridge); err != nil {
		return fail(err)
	}
	if err := ip("link", "set", l.Bridge, "up"); err != nil {
		return fail(err)
	}
	for i := range k {
		h := &Host{Name: fmt.Sprintf("%sh%d", l.Prefix, i), Addr: fmt.Sprintf("%s.%d", subnet, i+2), veth: fmt.Sprintf("%sv%d", l.Prefix, i)}
		l.Hosts = append(l.Hosts, h)
		peer := h.veth + "p"
		for _, args := range [][]string{
			{"netns", "add", h.Name},
			{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", h.Name},
			{"link", "set", h.veth, "master", l.Bridge},
			{"link", "set", h.veth, "up"},
			{"-n", h.Name, "addr", "add", h.Addr + "/24", "dev", peer},
			{"-n", h.Name, "link", "set", peer, "up"},
			{"-n", h.Name, "link", "set", "lo", "up"},
		} {
			if err := ip(args...); err != nil {
				return fail(err)
			}
		}
	}
	return l, nil
}

// Command returns a command that runs name with args inside host h's
// namespace.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Cut takes h's link down: h can reach nobody, nobody can reach h.
func (l *Lab) Cut(h *Host) error { return ip("link", "set", h.veth, "down") }

// Heal brings h's link up again and waits (at most 5 s) until the kernel
// reports it operational, so traffic may flow when it returns (the first
// packets may still wait for address resolution).
func (l *Lab) Heal(h *Host) error {
	if err := ip("link", "set", h.veth, "up"); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		state, err := os.ReadFile("/sys/class/net/" + h.veth + "/operstate")
		if err == nil && strings.TrimSpace(string(state)) == "up" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlab: %s's link is not up 5 s after the heal (operstate %q, %v)", h.Name, strings.TrimSpace(string(state)), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill SIGKILLs every process in h's namespace (a host that dies).
func (l *Lab) Kill(h *Host) error {
	for _, pid := range pids(h.Name) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// pids lists the processes in namespace ns.
func pids(ns string) []int {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
	var ps []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// Close kills the processes left in the lab's hosts and removes the
// namespaces, the veth pairs and the bridge. It is idempotent.
func (l *Lab) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, h := range l.Hosts {
		l.Kill(h)
		ip("link", "del", h.veth) // removes its peer too; may already be gone
		if err := ip("netns", "del", h.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ip("link", "del", l.Bridge); err != nil && !strings.Contains(err.Error(), "Cannot find") {
		errs = append(errs, err)
	}
	if left := Leaks(l.Prefix); len(left) > 0 {
		errs = append(errs, fmt.Errorf("netlab: left after closing %s: %v", l.Prefix, left))
	}
	return errors.Join(errs...)
}

// Leaks lists the namespaces and links whose names start with prefix.
func Leaks(prefix string) []string {
	var left []string
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
				left = append(left, "netns "+f[0])
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 {
				name := strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")
				if strings.HasPrefix(name, prefix) {
					left = append(left, "link "+name)
				}
			}
		}
	}
	return left
}
