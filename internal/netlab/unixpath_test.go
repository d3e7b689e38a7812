package netlab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// transport/tcp's same-host path on a lab: a node connects to a node of
// its own host over the Unix socket, to a node of another host over TCP,
// and another host cannot even see the socket's name (abstract names
// belong to the network namespace), nor can this machine.

var transportKind = core.MakeKind(core.ProtoTest, 30)

// transportNode is one node of a job, run inside a lab host: "serve"
// listens on NETLAB_LISTEN, prints "listening ADDR UNIXNAME" and echoes
// every frame to its sender until its standard input closes; "dial" sends
// a frame to node 1 at NETLAB_PEER, waits for the echo, tries to open
// NETLAB_PEER_UNIX as a plain Unix socket and prints "echo unix=U
// established=E visible=V". It returns the exit code.
func transportNode(mode string) int {
	if strings.HasPrefix(mode, "stream-") {
		return streamNode(mode) // dialout_test.go
	}
	cfg := tcp.DefaultConfig()
	cfg.JobID, cfg.Secret = "netlab", []byte("netlab transport test secret!!!!")
	cfg.Node, cfg.ListenAddr = 1, os.Getenv("NETLAB_LISTEN")
	if mode == "dial" {
		cfg.Node = 2
	}
	tr, err := tcp.Listen(cfg)
	if err != nil {
		fmt.Println("listen:", err)
		return 2
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	switch mode {
	case "serve":
		tr.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
			tr.Send(ctx, f.Src, wire.Frame{Kind: f.Kind, Payload: f.Payload})
		}})
		fmt.Println("listening", tr.Addr(), tr.UnixAddr())
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "dial":
		got := make(chan struct{}, 1)
		tr.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) { got <- struct{}{} }})
		tr.SetPeer(1, os.Getenv("NETLAB_PEER"))
		if err := tr.Send(ctx, 1, wire.Frame{Kind: transportKind, Payload: []byte("ping")}); err != nil {
			fmt.Println("send:", err)
			return 1
		}
		select {
		case <-got:
		case <-ctx.Done():
			fmt.Println("no echo:", tr.Stats())
			return 1
		}
		visible := false
		if c, err := net.Dial("unix", os.Getenv("NETLAB_PEER_UNIX")); err == nil {
			visible = true
			c.Close()
		}
		s := tr.Stats()
		fmt.Printf("echo unix=%d established=%d visible=%v\n", s.Unix, s.Established, visible)
		return 0
	}
	fmt.Println("unknown mode", mode)
	return 2
}

func TestTransportUnixPathPerHost(t *testing.T) {
	l := New(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srvHost := l.Hosts[0]
	srv := srvHost.Command(ctx, os.Args[0])
	srv.Env = append(os.Environ(), "NETLAB_TRANSPORT=serve", "NETLAB_LISTEN="+srvHost.Addr+":0")
	stdin, err := srv.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		srv.Wait()
	}()
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "listening" || !strings.HasPrefix(f[2], "@cohort/") {
		t.Fatalf("server in %s: %q", srvHost.Name, line)
	}
	addr, name := f[1], f[2]
	if c, err := net.Dial("unix", name); err == nil {
		c.Close()
		t.Fatalf("this machine opened %s, the Unix socket of a process in namespace %s", name, srvHost.Name)
	}
	for _, c := range []struct {
		from *Host
		want string
	}{
		{srvHost, "echo unix=1 established=1 visible=true"},     // same host: the Unix socket
		{l.Hosts[1], "echo unix=0 established=1 visible=false"}, // another host: TCP, the name unseen
	} {
		cmd := c.from.Command(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), "NETLAB_TRANSPORT=dial", "NETLAB_LISTEN="+c.from.Addr+":0",
			"NETLAB_PEER="+addr, "NETLAB_PEER_UNIX="+name)
		b, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(b)) != c.want {
			t.Errorf("node in %s → node in %s: %v, output %q; want %q", c.from.Name, srvHost.Name, err, b, c.want)
		}
	}
}
