package runner

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/cohort-mp/cohort/internal/tracker"
	"github.com/cohort-mp/cohort/launch/secretenv"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The environment variables of a node's bootstrap.
const (
	EnvJobID  = "COHORT_JOB_ID"
	EnvNodeID = "COHORT_NODE_ID"
	EnvNodes  = "COHORT_NODES"
	EnvSecret = "COHORT_SECRET"
)

// MinSecretLen is the shortest job secret accepted, in bytes.
const MinSecretLen = 16

// ErrBootstrap is wrapped by every error of [LoadBootstrap] and
// [ParseNodes]: the environment does not describe a valid place in a job.
var ErrBootstrap = errors.New("runner: bad bootstrap")

// Peer is one node of a job's address book.
type Peer struct {
	ID   core.NodeID
	Addr string // "host:port"
}

// Bootstrap is what a node needs to take its place in a job.
type Bootstrap struct {
	JobID  string
	Self   core.NodeID
	Peers  []Peer // every listed node, Self included, in the listed order
	Secret []byte
}

// Addr returns the listed address of node id ("" if it is not listed).
func (b Bootstrap) Addr(id core.NodeID) string {
	for _, p := range b.Peers {
		if p.ID == id {
			return p.Addr
		}
	}
	return ""
}

// IDs returns the listed node ids, in the listed order.
func (b Bootstrap) IDs() []core.NodeID {
	ids := make([]core.NodeID, len(b.Peers))
	for i, p := range b.Peers {
		ids[i] = p.ID
	}
	return ids
}

// Environ returns the bootstrap as environment entries ("NAME=value"), the
// address book inline, for a child process.
func (b Bootstrap) Environ() []string {
	return []string{
		EnvJobID + "=" + b.JobID,
		EnvNodeID + "=" + strconv.FormatUint(uint64(b.Self), 10),
		EnvNodes + "=" + FormatNodes(b.Peers),
		EnvSecret + "=" + hex.EncodeToString(b.Secret),
	}
}

// LoadBootstrap reads the bootstrap from the environment through getenv
// (os.Getenv in a node). It checks every variable: the job id is set and
// fits the handshake, the node id is a number listed in COHORT_NODES, the
// address book parses (see [ParseNodes]; a value without "=" is read as the
// path of a file holding it), and the secret is hex of at least
// [MinSecretLen] bytes. Errors wrap [ErrBootstrap] and name the variable.
// The secret is removed from the process's environment as it is read, so
// that no process the node starts inherits it (a later LoadBootstrap in
// the process still finds it).
func LoadBootstrap(getenv func(string) string) (Bootstrap, error) {
	var b Bootstrap
	// The secret leaves the environment first, whatever else is wrong
	// with it: no process this one starts inherits it.
	secretHex := strings.TrimSpace(secretenv.Take(getenv, EnvSecret))
	get := func(name string) (string, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return "", fmt.Errorf("%w: %s is not set", ErrBootstrap, name)
		}
		return v, nil
	}
	job, err := get(EnvJobID)
	if err != nil {
		return b, err
	}
	if len(job) > wire.MaxJobIDLen {
		return b, fmt.Errorf("%w: %s is %d bytes long, the limit is %d", ErrBootstrap, EnvJobID, len(job), wire.MaxJobIDLen)
	}
	b.JobID = job

	idText, err := get(EnvNodeID)
	if err != nil {
		return b, err
	}
	id, err := parseID(idText)
	if err != nil {
		return b, fmt.Errorf("%w: %s=%q: %v", ErrBootstrap, EnvNodeID, idText, err)
	}
	b.Self = id

	nodes, err := get(EnvNodes)
	if err != nil {
		return b, err
	}
	if !strings.Contains(nodes, "=") {
		data, err := os.ReadFile(nodes)
		if err != nil {
			return b, fmt.Errorf("%w: %s names no readable file (and is not an id=address list): %v", ErrBootstrap, EnvNodes, err)
		}
		nodes = string(data)
	}
	if b.Peers, err = ParseNodes(nodes); err != nil {
		return b, fmt.Errorf("%w (in %s)", err, EnvNodes)
	}
	if b.Addr(b.Self) == "" {
		return b, fmt.Errorf("%w: %s=%v is not listed in %s (listed: %s)", ErrBootstrap, EnvNodeID, uint32(b.Self), EnvNodes, tracker.FormatIDs(b.IDs()))
	}

	if secretHex == "" {
		return b, fmt.Errorf("%w: %s is not set", ErrBootstrap, EnvSecret)
	}
	secret, err := hex.DecodeString(secretHex)
	if err != nil {
		return b, fmt.Errorf("%w: %s is not hex: %v", ErrBootstrap, EnvSecret, err)
	}
	if len(secret) < MinSecretLen {
		return b, fmt.Errorf("%w: %s has %d bytes, want at least %d", ErrBootstrap, EnvSecret, len(secret), MinSecretLen)
	}
	b.Secret = secret
	return b, nil
}

// ParseNodes parses an address book: entries "id=host:port" separated by
// commas, white space or new lines; "#" starts a comment that runs to the
// end of the line. Ids are decimal; each appears once; the port is a
// number from 1 to 65535. Errors wrap [ErrBootstrap].
func ParseNodes(text string) ([]Peer, error) {
	var peers []Peer
	seen := map[core.NodeID]bool{}
	for ln, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, entry := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			bad := func(format string, args ...any) error {
				return fmt.Errorf("%w: line %d, entry %q: %s", ErrBootstrap, ln+1, entry, fmt.Sprintf(format, args...))
			}
			idText, addr, ok := strings.Cut(entry, "=")
			if !ok {
				return nil, bad("want id=host:port")
			}
			id, err := parseID(idText)
			if err != nil {
				return nil, bad("%v", err)
			}
			if seen[id] {
				return nil, bad("node %d is listed twice", uint32(id))
			}
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, bad("%v", err)
			}
			if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
				return nil, bad("port %q is not a number from 1 to 65535", port)
			}
			if host == "" {
				return nil, bad("no host")
			}
			seen[id] = true
			peers = append(peers, Peer{ID: id, Addr: addr})
		}
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("%w: no nodes listed", ErrBootstrap)
	}
	return peers, nil
}

// FormatNodes renders an address book in the form ParseNodes reads,
// comma-separated.
func FormatNodes(peers []Peer) string {
	var sb strings.Builder
	for i, p := range peers {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%d=%s", uint32(p.ID), p.Addr)
	}
	return sb.String()
}

func parseID(s string) (core.NodeID, error) {
	u, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return core.None, fmt.Errorf("node id %q is not a decimal number below 2^32", s)
	}
	id := core.NodeID(u)
	if id == core.None {
		return core.None, fmt.Errorf("node id %d is reserved", u)
	}
	return id, nil
}
