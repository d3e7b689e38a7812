package tcp

import (
	"net"
	"testing"
	"time"
)

// A peer whose process stopped reading and writing (a process the kernel
// does not schedule) leaves a link that answers once it has been silent
// for the time asked: its kernel acknowledges what is written to it. A
// peer whose process closed its end (what a crash does) leaves none.
func TestLinkAnswersSilentPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	peer, err := ln.Accept() // the peer: never reads, never writes
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{nc: nc}
	const silent, acked = 50 * time.Millisecond, time.Minute
	if _, err := nc.Write([]byte("a heartbeat")); err != nil {
		t.Fatal(err)
	}
	// Waits on the condition, not on a duration: the kernel's clock of
	// the silence decides when it holds.
	deadline := time.Now().Add(30 * time.Second)
	for !linkAnswers(tcpInfo(c), silent, acked) {
		if time.Now().After(deadline) {
			info := tcpInfo(c)
			t.Fatalf("silent peer, acknowledged link: linkAnswers false for 30 s (TCP_INFO %+v)", info)
		}
		time.Sleep(10 * time.Millisecond)
	}

	peer.Close() // the peer's process ends: its host closes the connection
	for {
		info := tcpInfo(c)
		if info == nil {
			t.Fatal("no TCP_INFO")
		}
		if info.State != tcpEstablished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("peer closed: connection still established after 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if linkAnswers(tcpInfo(c), silent, acked) {
		t.Errorf("peer closed its end: linkAnswers true, want false")
	}
}
