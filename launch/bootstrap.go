package launch

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/cohort-mp/cohort/launch/secretenv"
	"github.com/cohort-mp/cohort/topo"
	"github.com/cohort-mp/cohort/wire"
)

// The environment variables of a rank's bootstrap. The launcher sets them
// in each child's environment, never on its command line (a secret on the
// command line is visible to every user of the machine).
const (
	EnvJobID      = "COHORT_JOB_ID"     // the job's name; peers of another job are refused
	EnvRank       = "COHORT_RANK"       // this process's rank, 0 ≤ rank < size, decimal
	EnvSize       = "COHORT_SIZE"       // the number of ranks, decimal
	EnvRendezvous = "COHORT_RENDEZVOUS" // host:port of the launcher's rendezvous listener
	EnvSecret     = "COHORT_SECRET"     // the job secret, hex, at least MinSecretLen bytes
	EnvFanout     = "COHORT_FANOUT"     // optional: the membership radix tree's fan-out
	EnvDetector   = "COHORT_DETECTOR"   // optional: one of Detectors
	EnvReplicas   = "COHORT_REPLICAS"   // optional: R, the replicas of each logical rank (rank and size are then physical)
	EnvSpares     = "COHORT_SPARES"     // optional: S, the last S of the size's processes are spares
	EnvNewcomer   = "COHORT_NEWCOMER"   // optional: 1 for a process that joins the running job (rank ≥ size)
)

// EnvDialOutOnly, set to 1, says that no connection can reach this rank's
// host (behind a NAT or a firewall that drops inbound connections): the
// rank dials every other rank and keeps those connections, and the others
// wait for its dial (tcp.Config.DialOutOnly). Optional; 0 or unset: an
// ordinary host. A launcher sets it per rank (a daemon with dial_out_only
// set, `cohort run --hosts --dial-out-only`), so a rank of one job never
// inherits it from another's environment.
const EnvDialOutOnly = "COHORT_DIAL_OUT_ONLY"

// EnvLinkNotices, set to 1, asks a rank to say on its standard error when
// its link to another rank goes through a third and when it is direct
// again (package comm). cohort run sets it and forwards the lines with the
// ranks' output. Optional; 0 or unset: silent.
const EnvLinkNotices = "COHORT_LINK_NOTICES"

// envNames lists every bootstrap variable, the requiredEnv ones first.
var envNames = []string{EnvJobID, EnvRank, EnvSize, EnvRendezvous, EnvSecret, EnvFanout, EnvDetector, EnvReplicas, EnvSpares, EnvNewcomer}

// requiredEnv is how many of envNames a launcher always sets. Only these
// say that a launcher of ours started the process: the optional ones
// (fan-out, detector, spares) are also what a user exports before srun.
const requiredEnv = 5

// MinSecretLen is the shortest job secret accepted, in bytes.
const MinSecretLen = 16

// MaxReplicas is the largest replication degree.
const MaxReplicas = 16

// Logical returns the logical rank, the number of logical ranks and the
// replica index of the process (R = 1: Rank, Size and 0).
func (b Bootstrap) Logical() (rank, size, replica int) {
	r := max(b.Replicas, 1)
	if r == 1 {
		return b.Rank, b.Size, 0 // a newcomer's Rank is Size or more
	}
	n := b.Size / r
	return b.Rank % n, n, b.Rank / n
}

// Ranks returns the number of ranks of the job: Size without its spares
// (see Bootstrap.Spares); with replicas, the number of logical ranks.
func (b Bootstrap) Ranks() int {
	_, n, _ := b.Logical()
	return n - b.Spares
}

// IsSpare reports whether the process is one of the job's spares: one
// of the last Spares processes of its start, or a newcomer.
func (b Bootstrap) IsSpare() bool { return b.Rank >= b.Size-b.Spares }

// MaxNewcomers is how many processes may join a job after its start, over
// its whole life (package comm's limit).
const MaxNewcomers = 62

// MaxSize is the largest number of ranks a job may have. Ranks are node
// ids (rank r is core.NodeID(r)); the ids above MaxSize are left for the
// launcher and for virtual nodes.
const MaxSize = 1 << 20

// Detectors lists the failure detectors a job may ask for in
// COHORT_DETECTOR: gossip with the binary or double binary round-robin
// schedule, the Phoenix heartbeat detector at 100 ms (the default) or
// with the paper's 5 s intervals, and "off" (no detector at all: failures
// are never detected; for measuring the detector's overhead, `cohort bench
// overhead`).
var Detectors = []string{"brr", "dbrr", "heartbeat", "heartbeat-paper", "off"}

// Bootstrap errors.
var (
	// ErrNotLaunched: no COHORT_* variable is set at all; the program was
	// started by hand rather than by a launcher. A program may then run
	// alone (as a job of one rank) or say how to launch it.
	ErrNotLaunched = errors.New("launch: not started by a launcher (no COHORT_* variable is set; use `cohort run`, or srun --mpi=pmi2 under SLURM)")
	// ErrBootstrap wraps every other error of FromEnv and Validate: the
	// environment does not describe a valid place in a job. The message
	// names the variable.
	ErrBootstrap = errors.New("launch: bad bootstrap")
)

// Bootstrap is what a process needs to take its place in a job started by
// a launcher: its rank among Size, the job's name and secret, where the
// launcher's rendezvous listens, and the job's membership settings.
type Bootstrap struct {
	JobID      string // at most wire.MaxJobIDLen bytes
	Rank, Size int    // 0 ≤ Rank < Size ≤ MaxSize
	Rendezvous string // host:port
	Secret     []byte // at least MinSecretLen bytes
	Fanout     int    // the radix tree's fan-out; 0 = the membership default
	Detector   string // one of Detectors; "" = the default (heartbeat)

	// Listen is the host (an IP address or a name) this rank listens on;
	// "" means 127.0.0.1 (every rank on this machine). See [Bootstrap.ListenAddr].
	Listen string
	// ListenPort is the port to listen on; 0 means a free one (the
	// addresses computed from SLURM's environment need a fixed one).
	ListenPort int
	// Exchange, when set, replaces the launcher's rendezvous: Register
	// hands it this rank's address and gets every rank's from it (under
	// SLURM: the PMI-2 key-value space). Rendezvous is then unused.
	Exchange Exchanger
	// Source says where the bootstrap came from, for messages: "cohort
	// run", "SLURM PMI-2", "SLURM environment".
	Source string
	// Replicas is R, the number of replicas of each logical rank (0 or 1:
	// no replication). With R > 1, Rank and Size are the physical process's
	// id and the number of processes: the job has Size/R logical ranks and
	// process p is replica p/(Size/R) of logical rank p mod (Size/R)
	// (package replica's layout).
	Replicas int
	// Spares is S, the number of spare processes: the last S of the Size
	// processes hold no rank when the job starts and take the rank of a
	// process that fails (package comm and package resil). 0: none.
	// Spares and Replicas > 1 do not go together.
	Spares int
	// TLSCert and TLSKey (PEM), when set, encrypt the job's connections
	// with the job's certificate (see [NewJobTLS], [Bootstrap.TLSConfig]).
	TLSCert, TLSKey []byte
	// DialOutOnly: nobody can dial this rank's host (EnvDialOutOnly).
	DialOutOnly bool
	// Newcomer: the process joins the job after its start (a process
	// the launcher started again where one died, Config.Respawn). Size
	// is then the number of processes the job started with and Rank,
	// from Size to Size+MaxNewcomers−1, its own number; its Register
	// returns the addresses of the processes up to its own, "" for
	// those gone, and it asks the membership to admit it (package
	// comm's newcomers).
	Newcomer bool
}

// Exchanger gives every rank of a job every other rank's listen address
// without a launcher of ours (SLURM's PMI-2 key-value space, or addresses
// computed from SLURM's environment).
type Exchanger interface {
	// Exchange publishes this rank's address and returns every rank's,
	// indexed by rank, once all have published; it blocks at most until
	// ctx ends or its own bound passes, and its errors say which.
	Exchange(ctx context.Context, addr string) ([]string, error)
	// Close releases the exchanger (the PMI connection); idempotent.
	Close() error
}

// ListenAddr is where the rank should listen: Listen (default 127.0.0.1)
// and ListenPort (default a free port).
func (b Bootstrap) ListenAddr() string {
	host := b.Listen
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(b.ListenPort))
}

// FromEnv reads the bootstrap from the environment through getenv
// (os.Getenv in a process). If none of the variables a launcher always
// sets is (job id, rank, size, rendezvous, secret) it returns
// [ErrNotLaunched]; otherwise every variable is checked (see
// [Bootstrap.Validate]) and an error wraps [ErrBootstrap] and names the
// variable at fault.
//
// The job secret and the TLS key (EnvSecret, EnvTLSKey) are removed from
// the process's environment as they are read, so that no process this one
// starts inherits them; a later FromEnv in the same process still finds
// them (they are kept in memory).
func FromEnv(getenv func(string) string) (Bootstrap, error) {
	var b Bootstrap
	any := false
	for _, name := range envNames[:requiredEnv] {
		if getenv(name) != "" {
			any = true
			break
		}
	}
	if !any {
		return b, ErrNotLaunched
	}
	// The secrets leave the environment first, whatever else is wrong
	// with it: no process this one starts inherits them.
	secretHex := strings.TrimSpace(secretenv.Take(getenv, EnvSecret))
	b.TLSKey = []byte(secretenv.Take(getenv, EnvTLSKey))
	get := func(name string) (string, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return "", fmt.Errorf("%w: %s is not set (but other COHORT_ variables are)", ErrBootstrap, name)
		}
		return v, nil
	}
	number := func(name string) (int, error) {
		v, err := get(name)
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%w: %s=%q is not a decimal integer", ErrBootstrap, name, v)
		}
		return int(n), nil
	}
	var err error
	if b.JobID, err = get(EnvJobID); err != nil {
		return b, err
	}
	if b.Size, err = number(EnvSize); err != nil {
		return b, err
	}
	if b.Rank, err = number(EnvRank); err != nil {
		return b, err
	}
	if b.Rendezvous, err = get(EnvRendezvous); err != nil {
		return b, err
	}
	if secretHex == "" {
		return b, fmt.Errorf("%w: %s is not set (but other COHORT_ variables are)", ErrBootstrap, EnvSecret)
	}
	if b.Secret, err = hex.DecodeString(secretHex); err != nil {
		return b, fmt.Errorf("%w: %s is not hex: %v", ErrBootstrap, EnvSecret, err)
	}
	if getenv(EnvFanout) != "" {
		if b.Fanout, err = number(EnvFanout); err != nil {
			return b, err
		}
		if b.Fanout == 0 {
			return b, fmt.Errorf("%w: %s=0: leave it unset for the default", ErrBootstrap, EnvFanout)
		}
	}
	b.Detector = strings.TrimSpace(getenv(EnvDetector))
	if getenv(EnvReplicas) != "" {
		if b.Replicas, err = number(EnvReplicas); err != nil {
			return b, err
		}
	}
	if getenv(EnvSpares) != "" {
		if b.Spares, err = number(EnvSpares); err != nil {
			return b, err
		}
	}
	switch v := strings.TrimSpace(getenv(EnvNewcomer)); v {
	case "", "0":
	case "1":
		b.Newcomer = true
	default:
		return b, fmt.Errorf("%w: %s=%q, want 1 or 0", ErrBootstrap, EnvNewcomer, v)
	}
	// Optional: the host to listen on (a launcher on several hosts sets
	// the address of the rank's host; default 127.0.0.1).
	b.Listen = strings.TrimSpace(getenv(EnvListenHost))
	b.TLSCert = []byte(getenv(EnvTLSCert))
	switch v := strings.TrimSpace(getenv(EnvDialOutOnly)); v {
	case "", "0":
	case "1":
		b.DialOutOnly = true
	default:
		return b, fmt.Errorf("%w: %s=%q, want 1 or 0", ErrBootstrap, EnvDialOutOnly, v)
	}
	b.Source = "cohort run"
	return b, b.Validate()
}

// Validate checks every field (as FromEnv does for the environment):
// the job id is set and fits a handshake, 1 ≤ Size ≤ MaxSize, 0 ≤ Rank <
// Size, Rendezvous is host:port with a port from 1 to 65535, the secret
// has at least MinSecretLen bytes, Fanout is 0 or a fan-out the
// membership's radix tree accepts (a power of two from 2), and Detector is
// "" or one of Detectors. Errors wrap [ErrBootstrap] and name the
// variable.
func (b Bootstrap) Validate() error {
	switch {
	case b.JobID == "":
		return fmt.Errorf("%w: %s is empty", ErrBootstrap, EnvJobID)
	case len(b.JobID) > wire.MaxJobIDLen:
		return fmt.Errorf("%w: %s is %d bytes long, the limit is %d", ErrBootstrap, EnvJobID, len(b.JobID), wire.MaxJobIDLen)
	case b.Size < 1 || b.Size > MaxSize:
		return fmt.Errorf("%w: %s=%d, want 1 to %d", ErrBootstrap, EnvSize, b.Size, MaxSize)
	case b.Newcomer && (b.Rank < b.Size || b.Rank >= b.Size+MaxNewcomers):
		return fmt.Errorf("%w: %s=%d with %s=1 and %s=%d: a newcomer's number is from %d to %d", ErrBootstrap, EnvRank, b.Rank, EnvNewcomer, EnvSize, b.Size, b.Size, b.Size+MaxNewcomers-1)
	case !b.Newcomer && (b.Rank < 0 || b.Rank >= b.Size):
		return fmt.Errorf("%w: %s=%d is out of range for %s=%d (want 0 to %d)", ErrBootstrap, EnvRank, b.Rank, EnvSize, b.Size, b.Size-1)
	case len(b.Secret) < MinSecretLen:
		return fmt.Errorf("%w: %s has %d bytes, want at least %d", ErrBootstrap, EnvSecret, len(b.Secret), MinSecretLen)
	}
	if b.Exchange == nil {
		if err := checkAddr(b.Rendezvous); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrBootstrap, EnvRendezvous, b.Rendezvous, err)
		}
	}
	if b.Fanout != 0 {
		if _, err := topo.NewRadix(1, b.Fanout); err != nil {
			return fmt.Errorf("%w: %s=%d: %v", ErrBootstrap, EnvFanout, b.Fanout, err)
		}
	}
	if b.Detector != "" && !isDetector(b.Detector) {
		return fmt.Errorf("%w: %s=%q, want one of %s", ErrBootstrap, EnvDetector, b.Detector, strings.Join(Detectors, ", "))
	}
	if b.Replicas < 0 || b.Replicas > MaxReplicas || (b.Replicas > 1 && b.Size%b.Replicas != 0) {
		return fmt.Errorf("%w: %s=%d with %s=%d: want 1 to %d replicas dividing the size", ErrBootstrap, EnvReplicas, b.Replicas, EnvSize, b.Size, MaxReplicas)
	}
	switch {
	case b.Spares < 0 || b.Spares >= b.Size:
		return fmt.Errorf("%w: %s=%d with %s=%d: want 0 to %d spares (at least one rank)", ErrBootstrap, EnvSpares, b.Spares, EnvSize, b.Size, b.Size-1)
	case b.Spares > 0 && b.Replicas > 1:
		return fmt.Errorf("%w: %s=%d with %s=%d: spares and replicas do not go together", ErrBootstrap, EnvSpares, b.Spares, EnvReplicas, b.Replicas)
	}
	if b.Newcomer && (b.Exchange != nil || b.Replicas > 1) {
		return fmt.Errorf("%w: %s=1: a newcomer joins through the launcher's rendezvous, without replicas", ErrBootstrap, EnvNewcomer)
	}
	if (len(b.TLSCert) == 0) != (len(b.TLSKey) == 0) {
		return fmt.Errorf("%w: %s and %s go together (an encrypted job needs both)", ErrBootstrap, EnvTLSCert, EnvTLSKey)
	}
	if _, err := b.TLSConfig(); err != nil {
		return err
	}
	return nil
}

// Environ returns the bootstrap as environment entries ("NAME=value") for
// a child process; the optional variables only when set.
func (b Bootstrap) Environ() []string {
	env := []string{
		EnvJobID + "=" + b.JobID,
		EnvRank + "=" + strconv.Itoa(b.Rank),
		EnvSize + "=" + strconv.Itoa(b.Size),
		EnvRendezvous + "=" + b.Rendezvous,
		EnvSecret + "=" + hex.EncodeToString(b.Secret),
	}
	if b.Fanout != 0 {
		env = append(env, EnvFanout+"="+strconv.Itoa(b.Fanout))
	}
	if b.Detector != "" {
		env = append(env, EnvDetector+"="+b.Detector)
	}
	if b.Listen != "" {
		env = append(env, EnvListenHost+"="+b.Listen)
	}
	if b.Replicas > 1 {
		env = append(env, EnvReplicas+"="+strconv.Itoa(b.Replicas))
	}
	if b.Spares > 0 {
		env = append(env, EnvSpares+"="+strconv.Itoa(b.Spares))
	}
	if len(b.TLSCert) > 0 {
		env = append(env, EnvTLSCert+"="+string(b.TLSCert), EnvTLSKey+"="+string(b.TLSKey))
	}
	if b.DialOutOnly {
		env = append(env, EnvDialOutOnly+"=1")
	}
	if b.Newcomer {
		env = append(env, EnvNewcomer+"=1")
	}
	return env
}

func isDetector(d string) bool {
	for _, name := range Detectors {
		if d == name {
			return true
		}
	}
	return false
}

// checkAddr checks that addr is host:port with a non-empty host and a
// port from 1 to 65535.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("no host")
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}
