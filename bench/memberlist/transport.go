package main

import (
	"errors"
	"maps"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// traffic counts what a system's nodes send: messages (a UDP packet, or a
// TCP stream opened, for memberlist; a frame for cohort) and payload bytes.
type traffic struct {
	msgs, bytes atomic.Uint64
}

// faults is an optional fault model for one memberlist node's outgoing
// packets: drop each with probability loss, delay each by delay.
type faults struct {
	mu    sync.Mutex
	loss  float64
	delay time.Duration
	rng   *rand.Rand
}

func (f *faults) set(loss float64, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loss, f.delay = loss, delay
}

// decide says whether to drop a packet and how long to delay it.
func (f *faults) decide() (drop bool, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loss > 0 && f.rng.Float64() < f.loss {
		return true, 0
	}
	return false, f.delay
}

// links is the network between one system's nodes, as far as cuts go:
// which directions are cut, and whose stream each dialled local address
// is (an accepted stream knows its peer only by that address).
type links struct {
	mu      sync.Mutex
	cuts    map[[2]string]bool // {from, to} node addresses whose messages are lost
	dialled map[string]string  // local address of a dialled stream → the dialler's node address
}

func newLinks() *links {
	return &links{cuts: map[[2]string]bool{}, dialled: map[string]string{}}
}

func (l *links) isCut(from, to string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cuts[[2]string{from, to}]
}

func (l *links) set(from, to string, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cut {
		l.cuts[[2]string{from, to}] = true
	} else {
		delete(l.cuts, [2]string{from, to})
	}
}

func (l *links) healAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.cuts)
}

func (l *links) dial(local, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dialled[local] = node
}

func (l *links) hangUp(local string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.dialled, local)
}

func (l *links) dialler(remote string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dialled[remote]
}

// errCut is what a dial across a cut returns once its timeout has passed,
// as a dial whose packets are lost would.
var errCut = errors.New("dial: i/o timeout (the path is cut)")

// countingTransport wraps memberlist's NetTransport: it counts every packet
// and stream byte a node writes (both ends of a stream, since each end's
// writes are its own traffic), can drop or delay outgoing packets, and
// loses what it sends across a cut (links): UDP packets, dials (which
// fail after their timeout) and writes on streams already open.
type countingTransport struct {
	*memberlist.NetTransport
	self    string // this node's address, host:port
	l       *links
	t       *traffic
	f       *faults
	mu      sync.Mutex
	sentTo  map[string]uint64 // packets and dials, lost ones included, per peer address
	stream  chan net.Conn
	done    chan struct{} // Shutdown has begun
	stopped chan struct{} // the inner transport has shut down
}

var _ memberlist.NodeAwareTransport = (*countingTransport)(nil)

func newCountingTransport(t *traffic, l *links, seed uint64) (*countingTransport, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{"127.0.0.1"},
		BindPort:  0,
		Logger:    discardLogger,
	})
	if err != nil {
		return nil, err
	}
	self := net.JoinHostPort("127.0.0.1", strconv.Itoa(nt.GetAutoBindPort()))
	c := &countingTransport{NetTransport: nt, self: self, l: l, t: t, sentTo: map[string]uint64{},
		f:      &faults{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))},
		stream: make(chan net.Conn), done: make(chan struct{}), stopped: make(chan struct{})}
	go c.relay()
	return c, nil
}

// relay wraps the inbound streams so that the answers written on them are
// counted too. It drains the inner channel until the inner transport has
// shut down: its listener blocks on that channel and its Shutdown waits for
// the listener.
func (c *countingTransport) relay() {
	in := c.NetTransport.StreamCh()
	for {
		select {
		case conn := <-in:
			select {
			case c.stream <- &countingConn{Conn: conn, t: c.t, tr: c}:
			case <-c.done:
				conn.Close()
			}
		case <-c.stopped:
			return
		}
	}
}

func (c *countingTransport) count(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sentTo[addr]++
}

// sent returns the packets and dials to each peer address so far.
func (c *countingTransport) sent() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.sentTo)
}

func (c *countingTransport) StreamCh() <-chan net.Conn { return c.stream }

func (c *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return c.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (c *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	c.count(a.Addr)
	drop, delay := c.f.decide()
	if drop || c.l.isCut(c.self, a.Addr) {
		return time.Now(), nil // lost on the way: the sender cannot tell
	}
	c.t.msgs.Add(1)
	c.t.bytes.Add(uint64(len(b)))
	if delay > 0 {
		buf := append([]byte(nil), b...)
		time.AfterFunc(delay, func() { c.NetTransport.WriteToAddress(buf, a) })
		return time.Now(), nil
	}
	return c.NetTransport.WriteToAddress(b, a)
}

func (c *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return c.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (c *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c.count(a.Addr)
	if c.l.isCut(c.self, a.Addr) {
		select {
		case <-time.After(timeout):
		case <-c.done:
		}
		return nil, errCut
	}
	conn, err := c.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	c.t.msgs.Add(1)
	local := conn.LocalAddr().String()
	c.l.dial(local, c.self)
	return &countingConn{Conn: conn, t: c.t, tr: c, peer: a.Addr, local: local}, nil
}

func (c *countingTransport) Shutdown() error {
	select {
	case <-c.done:
		return nil
	default:
		close(c.done)
	}
	err := c.NetTransport.Shutdown()
	close(c.stopped)
	return err
}

// countingConn counts the bytes written on a stream, and loses them while
// the path to its peer is cut.
type countingConn struct {
	net.Conn
	t     *traffic
	tr    *countingTransport
	peer  string // the peer's node address; "" on an accepted stream until known
	local string // set on a dialled stream: its entry in links
}

func (c *countingConn) Write(b []byte) (int, error) {
	if c.peer == "" {
		c.peer = c.tr.l.dialler(c.Conn.RemoteAddr().String())
	}
	if c.peer != "" && c.tr.l.isCut(c.tr.self, c.peer) {
		return len(b), nil // lost on the way; the reader times out
	}
	n, err := c.Conn.Write(b)
	c.t.bytes.Add(uint64(n))
	return n, err
}

func (c *countingConn) Close() error {
	if c.local != "" {
		c.tr.l.hangUp(c.local)
	}
	return c.Conn.Close()
}
