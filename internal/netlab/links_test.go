package netlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Each test below builds a lab, starts an echo server on every host and
// asks, from inside hosts, who can open a TCP connection to whom, and, with
// datagrams, which direction of a path delivers: what a process on the
// host would observe.

const (
	echoPort = 7100
	udpPort  = 7101
	// udpWindow is how long each end of a datagram exchange sends and
	// listens.
	udpWindow = 1500 * time.Millisecond
)

// udpExchange is one end of a datagram exchange, run inside a host: spec
// is "LOCAL PEER send" or "LOCAL PEER quiet". It binds LOCAL and, for
// udpWindow, sends a datagram to PEER every 20 ms (unless quiet) while
// counting the datagrams that arrive from PEER's address; it prints
// "received N".
func udpExchange(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Println("bad NETLAB_UDP:", spec)
		return 2
	}
	c, err := net.ListenPacket("udp", f[0])
	if err != nil {
		fmt.Println("listen:", err)
		return 2
	}
	defer c.Close()
	peer, err := net.ResolveUDPAddr("udp", f[1])
	if err != nil {
		fmt.Println("peer:", err)
		return 2
	}
	received := 0
	buf := make([]byte, 64)
	for end := time.Now().Add(udpWindow); time.Now().Before(end); {
		if f[2] == "send" {
			// A failed send is what the test measures; the count says it.
			c.WriteTo([]byte("datagram"), peer)
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				break
			}
			if ua, ok := from.(*net.UDPAddr); ok && ua.IP.Equal(peer.IP) {
				received++
			}
		}
	}
	fmt.Printf("received %d\n", received)
	return 0
}

// startEcho starts a TCP echo server on h at echoPort, waits until it
// listens, and stops it at the test's end.
func startEcho(t *testing.T, ctx context.Context, h *Host) {
	t.Helper()
	cmd := h.Command(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("NETLAB_ECHO=%s:%d", h.Addr, echoPort))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The line comes, or the server exits, or ctx ends and kills it.
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "listening" {
		t.Fatalf("echo server in %s: %q", h.Name, line)
	}
}

// dial opens a TCP connection from host from to to's echo server and
// checks one echo, within a second; from nil dials from this machine.
func dial(ctx context.Context, from, to *Host) error {
	addr := fmt.Sprintf("%s:%d", to.Addr, echoPort)
	if from == nil {
		return echo(addr)
	}
	c := from.Command(ctx, os.Args[0])
	c.Env = append(os.Environ(), "NETLAB_DIAL="+addr)
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(b)))
	}
	return nil
}

// path is one TCP reachability question: can from (nil: this machine)
// connect to to, and is it wanted?
type path struct {
	from, to *Host
	want     bool
}

// checkPaths asks every question at once. A wanted connection gets a few
// tries (a loaded machine may take more than a dial's second, and a
// healed path may first wait for address resolution); an unwanted one
// must fail its single try.
func checkPaths(t *testing.T, ctx context.Context, stage string, paths ...path) {
	t.Helper()
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() {
			if !p.want {
				if dial(ctx, p.from, p.to) == nil {
					errs[i] = errors.New("connected, want no connection")
				}
				return
			}
			for try := 1; ; try++ {
				err := dial(ctx, p.from, p.to)
				if err == nil {
					return
				}
				if try == 4 {
					errs[i] = fmt.Errorf("%d tries: %v", try, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			from := "this machine"
			if paths[i].from != nil {
				from = paths[i].from.Name
			}
			t.Errorf("%s: %s → %s: %v", stage, from, paths[i].to.Name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// exchange runs a datagram exchange between a and b (b only listening
// when bQuiet) and returns how many datagrams each received from the
// other.
func exchange(t *testing.T, ctx context.Context, a, b *Host, bQuiet bool) (aGot, bGot int) {
	t.Helper()
	run := func(h, peer *Host, mode string, got *int, errp *error) {
		c := h.Command(ctx, os.Args[0])
		c.Env = append(os.Environ(), fmt.Sprintf("NETLAB_UDP=%s:%d %s:%d %s", h.Addr, udpPort, peer.Addr, udpPort, mode))
		b, err := c.CombinedOutput()
		if err == nil {
			_, err = fmt.Sscanf(string(b), "received %d", got)
		}
		if err != nil {
			*errp = fmt.Errorf("datagrams in %s: %v: %q", h.Name, err, b)
		}
	}
	bMode := "send"
	if bQuiet {
		bMode = "quiet"
	}
	var aErr, bErr error
	var wg sync.WaitGroup
	wg.Go(func() { run(a, b, "send", &aGot, &aErr) })
	wg.Go(func() { run(b, a, bMode, &bGot, &bErr) })
	wg.Wait()
	if err := errors.Join(aErr, bErr); err != nil {
		t.Fatal(err)
	}
	return aGot, bGot
}

// newLinkLab builds a lab of k hosts with an echo server on each, or
// skips without root, ip or nft.
func newLinkLab(t *testing.T, k int) (*Lab, context.Context) {
	t.Helper()
	NeedNft(t)
	l := New(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	for _, h := range l.Hosts {
		startEcho(t, ctx, h)
	}
	return l, ctx
}

// A pair cut: A and B cannot open a connection to each other either way,
// while both still reach C and C both, and the machine reaches both.
// Healing one way of it leaves the other: datagrams then go A→B but not
// B→A. Healing the pair restores everything.
func TestCutPair(t *testing.T) {
	l, ctx := newLinkLab(t, 3)
	a, b, c := l.Hosts[0], l.Hosts[1], l.Hosts[2]
	checkPaths(t, ctx, "before the cut", path{a, b, true}, path{b, a, true})
	if err := l.CutPair(a, b); err != nil {
		t.Fatal(err)
	}
	checkPaths(t, ctx, "pair cut",
		path{a, b, false}, path{b, a, false},
		path{a, c, true}, path{b, c, true}, path{c, a, true}, path{c, b, true},
		path{nil, a, true}, path{nil, b, true})
	if err := l.HealOneWay(a, b); err != nil {
		t.Fatal(err)
	}
	if atA, atB := exchange(t, ctx, a, b, false); atA != 0 || atB == 0 {
		t.Fatalf("A→B healed, B→A still cut: A received %d datagrams from B (want 0), B %d from A (want some)", atA, atB)
	}
	if err := l.HealPair(a, b); err != nil {
		t.Fatal(err)
	}
	checkPaths(t, ctx, "healed", path{a, b, true}, path{b, a, true})
}

// A one-way cut A→B: A's datagrams to B are lost, B's reach A; neither can
// complete a TCP handshake with the other (each needs both ways); both
// still reach C and C both. Healing it restores both directions.
func TestCutOneWay(t *testing.T) {
	l, ctx := newLinkLab(t, 3)
	a, b, c := l.Hosts[0], l.Hosts[1], l.Hosts[2]
	if atA, atB := exchange(t, ctx, a, b, false); atA == 0 || atB == 0 {
		t.Fatalf("before the cut: A received %d datagrams from B, B %d from A; want some each", atA, atB)
	}
	if err := l.CutOneWay(a, b); err != nil {
		t.Fatal(err)
	}
	if atA, atB := exchange(t, ctx, a, b, false); atA == 0 || atB != 0 {
		t.Fatalf("A→B cut: A received %d datagrams from B (want some), B %d from A (want 0)", atA, atB)
	}
	checkPaths(t, ctx, "one-way cut",
		path{a, b, false}, path{b, a, false},
		path{a, c, true}, path{b, c, true}, path{c, a, true}, path{c, b, true})
	if err := l.HealOneWay(a, b); err != nil {
		t.Fatal(err)
	}
	if atA, atB := exchange(t, ctx, a, b, false); atA == 0 || atB == 0 {
		t.Fatalf("healed: A received %d datagrams from B, B %d from A; want some each", atA, atB)
	}
	checkPaths(t, ctx, "healed", path{a, b, true}, path{b, a, true})
}

// A dial-out-only host D: nobody (another host, the machine) can open a
// connection to it nor start a datagram exchange with it; it opens
// connections to others and the echo comes back over them; datagrams it
// starts are answered; it still reaches its own server. Made ordinary
// again, it can be dialled.
func TestDialOutOnly(t *testing.T) {
	l, ctx := newLinkLab(t, 2)
	d, c := l.Hosts[0], l.Hosts[1]
	checkPaths(t, ctx, "before", path{c, d, true})
	if err := l.SetDialOutOnly(d, true); err != nil {
		t.Fatal(err)
	}
	checkPaths(t, ctx, "dial-out only",
		path{c, d, false}, path{nil, d, false},
		path{d, c, true}, path{d, d, true})
	if atC, atD := exchange(t, ctx, c, d, true); atD != 0 {
		t.Fatalf("C started datagrams to a dial-out-only D: D received %d, want 0 (C received %d)", atD, atC)
	}
	if atD, atC := exchange(t, ctx, d, c, false); atD == 0 || atC == 0 {
		t.Fatalf("D started datagrams to C: D received %d from C, C %d from D; want some each", atD, atC)
	}
	if err := l.SetDialOutOnly(d, false); err != nil {
		t.Fatal(err)
	}
	checkPaths(t, ctx, "ordinary again", path{c, d, true}, path{nil, d, true})
}

// Closing a lab leaves no firewall behind: the tables live in the hosts'
// namespaces, which go with it.
func TestCutsGoWithTheLab(t *testing.T) {
	NeedNft(t)
	l, err := Build(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a, b := l.Hosts[0], l.Hosts[1]
	if err := errors.Join(l.CutPair(a, b), l.SetDialOutOnly(a, true)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := Leaks(l.Prefix); len(left) > 0 {
		t.Fatalf("left after Close: %v", left)
	}
}
