package tcp

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// Config configures a [Transport]. Start from [DefaultConfig] and set Node,
// JobID and Secret; zero durations and sizes mean the defaults.
type Config struct {
	// Node is this process's node id (not core.None).
	Node core.NodeID
	// ListenAddr is the TCP address to listen on, "host:port"; port 0 picks
	// a free port (see Transport.Addr). Default "127.0.0.1:0".
	ListenAddr string
	// JobID names the job; a peer of another job is refused. At most
	// wire.MaxJobIDLen bytes.
	JobID string
	// Secret is the job secret every connection proves knowledge of
	// (docs/DESIGN.md, "Security"). Required; use at least 16 random bytes.
	Secret []byte

	// QueueLen is the capacity, in frames, of the send queue to each peer
	// (the frames of the detector, the membership, comm's revocations
	// and agreements and the replication protocol's frames other than its
	// data have a control lane of their own of 128, which the writer
	// drains first). Send blocks while it is full. The queues exist
	// only while the peer has a connection in use or frames waiting.
	// Default 1024.
	QueueLen int
	// MaxFrameSize is the limit, in bytes, on a frame's body (header and
	// payload) in both directions. Default wire.DefaultMaxFrameSize.
	MaxFrameSize int
	// WriteBufferSize is the size, in bytes, of a connection's coalescing
	// write buffer. Default wire.DefaultWriteBufferSize.
	WriteBufferSize int
	// DirectMax is the largest payload, in bytes, that SendDirect writes
	// on the caller's goroutine (header and payload in one vectored write,
	// no copy) when the peer's connection is idle; larger payloads, and any
	// frame sent while earlier ones wait in the queue, are copied and
	// queued for the writer goroutine. Default wire.DefaultMaxFrameSize
	// (16 MiB: every frame the default limit allows); negative disables
	// the direct path.
	DirectMax int
	// SocketBuffer sets the kernel send and receive buffers of every
	// connection, in bytes; 0 keeps the operating system's default. TCP
	// sockets take them before their handshake (the listener's, which
	// accepted ones inherit, and the dialer's), so that the window they
	// announce is the one they offer. Below 256 KiB, a TCP connection's
	// segments are bounded too, to an eighth of it (at least 536 bytes):
	// on Linux, a window that falls below the peer's segment size can
	// stop the stream while the other side keeps writing.
	SocketBuffer int
	// ResendBuffer bounds, in bytes, the frames kept per peer until the
	// peer acknowledges them, to be written again on the next connection
	// if this one breaks (see the package doc, "A pair's stream"). A
	// writer waits, as for a full queue, while it is full; a frame larger
	// than it is kept alone. At least 1 MiB; default 64 MiB.
	ResendBuffer int
	// DialOutOnly declares that no connection can reach this node (a host
	// behind NAT or a firewall that drops inbound connections): it dials
	// every peer it has an address for at once, keeps those connections
	// (as Keep does, redialling a lost one after the first back-off) and
	// never retires them for being idle, and its handshake tells each
	// peer so, which then never dials it nor retires its connection: what
	// the peer has for it waits for its dial.
	DialOutOnly bool
	// NoRelay turns relaying off: by default (false) the frames for a
	// peer whose direct link is down go through a peer that reaches it
	// (see the package doc, "Relaying"), and this node forwards such
	// frames for others. Both ends of a pair must relay for it to work.
	NoRelay bool

	// HandshakeTimeout bounds the handshake of a connection, from accept or
	// dial to the verified proof. Default 5 s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the inbound handshakes in progress at once on
	// each listener (the TCP one and the same-host Unix socket), counted
	// from accept to the end of the handshake: a connection accepted
	// beyond it is closed, before a byte is read or written, and counted
	// in Stats.Shed (within the listener's budget of refusals; past it,
	// connections wait in the kernel's accept queue, as long as this
	// bound: package doc, "Unauthenticated connections"). Each handshake
	// in progress costs a goroutine and a socket for at most
	// HandshakeTimeout, so this bounds what connections that never prove
	// the secret can take; while it is reached, genuine peers are turned
	// away too (their dials fail or wait, and are retried with back-off).
	// Default DefaultMaxHandshakes; negative: no bound.
	MaxHandshakes int
	// MaxHandshakesPerSource bounds, in the same way, the inbound TCP
	// handshakes in progress at once from one remote IP address (any
	// port). It must cover the processes of one host that dial this one at
	// the same moment (at start-up, a whole host's). The Unix socket,
	// whose only peers are processes of our own user on this host, has
	// MaxHandshakes alone. Default DefaultMaxHandshakesPerSource;
	// negative: no bound.
	MaxHandshakesPerSource int
	// DialTimeout bounds one dial attempt. Default 3 s.
	DialTimeout time.Duration
	// BackoffMin and BackoffMax bound the delay between failed dial
	// attempts to a peer: attempt k waits a random time in [d/2, d) with
	// d = min(BackoffMax, BackoffMin·2^k). Defaults 20 ms and 2 s.
	BackoffMin, BackoffMax time.Duration
	// KeepAlive is the TCP keep-alive idle time and probe interval (three
	// probes), which bounds how long a connection to a vanished host stays
	// open when we do not write to it. Default 5 s; negative disables.
	KeepAlive time.Duration
	// LinkTimeout bounds how long data written to a TCP connection may
	// stay unacknowledged by the peer's kernel before the connection is
	// declared dead (TCP_USER_TIMEOUT, Linux), and how long a dial may
	// wait for the peer's answer (with DialTimeout, whichever is
	// shorter): a path that silently drops packets fails the connection
	// within it instead of after minutes of retransmissions, and its
	// frames go through a relay. Recent Linux kernels (5.11 on) count
	// against it the time a peer's receive window stays shut, though the
	// peer's kernel answers the zero-window probes, which would fail the
	// connection of a live peer that computes, reading nothing, for
	// longer than LinkTimeout while frames wait for it; so the link
	// check (every 100 ms) turns it off on a connection whose peer's
	// window is shut while its kernel answers, and on again once the
	// window opens or two probes in a row go unanswered. A LinkTimeout
	// shorter than a look may still fail such a connection (it is then
	// dialled again, its frames resent, and the failure detector told
	// to probe the peer, not that it failed). A host that dies behind a
	// shut window fails the connection at the kernel's next probe after
	// that, up to two minutes apart once the window has stayed shut for
	// long (a relay, where one reaches the peer, takes over sooner).
	// Default 2 s; negative: off (the kernel's retransmission limits).
	LinkTimeout time.Duration
	// IdleTimeout closes a connection on which nothing was read or written
	// for this long (checked every quarter of it), without losing a frame
	// and without a hint to the failure detector; the next frame to the
	// peer dials again. Default 30 s; negative keeps connections for ever.
	IdleTimeout time.Duration

	// TLS, if not nil, wraps every connection in TLS before the handshake:
	// accepted connections with tls.Server(conn, TLS), dialled ones with
	// tls.Client(conn, TLS). Both ends of a job must agree (a TLS end and a
	// plain end fail the handshake). For mutual authentication set
	// ClientAuth and ClientCAs as well as Certificates and RootCAs. The
	// job secret's proof still runs inside TLS.
	TLS *tls.Config
	// Integrity chooses which connections carry their frames in
	// authenticated records once the handshake's proofs have verified
	// (record.go; wire's records): IntegrityAuto, the default, the TCP
	// connections without TLS whose peer is on another host. A connection
	// has records when either end asks for them, so IntegrityOff (unsafe
	// between hosts: anyone on the path can then alter, drop or inject
	// frames) takes both ends of a pair.
	Integrity IntegrityMode
	// QueueUnknown lets Send accept frames for a node whose address is not
	// known yet: they wait in that node's queue until SetPeer gives its
	// address (or it connects to us), or until RemovePeer drops them. Off,
	// Send to an unknown node fails with transport.ErrUnknownPeer. A
	// membership service that learns addresses a moment after the ids
	// (package group) turns it on.
	QueueUnknown bool
	// NoUnix turns off the same-host path: by default (false) Listen also
	// listens on a Linux abstract Unix socket named after JobID and the
	// TCP address, and a dial to an address of this host (loopback or an
	// interface's) tries that socket before TCP, falling back to TCP at
	// once when it is not there (see the package doc, "Connections"). Set it
	// to listen and dial over TCP only. Elsewhere than on Linux the path
	// does not exist and NoUnix changes nothing.
	NoUnix bool
	// NoShm keeps a same-host connection on its Unix socket: by default
	// (false) two processes of one host connected over the Unix socket
	// without TLS move the connection's frames to shared memory, one ring
	// per direction, if both ends agree (see shmring.go). Elsewhere than on
	// Linux the path does not exist and NoShm changes nothing.
	NoShm bool
	// ShmRingSize is the data size, in bytes, of each ring of a
	// shared-memory connection (two per connection, plus a 4 KiB header
	// each): a power of two from 4 KiB to 1 GiB. A frame larger than the
	// ring streams through it. Default DefaultShmRingSize (256 KiB).
	ShmRingSize int
	// ShmInProcess lets two transports of one process move their
	// connection to shared memory too, as two processes do; by default
	// they stay on the Unix socket (one process gains nothing from it).
	// Tests and benchmarks set it to measure the shared-memory path in one
	// process.
	ShmInProcess bool

	// Logger receives the transport's logs; nil discards them.
	Logger *slog.Logger
}

// Defaults of [Config].
const (
	DefaultListenAddr       = "127.0.0.1:0"
	DefaultQueueLen         = 1024
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultDialTimeout      = 3 * time.Second
	DefaultBackoffMin       = 20 * time.Millisecond
	DefaultBackoffMax       = 2 * time.Second
	DefaultKeepAlive        = 5 * time.Second
	DefaultLinkTimeout      = 2 * time.Second
	DefaultIdleTimeout      = 30 * time.Second
	DefaultDirectMax        = wire.DefaultMaxFrameSize
	DefaultResendBuffer     = 64 << 20
)

// Defaults of [Config]'s bounds on handshakes in progress.
const (
	// DefaultMaxHandshakes is Config.MaxHandshakes' default, in
	// connections per listener.
	DefaultMaxHandshakes = 512
	// DefaultMaxHandshakesPerSource is Config.MaxHandshakesPerSource's
	// default, in connections per source address.
	DefaultMaxHandshakesPerSource = 128
)

// DefaultConfig returns a Config with every default filled in; the caller
// sets Node, JobID and Secret.
func DefaultConfig() Config {
	return Config{
		ListenAddr:             DefaultListenAddr,
		QueueLen:               DefaultQueueLen,
		MaxFrameSize:           wire.DefaultMaxFrameSize,
		WriteBufferSize:        wire.DefaultWriteBufferSize,
		HandshakeTimeout:       DefaultHandshakeTimeout,
		MaxHandshakes:          DefaultMaxHandshakes,
		MaxHandshakesPerSource: DefaultMaxHandshakesPerSource,
		DialTimeout:            DefaultDialTimeout,
		BackoffMin:             DefaultBackoffMin,
		BackoffMax:             DefaultBackoffMax,
		KeepAlive:              DefaultKeepAlive,
		LinkTimeout:            DefaultLinkTimeout,
		IdleTimeout:            DefaultIdleTimeout,
		DirectMax:              DefaultDirectMax,
		ResendBuffer:           DefaultResendBuffer,
		ShmRingSize:            DefaultShmRingSize,
	}
}

// withDefaults fills zero fields with the defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ListenAddr == "" {
		c.ListenAddr = d.ListenAddr
	}
	if c.QueueLen == 0 {
		c.QueueLen = d.QueueLen
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = d.MaxFrameSize
	}
	if c.WriteBufferSize == 0 {
		c.WriteBufferSize = d.WriteBufferSize
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = d.MaxHandshakes
	}
	if c.MaxHandshakesPerSource == 0 {
		c.MaxHandshakesPerSource = d.MaxHandshakesPerSource
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = d.BackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(d.BackoffMax, c.BackoffMin)
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = d.KeepAlive
	}
	if c.LinkTimeout == 0 {
		c.LinkTimeout = d.LinkTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.DirectMax == 0 {
		c.DirectMax = d.DirectMax
	}
	if c.ResendBuffer == 0 {
		c.ResendBuffer = d.ResendBuffer
	}
	if c.ShmRingSize == 0 {
		c.ShmRingSize = d.ShmRingSize
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first invalid field (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: tcp: "+format, append([]any{transport.ErrBadConfig}, args...)...)
	}
	switch {
	case c.Node == core.None:
		return bad("Node is core.None")
	case len(c.Secret) == 0:
		return bad("Secret is empty: every connection must prove the job secret")
	case len(c.JobID) > wire.MaxJobIDLen:
		return bad("JobID of %d bytes, limit %d", len(c.JobID), wire.MaxJobIDLen)
	case c.QueueLen < 0:
		return bad("QueueLen %d < 0", c.QueueLen)
	case c.MaxFrameSize < wire.MinFrameBody:
		return bad("MaxFrameSize %d < %d", c.MaxFrameSize, wire.MinFrameBody)
	case c.WriteBufferSize < 0 || c.SocketBuffer < 0:
		return bad("negative WriteBufferSize or SocketBuffer")
	case c.HandshakeTimeout < 0 || c.DialTimeout < 0 || c.BackoffMin < 0:
		return bad("negative timeout or backoff")
	case c.ResendBuffer < minResendBuffer:
		return bad("ResendBuffer %d < %d", c.ResendBuffer, minResendBuffer)
	case c.BackoffMax < c.BackoffMin:
		return bad("BackoffMax %v < BackoffMin %v", c.BackoffMax, c.BackoffMin)
	case c.Integrity < IntegrityAuto || c.Integrity > IntegrityOff:
		return bad("Integrity %v: want IntegrityAuto, IntegrityAlways or IntegrityOff", c.Integrity)
	case c.ShmRingSize < minShmRingSize || c.ShmRingSize > wire.MaxRingSize || c.ShmRingSize&(c.ShmRingSize-1) != 0:
		return bad("ShmRingSize %d: want a power of two from %d to %d", c.ShmRingSize, minShmRingSize, wire.MaxRingSize)
	}
	return nil
}
