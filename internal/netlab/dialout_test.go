package netlab

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// streamMessages is how many numbered frames node 1 sends node 2 in
// TestTransportDialOutOnlyHost.
const streamMessages = 5000

// streamNode is one node of TestTransportDialOutOnlyHost, run inside a
// lab host. "stream-send" (node 1) listens on NETLAB_LISTEN, prints
// "listening ADDR", knows node 2 at NETLAB_PEER (an address nobody can
// dial), queues streamMessages numbered frames for it at once, and prints
// "dials=D accepted=A established=E" when its standard input closes. "stream-out" (node
// 2, Config.DialOutOnly) listens on NETLAB_LISTEN, knows node 1 at
// NETLAB_PEER, and prints "in order N" once it has the frames, or what
// went wrong.
func streamNode(mode string) int {
	cfg := tcp.DefaultConfig()
	cfg.JobID, cfg.Secret = "netlab", []byte("netlab transport test secret!!!!")
	cfg.ListenAddr, cfg.DialTimeout = os.Getenv("NETLAB_LISTEN"), time.Second
	cfg.Node = 1
	if mode == "stream-out" {
		cfg.Node, cfg.DialOutOnly = 2, true
	}
	tr, err := tcp.Listen(cfg)
	if err != nil {
		fmt.Println("listen:", err)
		return 2
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch mode {
	case "stream-send":
		tr.SetHandler(transport.HandlerFuncs{})
		tr.SetPeer(2, os.Getenv("NETLAB_PEER"))
		fmt.Println("listening", tr.Addr())
		for i := range streamMessages {
			var p [8]byte
			binary.LittleEndian.PutUint64(p[:], uint64(i))
			if err := tr.Send(ctx, 2, wire.Frame{Kind: transportKind, Payload: p[:]}); err != nil {
				fmt.Println("send:", err)
				return 1
			}
		}
		io.Copy(io.Discard, os.Stdin)
		s := tr.Stats()
		fmt.Printf("dials=%d accepted=%d established=%d\n", s.Dials, s.Accepted, s.Established)
		return 0
	case "stream-out":
		var mu sync.Mutex
		next, bad := 0, ""
		done := make(chan struct{})
		tr.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
			mu.Lock()
			defer mu.Unlock()
			if bad != "" || next == streamMessages {
				return
			}
			if got := int(binary.LittleEndian.Uint64(f.Payload)); got != next {
				bad = fmt.Sprintf("got %d, want %d", got, next)
				close(done)
				return
			}
			if next++; next == streamMessages {
				close(done)
			}
		}})
		tr.SetPeer(1, os.Getenv("NETLAB_PEER"))
		select {
		case <-done:
		case <-ctx.Done():
		}
		mu.Lock()
		defer mu.Unlock()
		if bad != "" || next != streamMessages {
			fmt.Printf("%d of %d in order: %s; %+v\n", next, streamMessages, bad, tr.Stats())
			return 1
		}
		fmt.Println("in order", next)
		return 0
	}
	fmt.Println("unknown mode", mode)
	return 2
}

// A host whose inbound connections are all dropped (SetDialOutOnly) runs
// a transport node with Config.DialOutOnly: a node on another host, whose
// address for it leads nowhere, has frames queued for it from the start;
// they reach it, all and in order, over the connection it dials, and the
// other node stops dialling it once it has heard from it.
func TestTransportDialOutOnlyHost(t *testing.T) {
	NeedNft(t)
	l := New(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, d := l.Hosts[0], l.Hosts[1]
	if err := l.SetDialOutOnly(d, true); err != nil {
		t.Fatal(err)
	}
	dAddr := d.Addr + ":7102"
	snd := a.Command(ctx, os.Args[0])
	snd.Env = append(os.Environ(), "NETLAB_TRANSPORT=stream-send", "NETLAB_LISTEN="+a.Addr+":0", "NETLAB_PEER="+dAddr)
	stdin, err := snd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := snd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Start(); err != nil {
		t.Fatal(err)
	}
	defer snd.Wait()
	rd := bufio.NewReader(out)
	line, _ := rd.ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "listening" {
		stdin.Close()
		t.Fatalf("node 1 in %s: %q", a.Name, line)
	}
	rcv := d.Command(ctx, os.Args[0])
	rcv.Env = append(os.Environ(), "NETLAB_TRANSPORT=stream-out", "NETLAB_LISTEN="+dAddr, "NETLAB_PEER="+f[1])
	b, err := rcv.CombinedOutput()
	stdin.Close()
	if want := fmt.Sprintf("in order %d", streamMessages); err != nil || strings.TrimSpace(string(b)) != want {
		t.Fatalf("node 2 in dial-out-only %s: %v, output %q; want %q", d.Name, err, b, want)
	}
	line, _ = rd.ReadString('\n')
	var dials, accepted, established int
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "dials=%d accepted=%d established=%d", &dials, &accepted, &established); err != nil {
		t.Fatalf("node 1's stats: %q: %v", line, err)
	}
	// Node 1 may have dialled before it heard from node 2 (each attempt
	// times out), but every connection it used was node 2's.
	if accepted == 0 || established != accepted {
		t.Fatalf("node 1 put %d connections in use, %d of them accepted: a dial to the dial-out-only host succeeded", established, accepted)
	}
	t.Logf("node 1 dialled the dial-out-only host %d times in vain; %d connections, all dialled by it", dials, established)
}
