package netlab

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary act, inside a lab host, as a TCP echo
// server (NETLAB_ECHO=addr) or as a client that checks one echo
// (NETLAB_DIAL=addr), as one end of a datagram exchange (NETLAB_UDP, see
// udpExchange), or as a node of transport/tcp (NETLAB_TRANSPORT, see
// transportNode).
func TestMain(m *testing.M) {
	if mode := os.Getenv("NETLAB_TRANSPORT"); mode != "" {
		os.Exit(transportNode(mode))
	}
	if spec := os.Getenv("NETLAB_UDP"); spec != "" {
		os.Exit(udpExchange(spec))
	}
	if addr := os.Getenv("NETLAB_ECHO"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(2)
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(0)
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte(line))
			}()
		}
	}
	if addr := os.Getenv("NETLAB_DIAL"); addr != "" {
		if err := echo(addr); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echo sends a line to addr and checks it comes back, within a second.
func echo(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		return fmt.Errorf("echo from %s: %q, %v", addr, line, err)
	}
	return nil
}

// Three hosts: one serves, another reaches it across the bridge; a cut
// link isolates it and a heal restores it; a killed host's processes die;
// closing leaves nothing behind.
func TestLab(t *testing.T) {
	l := New(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := l.Hosts[1]
	addr := srv.Addr + ":7099"
	cmd := srv.Command(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), "NETLAB_ECHO="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func() { exited <- cmd.Wait() }()
	if strings.TrimSpace(line) != "listening" {
		t.Fatalf("echo server in %s: %q", srv.Name, line)
	}
	dialFrom := func(h *Host) error {
		c := h.Command(ctx, os.Args[0])
		c.Env = append(os.Environ(), "NETLAB_DIAL="+addr)
		if b, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, b)
		}
		return nil
	}
	if err := dialFrom(l.Hosts[0]); err != nil {
		t.Fatalf("host 0 → host 1: %v", err)
	}
	if err := echo(addr); err != nil {
		t.Fatalf("this machine → host 1: %v", err)
	}
	if err := l.Cut(srv); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(l.Hosts[2]); err == nil {
		t.Fatal("host 2 reached host 1 through a cut link")
	}
	if err := l.Heal(srv); err != nil {
		t.Fatal(err)
	}
	// Host 2's failed address resolution of host 1 is retried, and a
	// loaded machine may take more than one dial's second: a few tries.
	for try := 1; ; try++ {
		err := dialFrom(l.Hosts[2])
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("host 2 → host 1 after the heal, %d tries: %v", try, err)
		}
	}
	l.Kill(srv)
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("the echo server survived its host's kill")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := Leaks(l.Prefix); len(left) > 0 {
		t.Fatalf("left after Close: %v", left)
	}
}
