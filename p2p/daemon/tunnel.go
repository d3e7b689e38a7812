package daemon

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/supernode"
)

// tunnelListener hands the HTTP server the connections that reach a
// dial-out-only daemon through its supernodes (supernode.Client's
// WaitTunnel and AcceptTunnel); the server runs its TLS on them as on
// the connections it accepts itself.
type tunnelListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newTunnelListener(addr net.Addr) *tunnelListener {
	return &tunnelListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *tunnelListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tunnelListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *tunnelListener) Addr() net.Addr { return l.addr }

// tunnelLoop waits for calls through the supernode sn and hands each to
// l, until ctx is done. A supernode that fails is asked again after a
// back-off of up to refresh; the log says when it fails and when it
// answers again, not at every attempt.
func (d *Daemon) tunnelLoop(ctx context.Context, sn *supernode.Client, l *tunnelListener) {
	var backoff time.Duration
	for ctx.Err() == nil {
		id, err := sn.WaitTunnel(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if backoff == 0 {
				d.log.Warn("daemon: cannot wait for calls through the supernode", "supernode", sn.Addr, "err", err.Error())
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), d.cfg.Refresh.Duration)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		if backoff > 0 {
			d.log.Info("daemon: waiting for calls through the supernode again", "supernode", sn.Addr)
			backoff = 0
		}
		if id == "" {
			continue
		}
		go func() {
			conn, err := sn.AcceptTunnel(ctx, id)
			if err != nil {
				d.log.Warn("daemon: a call through the supernode failed", "supernode", sn.Addr, "err", err.Error())
				return
			}
			select {
			case l.conns <- conn:
			case <-l.done:
				conn.Close()
			}
		}()
	}
}

// NewClientVia returns a client of the dial-out-only daemon name (listed
// at addr) that reaches it through the supernode sn: each connection is
// one sn joins to a connection of the daemon's (supernode.Client.Connect),
// and the client's TLS with the daemon runs inside it, checked as over a
// direct connection. Closing the client does not close sn.
func NewClientVia(creds *ca.Credentials, name, addr string, sn *supernode.Client) *Client {
	c := NewClient(creds, name, addr)
	c.hc.Transport.(*http.Transport).DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return sn.Connect(ctx, name)
	}
	return c
}
