package tcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"
)

// The same-host path (Config.NoUnix, the package doc's "Connections").
//
// Next to its TCP listener a transport listens on a Linux abstract Unix
// socket (no file on disk; the name belongs to the network namespace and
// vanishes with the socket) whose name is a function of the job id and the
// TCP address it listens on. A dialer whose target address is an IP of
// this host computes the same name and tries it first. The name is only a
// rendezvous: the connection then runs the very same handshake (job id,
// node id, proof of the secret, TLS if configured) as over TCP, and
// everything after it is the same code on a net.Conn.
//
// Why the fallback is sound: abstract names are per network namespace, so
// a peer in another namespace (another host, or a netns standing in for
// one) is never found and TCP is used; a peer that is older, has the path
// off or failed to bind the name is not found either. A name bound by
// someone else (any local user may bind an abstract name, there are no
// file permissions) is recognised by its owner's user id, which must be
// ours, and passed over for TCP, so it can neither steal nor block our
// connections; likewise the listener refuses a connecting process of
// another user before the handshake (checkPeerUser). A process of our own
// user is trusted no less than over TCP (the secret's proof still runs).

// unixSupported: abstract Unix sockets exist on Linux only.
const unixSupported = runtime.GOOS == "linux"

// maxUnixName is the longest abstract socket name, with Go's leading "@"
// standing for the NUL byte: the size of sockaddr_un's sun_path.
const maxUnixName = 108

// anyHost stands for the host in the name of a transport that listens on
// every address (0.0.0.0 or ::): a TCP listener on every address of a port
// excludes every other listener of that port in the namespace, so the
// port alone names it.
const anyHost = "*"

// unixName returns the abstract socket name of a job's transport listening
// on host:port (host an IP in its canonical form, or anyHost).
func unixName(jobID, hostPort string) string {
	job := sha256.Sum256([]byte(jobID))
	name := "@cohort/" + hex.EncodeToString(job[:6]) + "/" + hostPort
	if len(name) > maxUnixName { // an IPv6 address with a very long zone
		hp := sha256.Sum256([]byte(hostPort))
		name = "@cohort/" + hex.EncodeToString(job[:6]) + "/" + hex.EncodeToString(hp[:16])
	}
	return name
}

// listenName returns the name a transport listening on ap announces.
func listenName(jobID string, ap netip.AddrPort) string {
	ip := ap.Addr().Unmap()
	if ip.IsUnspecified() {
		return unixName(jobID, fmt.Sprintf("%s:%d", anyHost, ap.Port()))
	}
	return unixName(jobID, netip.AddrPortFrom(ip, ap.Port()).String())
}

// dialNames returns the names to try before TCP when dialling addr: none
// unless addr is "ip:port" with an IP of this host; then the name of a
// listener on that IP, and that of a listener on every address of the
// port. (A host name is not resolved: addresses as Addr returns them are
// IPs.)
func dialNames(jobID, addr string) []string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil
	}
	ip := ap.Addr().Unmap()
	if !isLocalIP(ip) {
		return nil
	}
	exact := listenName(jobID, netip.AddrPortFrom(ip, ap.Port()))
	wildcard := unixName(jobID, fmt.Sprintf("%s:%d", anyHost, ap.Port()))
	if exact == wildcard {
		return []string{exact}
	}
	return []string{exact, wildcard}
}

// localIPs caches this host's interface addresses (of this process's
// network namespace).
var localIPs struct {
	sync.Mutex
	at  time.Time // of the last refresh; zero: never
	set map[netip.Addr]bool
}

// localIPsMaxAge is how long the cached interface addresses are trusted.
// They are only read when dialling, so the list is read at most once per
// this period and only by a process that dials; an address added since is
// missed for at most this long (the dial then simply uses TCP), and one
// removed costs a failed Unix dial, then TCP.
const localIPsMaxAge = time.Second

// isLocalIP reports whether ip (without a zone) is loopback, unspecified
// (which Linux dials as local) or one of this host's interface addresses.
func isLocalIP(ip netip.Addr) bool {
	ip = ip.WithZone("")
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	localIPs.Lock()
	defer localIPs.Unlock()
	if localIPs.set == nil || time.Since(localIPs.at) > localIPsMaxAge {
		set := map[netip.Addr]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					if x, ok := netip.AddrFromSlice(n.IP); ok {
						set[x.Unmap()] = true
					}
				}
			}
		}
		localIPs.set, localIPs.at = set, time.Now()
	}
	return localIPs.set[ip]
}

// listenUnix opens the same-host listener of a transport whose TCP
// listener is tcpAddr; it returns nil (and logs why) when the path is off,
// unsupported or the name cannot be bound (taken by another process: the
// transport then works over TCP only, and dialers that reach the other
// process pass it over, see sameUser).
func (t *Transport) listenUnix(tcpAddr net.Addr) net.Listener {
	if t.cfg.NoUnix || !unixSupported {
		return nil
	}
	ta, ok := tcpAddr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	name := listenName(t.cfg.JobID, ta.AddrPort())
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "unix", name)
	if err != nil {
		t.log.Warn("tcp: no same-host Unix socket, peers on this host will use TCP", "name", name, "err", err)
		return nil
	}
	return ln
}

// dialSocket opens a socket to addr: over the peer's Unix socket when addr
// is on this host and the socket is there and belongs to our user,
// otherwise over TCP. A failed Unix dial is no failure: it only means the
// peer has no such socket here (older, path off, another network
// namespace), and TCP is dialled at once.
func (t *Transport) dialSocket(ctx context.Context, addr string) (net.Conn, error) {
	if !t.cfg.NoUnix && unixSupported {
		d := net.Dialer{Timeout: t.cfg.DialTimeout}
		for _, name := range dialNames(t.cfg.JobID, addr) {
			nc, err := d.DialContext(ctx, "unix", name)
			if err != nil {
				continue
			}
			if uid, _, ok := peerCred(nc); !ok || uid != os.Getuid() {
				t.log.Warn("tcp: the same-host socket of a peer belongs to another user; using TCP", "name", name, "uid", uid)
				nc.Close()
				continue
			}
			return nc, nil
		}
	}
	d := net.Dialer{Timeout: t.dialTimeout(), KeepAliveConfig: keepAlive(t.cfg), Control: socketControl(t.cfg)}
	return d.DialContext(ctx, "tcp", addr)
}

// remoteOf describes the other end of an accepted socket for logs: its
// address over TCP, its process over a Unix socket (whose dialer has no
// name).
func remoteOf(nc net.Conn) string {
	if _, ok := nc.(*net.UnixConn); ok {
		if uid, pid, ok := peerCred(nc); ok {
			return fmt.Sprintf("unix pid %d uid %d", pid, uid)
		}
		return "unix"
	}
	return nc.RemoteAddr().String()
}

// isUnix reports whether nc (or the socket under its TLS) is a Unix
// socket.
func isUnix(nc net.Conn) bool {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		nc = u.NetConn()
	}
	switch nc.(type) {
	case *net.UnixConn, *rightsConn, *shmConn:
		return true
	}
	return false
}
