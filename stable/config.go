package stable

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Protocol names one of the four stability-detection protocols of Friedman,
// Manor and Guo. The values are local to a process (they never travel on the
// wire); every member of a group must run the same protocol.
type Protocol int

// The protocols, in the order of the paper's §2 and §3.
const (
	// Coord is the coordinator-based protocol of §2.1, Figure 1: position 0
	// of the view sends start, collects an ack with every member's vector,
	// and sends the element-wise minimum back in info.
	Coord Protocol = iota
	// FullDist is the fully distributed protocol of §2.2, Figure 2: position
	// 0 starts a round with its row; every member multicasts its row to all;
	// each computes the column minima once it holds every row.
	FullDist
	// SCoord is the tree protocol S_Coord of §2.3, Figure 3: acks are
	// combined up a tree of degree Config.Degree rooted at position 0, which
	// sends the result to everyone in info.
	SCoord
	// CubeFullDist is the logical-hypercube protocol of §3.2, Figure 5:
	// every member gossips (G, M) with its neighbours in the incomplete
	// hypercube of §3.3 (package topo), in iterations, until G covers the
	// whole view.
	CubeFullDist
)

var protocolNames = [...]string{"coord", "fulldist", "scoord", "cubefulldist"}
var paperNames = [...]string{"Coord", "FullDist", "S_Coord", "CubeFullDist"}

// Protocols lists the four protocols in the paper's order of presentation
// in its figures (Coord, FullDist, S_Coord, CubeFullDist).
func Protocols() []Protocol { return []Protocol{Coord, FullDist, SCoord, CubeFullDist} }

// String returns the flag spelling: "coord", "fulldist", "scoord" or
// "cubefulldist".
func (p Protocol) String() string {
	if p >= 0 && int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("protocol(%d)", int(p))
}

// PaperName returns the name the paper uses: "Coord", "FullDist", "S_Coord"
// or "CubeFullDist".
func (p Protocol) PaperName() string {
	if p >= 0 && int(p) < len(paperNames) {
		return paperNames[p]
	}
	return p.String()
}

// Valid reports whether p is one of the four protocols.
func (p Protocol) Valid() bool { return p >= Coord && p <= CubeFullDist }

// ParseProtocol reads a protocol name, case-insensitively: the String
// spelling, the paper's name ("S_Coord"), or "cube" for CubeFullDist. An
// unknown name is an error wrapping [ErrProtocol].
func ParseProtocol(s string) (Protocol, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	k = strings.ReplaceAll(k, "_", "")
	k = strings.ReplaceAll(k, "-", "")
	if k == "cube" {
		return CubeFullDist, nil
	}
	for i, name := range protocolNames {
		if k == name {
			return Protocol(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want coord, fulldist, scoord or cubefulldist)", ErrProtocol, s)
}

// MarshalText implements encoding.TextMarshaler with the String spelling.
func (p Protocol) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrProtocol, int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler (and so flag.TextVar)
// with [ParseProtocol].
func (p *Protocol) UnmarshalText(b []byte) error {
	q, err := ParseProtocol(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Sentinel errors of package stable.
var (
	// ErrProtocol reports an unknown protocol name or value.
	ErrProtocol = errors.New("stable: unknown protocol")
	// ErrConfig reports an invalid Config field.
	ErrConfig = errors.New("stable: invalid config")
	// ErrMembers reports an invalid member list (empty, or with a node
	// twice).
	ErrMembers = errors.New("stable: invalid member list")
	// ErrMessage is wrapped by the decoding errors of messages whose fields
	// are inconsistent (see the Decode functions).
	ErrMessage = errors.New("stable: malformed message")
)

// Config configures a [Detector]. Every member of a group must use the same
// Protocol, Degree and Senders; Period and Resend may differ between nodes.
type Config struct {
	// Protocol is the stability-detection protocol (default CubeFullDist).
	Protocol Protocol
	// Degree is the number of children of an inner node of S_Coord's tree
	// (the paper's §4.1 uses log n). 0 means ⌈log2 n⌉ of the current view,
	// at least 1. Ignored by the other protocols.
	Degree int
	// Period is the time from the start of one round to the start of the
	// next (the paper's Δ, measured start to start rather than end to
	// start): a round starts every Period, or as soon as the previous round
	// has ended if it took longer than Period. Must be positive. Under Coord,
	// FullDist and S_Coord only position 0 of the view uses it (it starts
	// the rounds); under CubeFullDist every member does.
	Period time.Duration
	// Resend is the retransmission interval of §3.5 ("Weakening the Network
	// Assumptions"). 0 runs the protocols exactly as in Figures 1, 2, 3 and
	// 5, which assume reliable FIFO channels: nothing is retransmitted and
	// no ack-info is sent. A positive Resend adds the §3.5 machinery: every
	// message that is still needed after Resend is sent again, every Resend,
	// ack-info messages confirm Coord's and S_Coord's info, and a member
	// answers a retransmission from a member that lags behind (see the
	// package documentation). Must not be negative.
	Resend time.Duration
	// Senders is the length of the stability vectors: the first Senders
	// members of the view (in view order) are the senders whose messages are
	// tracked (the paper's §4.1: all nodes below 50). 0 means every member;
	// a value larger than the view counts every member.
	Senders int
	// ExcludeFailed makes the detector follow [core.Failed]: a member
	// reported failed is no longer waited for until the next view (the
	// model of the paper's fault experiment, §4.2.5). Off by default:
	// then every member of the view is waited for until the membership
	// layer installs a view without it, which is what a reliable multicast
	// needs. A failure verdict can be withdrawn (core.Recovered) while the
	// member stays in the view, and a message declared stable without it
	// may already have been freed everywhere.
	ExcludeFailed bool
}

// DefaultConfig returns CubeFullDist with a round every 100 ms and §3.5
// retransmission every 100 ms, every member a sender: a configuration for a
// real group on a LAN.
func DefaultConfig() Config {
	return Config{Protocol: CubeFullDist, Period: 100 * time.Millisecond, Resend: 100 * time.Millisecond}
}

// PaperConfig returns the configuration of the paper's simulations (§4.1)
// for protocol p: reliable channels (Resend 0, Figures 1–5 as written), 50
// senders, S_Coord degree log n. Period is one second; an experiment that
// measures one round sets it as it needs.
func PaperConfig(p Protocol) Config {
	return Config{Protocol: p, Period: time.Second, Senders: 50}
}

// Validate reports the first invalid field as an error wrapping
// [ErrConfig] (or [ErrProtocol]).
func (c Config) Validate() error {
	switch {
	case !c.Protocol.Valid():
		return fmt.Errorf("%w: %d", ErrProtocol, int(c.Protocol))
	case c.Degree < 0:
		return fmt.Errorf("%w: Degree %d is negative", ErrConfig, c.Degree)
	case c.Period <= 0:
		return fmt.Errorf("%w: Period %v must be positive", ErrConfig, c.Period)
	case c.Resend < 0:
		return fmt.Errorf("%w: Resend %v is negative", ErrConfig, c.Resend)
	case c.Senders < 0:
		return fmt.Errorf("%w: Senders %d is negative", ErrConfig, c.Senders)
	}
	return nil
}
