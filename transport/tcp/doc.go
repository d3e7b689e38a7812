// Package tcp is the [transport.Transport] between the processes of a job:
// length-prefixed frames (package wire) over TCP, or over a Unix socket
// between processes of one host, one connection per pair of nodes,
// authenticated by the job secret.
//
//	cfg := tcp.DefaultConfig()
//	cfg.Node, cfg.JobID, cfg.Secret = 3, "job-42", secret
//	t, err := tcp.Listen(cfg)      // listens on cfg.ListenAddr
//	t.SetPeer(4, "10.0.0.4:7000")  // the address book
//	t.SetHandler(h)                // inbound frames and hints
//	err = t.Send(ctx, 4, wire.Frame{Kind: k, Payload: p})
//	...
//	t.Close()
//
// # Connections
//
// A connection is opened lazily, by the first Send to a peer that has none,
// or by the peer. It starts with the handshake of package wire (version,
// job id, node id and an HMAC proof of the job secret, both ways; the
// accepting side sends its proof only once the dialler's has verified); a
// connection that fails it (wrong secret, wrong job, wrong version, no
// handshake at all, a timeout) is closed and logged with the remote address,
// and no frame of it is delivered. After the handshake, a frame whose source
// is not the authenticated peer, or whose destination is not this node, is
// dropped and logged. A malformed frame (bad length or header) closes that
// connection with a logged error; the others go on.
//
// # Unauthenticated connections
//
// Until its proof verifies, an inbound connection is nothing but a
// goroutine and a socket, for at most Config.HandshakeTimeout: the node id
// its hello claims decides nothing, no state is made or counted for that
// node (our writer dials it as if the connection were not there), nothing it sends is delivered, and on the
// same-host Unix socket no descriptor it passes is kept (those that come
// with its hello are closed by the kernel; later ones are closed when the
// handshake fails). The handshakes in progress are bounded per listener
// (Config.MaxHandshakes) and, over TCP, per remote IP address
// (Config.MaxHandshakesPerSource): a connection beyond either is shed,
// closed before a byte is read or written, and counted in Stats.Shed. The Unix
// socket also refuses, before the handshake, a process of any user but ours
// (SO_PEERCRED; the dialler checks the listener the same way). Refusals are
// logged at Warn at most once per source every 10 s, the next line counting
// those not logged; Stats counts them all.
//
// A flood opens a connection again as soon as it is refused, so a listener
// refuses (sheds, or fails a handshake) within a budget: 64 at once, then
// 200 a second. While the budget is spent it accepts nothing; new
// connections wait in the kernel's accept queue, kept as short as
// MaxHandshakes (at least 64), and beyond it the kernel drops their SYNs,
// which their dialers resend. So a flood costs this process a few percent
// of a core whatever its rate, and the connections already open are not
// slowed; the price is that a genuine peer's new connection waits among
// the flood's, up to a second or more, from any source.
//
// Between processes of one host a connection runs over a Unix socket
// instead of loopback TCP (a quarter less one-way latency for a small
// frame in this package's benchmarks, path=unix against path=tcp),
// chosen automatically: on Linux, Listen also listens on an abstract Unix
// socket (no file; it belongs to the network namespace and vanishes with
// the process) named after the job id and the TCP address,
// "@cohort/<hash of the job id>/<ip:port>" ("*:port" for a transport
// listening on every address). A dial to an address whose IP is loopback
// or one of this host's interface addresses (read at most once a second)
// tries that name first, and dials TCP at once, with no hint and no delay,
// when it is not there: the peer turned the path off (Config.NoUnix), is
// of an older version, or is in another network namespace (a port
// forwarded into a container), where the name does not exist; a peer on
// another host has an address that is not local and is dialled over TCP
// directly. A name owned by another user is passed over for TCP as well. The
// connection then runs the same handshake, TLS included, and everything
// else (tie-break, replacement, idle retirement, the direct path) is the
// same on both kinds; only TCP_NODELAY, keep-alive and, between loopback
// addresses, Reno congestion control are TCP's. Stats.Unix counts the
// connections that took the path.
//
// Between two processes (not two transports of one process), a Unix
// connection without TLS then moves its byte stream to shared memory: the
// handshake ends with ring offers (wire.Ring), a sealed memfd per
// direction passed over the socket and checked against the job secret
// (wire.RingTag), and the socket is left with wake-ups and the peer's death
// (see shmring.go). Config.NoShm turns it off; Stats.Shm counts those
// connections, Stats.ShmRefused the rings refused by the checks. Over such
// a connection a receiver may also read a large message straight from the
// peer's memory, in one copy (Pull, singlecopy.go).
//
// # Integrity between hosts
//
// A TCP connection without TLS whose peer is on another host (its address
// is neither loopback nor one of this host's) carries its frames in
// authenticated records (package wire, "Records"; record.go): each side's
// Hello asks for them, and from each side's proof on, every write (a
// writer's batch, SendDirect's head and body, a goodbye) is a record with
// a GMAC tag under keys derived from the job secret and both Hellos. The
// reader delivers no frame of a record, and reports no large frame placed
// ([transport.Placer]), before the record's tag has verified. A record
// altered, replayed, reordered, dropped or injected on the way fails: the
// connection is closed with a logged error and counted in Stats.Tampered,
// and the frames it carried are resent on the next connection, as after
// any broken connection (see "A pair's stream"), so none is lost and none
// delivered altered. Records do not encrypt: the frames are still
// readable on the path (Config.TLS hides them). They cost little: figures
// in docs/PERFORMANCE.md (`cohort bench p2p --impl ours-tcp,ours-mac`).
//
// Connections within one host have no records: the Unix socket and
// shared memory admit only processes of our own user, who can read and
// write those processes' memory anyway, and loopback TCP traffic is seen
// only by root. Config.Integrity changes the choice: IntegrityAlways puts
// every TCP connection in records (loopback too, as tests and benchmarks
// do), IntegrityOff none (unsafe between hosts; a connection still has
// records when the peer asks for them). A connection under TLS has none:
// TLS protects it.
//
// There is at most one connection per pair in use. When both nodes dial
// each other at once, the connection opened by the lower node id wins on
// both sides (the higher node refuses nothing; the lower refuses the
// higher's dial, once the higher's proof has verified, while its own is
// pending or established, with its proof in a goodbye so that the higher
// waits for the winning connection instead of reporting a failure). A peer that dials
// again while an earlier connection of its own still exists replaces it (it
// only dials when it retired the old one or believes it dead, for instance
// after a restart): the old one is written no more and shut on our side,
// and its reader reads on to its end (at most HandshakeTimeout). The reader
// of a new connection waits until the reader of the connection it replaced
// has finished, so frames of one sender are never lost to the change nor
// delivered out of order.
//
// # Sending
//
// Each peer has a bounded queue (Config.QueueLen frames) and one writer
// goroutine that drains it into a coalescing buffer (wire.FrameWriter) and
// flushes when the queue is empty: a burst of small frames costs one system
// call, and TCP_NODELAY sends it at once. Send blocks while the queue is
// full, until there is room, its context is done ([transport.ErrQueueFull])
// or the transport is closed. While a peer is unreachable its frames stay
// queued, and the writer redials with exponential back-off and jitter
// (Config.BackoffMin, BackoffMax); each failed dial and each lost
// connection is reported to the handler as a [core.PeerHint] (a hint for
// the failure detector, not a verdict). Frames in flight when a connection
// breaks are not lost (see "A pair's stream").
//
// SendNow writes a frame on the caller's goroutine instead, with one
// non-blocking write, when the peer's connection is idle (nothing queued,
// nobody writing; the connection resumed): no wake-up of the writer for a protocol that sends one
// frame per peer and event. It never waits; what the socket does not take
// of the frame the writer writes before anything else, and it declines a
// frame the socket takes nothing of (see now.go). SendDirect writes a
// data frame the same way without copying it, and waits for the socket
// to take the rest of it, unless its context ends first: the writer then
// writes the rest, as SendNow's (see direct.go).
//
// # A pair's stream
//
// The frames between two live processes are delivered once and in order
// however many times their connection breaks (resend.go). Each side keeps
// every frame it wrote to a peer in the peer's resend log until the peer
// acknowledges it (at most Config.ResendBuffer bytes per peer: the writer
// waits while the log is full, as Send waits for a full queue, and SendNow
// and SendDirect leave the frame to it); the receiver counts the frames it
// delivers and acknowledges them cumulatively (wire.KindAck): on the batch
// its writer sends anyway, or on its own, with one non-blocking write when
// nothing else is being written, after 128 frames, 256 KiB or 50 ms. A
// connection's handshake ends with a wire.Resume from each side (its
// stream id for the pair, and how many of the peer's frames it has
// delivered); the writer then starts the connection with a sequence mark
// (wire.KindSeq: the number of the next frame) and the frames the peer
// lacks, before SendNow or SendDirect may write to it, and the receiver
// drops a frame whose number it has delivered (Stats.Duplicates; a large
// frame is then not placed) and acknowledges its count again within
// 50 ms, since the sender resent the frame for want of it. Stats.Resent counts the frames written again.
//
// Stream ids are drawn per peer: a peer whose id changed is a restarted
// process (or one that forgot us with RemovePeer), so the frames kept for
// its predecessor are dropped instead of resent, and its own are counted
// from 1 (Stats.Restarts). So a transport announces one id to a peer in
// every handshake while it keeps the peer's state, also in one that began
// before the state was made (a peer that dialled us before we had its
// address): the id drawn for that handshake is the one the state takes. A peer with unacknowledged frames is dialled as
// one with queued frames is, until it acknowledges them or is removed. An
// idle connection is retired only once its frames are acknowledged (the
// goodbye carries an acknowledgement of what its sender delivered).
// BreakConns breaks a pair's connections as a network fault would, for
// fault injection.
//
// # Nodes nobody can dial
//
// A node behind NAT or a firewall that drops inbound connections sets
// Config.DialOutOnly: it dials every peer it has an address for as soon as
// it has one, keeps those connections (redialling a lost one after the
// first back-off) and never retires them for being idle. Its handshake's
// resume says so, and the peer then neither dials it nor retires its
// connection: what the peer sends it waits, in the queue and the resend
// log, for its next dial, unless a relay reaches it (below). Two such
// nodes cannot reach each other directly: their frames go through a
// relay.
//
// # Relaying
//
// Real networks rarely fail whole: a cut between two hosts that both
// still reach the others (a partial partition), or two nodes of which
// one accepts no connection and cannot dial the other, leaves a pair
// without a direct link while a third node reaches both (relay.go,
// relay_in.go, route.go). A dead link is noticed within Config.LinkTimeout (2 s;
// TCP_USER_TIMEOUT on TCP sockets, which also bounds a dial): its
// connection dies or its dial fails, and the pair's direct link is down
// until a connection is in use again. While a relay reaches the peer, a
// link that stops delivering is left sooner, after a quarter of it
// (linktimeout.go, checkLinks); one whose peer reads nothing, its
// receive window shut while its kernel answers, is not taken for dead
// (holdLinkTimeout). The same look hints the failure detector
// about a silent peer whose link still answers (core.PeerHint with
// Answering), or, on this host, about a peer it suspects
// (transport.SuspectWatcher) whose process lives and holds its socket:
// alive, and not running.
//
// Reachability goes by exception: each node sends the peers it has a
// connection to the set of nodes it cannot reach directly now
// (wire.KindRoute), on each change and to a peer whose stream starts
// afresh (the pair's stream loses nothing, so no refresh is needed);
// in a job where every node reaches every other, no route is sent at
// all. A writer whose peer D's direct link is down (or whose frames from
// D arrive relayed: D cannot reach us) relays through a peer R that it
// has a connection to and whose latest set does not hold D, preferring
// one that D's last known set does not hold: the lowest id, kept while
// it stays valid. One relay, two hops, is the limit: a pair that no
// single node reaches both of waits, as before, for its link.
//
// Relayed frames keep their place in the pair's stream: the writer
// numbers them and keeps them in D's resend log as on a connection, and
// wraps each in a wire.KindRelay frame (origin, destination, both
// stream ids, the number) with an end-to-end AES-GCM tag under a key of
// the ordered pair derived from the job secret (HKDF-SHA256): without
// TLS the frame is authenticated only, and the tag, AES-GCM's over
// nothing to encrypt, is a GMAC; with TLS the inner frame is encrypted
// too. A payload of 4 KiB or more that Send's caller gave up is held in
// the log by reference, not copied, until D acknowledges it; only
// authenticated, it is not copied into the relayed frame either: it is
// tagged where it is and written between the relay header and the tag.
// A smaller one is copied, and tagged as it is encoded. R forwards the
// payload unchanged into its queue for D (without opening it), or drops it
// (Stats.RelayDropped) if it cannot reach D itself. D checks the tag (a
// frame that fails it is dropped, counted in Stats.RelayTagFailures and
// logged at most once per relay every 10 s) and delivers the inner frame
// as from its origin only if it is the next frame of the pair's stream;
// it drops a duplicate or a frame after a gap. A pair's frames are
// checked and delivered under a per-pair lock, which the connections'
// readers take too: a frame that comes both relayed and direct (while
// the path changes) is delivered once, and Deliver stays sequential per
// sender. D acknowledges through a relay as well (an unnumbered relayed
// acknowledgement, which also tells an origin that named an old or
// unknown stream of D's the current one; a restarted D makes the origin
// drop what it kept for its predecessor, as a resume does). A relayed
// frame takes no number on the hops (their streams would only keep a
// second copy of it): a hop that breaks loses the relayed frames in
// flight, and the origin resends them.
//
// The writer goes back to the acknowledgement point (go-back-N) when
// its path changes (direct to relayed, one relay to another) and when
// the point stands still while frames wait for it (a relay that died,
// dropped or stalls; it then takes the next relay in id order): within
// 300 to 600 ms if D said it missed a frame (D acknowledges at once each
// frame it drops after a gap, which does not move the point), after
// twice that if D is silent, doubling with each such rewind in a row up
// to about 5 s, so that a peer that is only slow to answer (a loaded
// machine, deep socket buffers on the way) is not sent its backlog again
// and again. Until D's stream is known (its first relayed
// acknowledgement names it), one frame at a time goes out. The writer
// also redials D in the background with back-off (BackoffMin to
// BackoffMax). Once a direct connection is back, its handshake's resume
// takes the traffic over from the point D names, as after any
// reconnection. Control frames keep the lead they have on a connection
// at the origin, where a backlog waits: the writer takes D's control
// lane first. Through the relay all of a pair's frames share R's data
// queue, in their order: a control frame in R's control lane would
// overtake frames numbered before it, which D would then drop as out of
// order. (Relayed acknowledgements, which take no number, use the
// relays' control lanes.) Each path change is counted
// (Stats.PathChanges) and reported to a handler that implements
// [transport.PathReporter] ([transport.PairRelayed],
// [transport.PairDirect]); the host writes them to its event stream.
// Config.NoRelay turns relaying off; BlockPeer cuts a pair's direct link
// on purpose, for tests and benchmarks.
//
// # Large frames
//
// A frame of 16 KiB or more (wire.PlaceMin) is offered, once its header
// and first bytes are read, to a handler that implements
// [transport.Placer]: if it gives a buffer, the rest of the payload is read
// from the socket straight into it (comm reads a message into its posted
// receive this way). SendDirect writes a payload of 4 KiB or more after a
// small pad frame (wire.KindPad, skipped by the reader) that puts it on the
// stream at its alignment in memory: the kernel copies aligned data two to
// three times faster.
//
// # Idle connections
//
// A connection on which nothing was read or written for Config.IdleTimeout
// (default 30 s) is closed by a goodbye and a half-close from each side in
// turn, so that every frame written to it is still delivered and neither
// side reports a failure (see idle.go); the next frame to that peer dials
// again. A process that has talked to many nodes over time (a membership
// whose tree changed shape many times) thus keeps connections, readers,
// writers and queues only for the nodes it still talks to. The
// connections to the nodes given to Keep are the exception: dialled at
// once, with nothing to send, and never retired for being idle (a
// membership's tree links, so that a view change waits for no dial).
//
// # Goroutines
//
// One accept loop per listener (TCP, and the Unix socket unless off) and
// one idle sweeper; per shared-memory connection, a watcher of its socket
// (wake-ups, the peer's end); per peer with frames to write or a connection in use,
// one writer (which also dials; it ends when the peer has neither, and
// Send starts it again); one reader per connection (which calls the
// handler); per inbound connection, its handshake runs on what becomes its
// reader; one route publisher. While a peer's direct link is down, its
// writer relays its frames, and one goroutine at a time redials it.
// Close stops them all.
//
// # Limits
//
// A frame is copied into the resend log as it is written (SendDirect's
// body too, which the caller may reuse once it returns): one more copy of
// every byte sent on a connection, except a relayed payload of 4 KiB or
// more and a body of LendMin or more lent with TryLendDirect, or of 4 KiB
// or more with TryLendDirectAny (shared memory too), all held by
// reference (the lender gets its buffer back once the peer acknowledges
// the frame: about a small frame's trip after delivery from LendMin,
// after more frames or up to ackDelay below). A process that crashed loses what its resend log held
// for others and what it had received and not handled, as before: the
// stream survives connections, not processes. A pair whose direct link is
// down loses nothing either: its frames go through a relay, slower (a
// relayed frame is tagged and checked end to end, and takes a second
// hop; a small one or a sealed one is copied once more at the origin),
// or, if no single node reaches both,
// wait in the queue and the resend log for the link. Flush waits for
// relayed frames until the peer acknowledges them end to end, but not for
// frames that no connection and no relay can carry; and a node that
// relays for two peers waits in Flush (within its caller's context) until
// one of them has gone. What a
// node knows of the set of a peer whose link to it is down dates from
// before the cut: it guides the choice of a relay only as a preference.
//
// A peer whose host vanished without closing its sockets keeps its old
// connection open on our side until a write to it fails, data written to
// it stays unacknowledged for Config.LinkTimeout, or TCP keep-alive
// (Config.KeepAlive) gives up; meanwhile that peer's new dials (after its
// restart) are refused if ours was the winning side of the old connection.
// Frames between hosts are authenticated but not encrypted unless
// Config.TLS is set; on one host they are neither (see "Integrity between
// hosts"). An attacker on the path can still withhold records: one
// dropped is found out by the next, and if none follows, its frames wait,
// as on a network that loses everything, until the connection breaks.
// Any holder of the job secret may claim any node id. A relayed frame's
// end-to-end tag keeps a node without the secret from forging, altering
// or moving it; a relay is a member and holds the secret, so it can forge
// frames of any pair, as any member can on the direct path. Where a hop
// runs without records (one host), a recorded relayed frame of an
// earlier incarnation of its origin, replayed, verifies: it makes the
// destination start the pair's streams afresh. While the bound on
// handshakes in progress
// is reached (connections that never prove the secret, from many
// sources), genuine peers are turned away too, and retry with back-off.
//
// The same-host path is tried only for addresses written as IPs (as Addr
// returns them): a peer's address given as a host name is dialled over
// TCP. A transport listening on every address is found by the port alone;
// one listening on a single address, only when dialled at that address.
package tcp
