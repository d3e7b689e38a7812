package launch

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/launch/secretenv"
	"github.com/cohort-mp/cohort/wire"
)

// The environment of a rank started by SLURM's srun. SLURM sets PMI_* and
// SLURM_*; the COHORT_* ones are the user's.
const (
	// EnvUserSecret is the user's secret, from which each job's secret is
	// derived (with the cluster name and the job and step ids): at least
	// MinSecretLen bytes. Without it, the secret is read from
	// EnvSecretFile.
	EnvUserSecret = "COHORT_SLURM_SECRET"
	// EnvSecretFile names a file holding the user's secret (default
	// ~/.cohort/secret). It must belong to the user and be readable by
	// nobody else (mode 0600 or stricter).
	EnvSecretFile = "COHORT_SECRET_FILE"
	// EnvListenHost overrides the address a rank listens on (an IP address
	// or a host name of this node reachable from the job's other nodes).
	EnvListenHost = "COHORT_LISTEN_HOST"
	// EnvSlurmTimeout bounds the wait for every task to publish its address
	// (a Go duration such as "90s"; default DefaultSlurmTimeout).
	EnvSlurmTimeout = "COHORT_SLURM_TIMEOUT"
)

// DefaultSlurmTimeout bounds the wait for all tasks of a step to publish
// their addresses (srun starts them within seconds; a task that died
// before it would otherwise leave the others waiting).
const DefaultSlurmTimeout = 60 * time.Second

// ErrNoSecret: started by SLURM but the user gave no secret (or one that
// is too short, or a file others can read). The message says what to do.
var ErrNoSecret = errors.New("launch: no job secret under SLURM")

// secretHint tells a user how to make a secret.
const secretHint = "create one with `mkdir -p ~/.cohort && openssl rand -hex 32 > ~/.cohort/secret && chmod 600 ~/.cohort/secret`, " +
	"or export " + EnvUserSecret + " (at least 16 characters) before srun/sbatch"

// UnderSLURM says whether getenv describes a task of a SLURM job step
// (srun): a PMI descriptor, or SLURM's step variables.
func UnderSLURM(getenv func(string) string) bool {
	if getenv("PMI_FD") != "" {
		return true
	}
	return getenv("SLURM_JOB_ID") != "" && stepID(getenv) != "" && getenv("SLURM_PROCID") != ""
}

// Detect finds this process's place in a job wherever it was started: by
// `cohort run` (the COHORT_* variables, [FromEnv]) or by SLURM's srun
// ([FromSLURM]); [ErrNotLaunched] if by neither.
func Detect(ctx context.Context, getenv func(string) string) (Bootstrap, error) {
	b, err := FromEnv(getenv)
	if !errors.Is(err, ErrNotLaunched) {
		return b, err
	}
	if UnderSLURM(getenv) {
		return FromSLURM(ctx, getenv)
	}
	return b, err
}

// FromSLURM builds the bootstrap of a task started by srun. With a PMI-2
// descriptor (srun --mpi=pmi2, or MpiDefault=pmi2), rank and size come from
// the PMI server, and Register exchanges the addresses through its
// key-value space (put, fence, get). Without one, rank, size and every
// task's address are computed from SLURM's variables (see EnvPortBase),
// and rank 0 says so on standard error. The job is named
// "slurm-<cluster>-<job>.<step>"; its secret is HMAC-SHA256 of those ids
// under the user's secret (EnvUserSecret or EnvSecretFile), so every task
// of the step derives the same one and no other step's can. The rank
// listens on 127.0.0.1 if the step has one node, otherwise on an address of
// this node that the others can reach (see [Bootstrap.Listen]).
func FromSLURM(ctx context.Context, getenv func(string) string) (Bootstrap, error) {
	return fromSLURM(ctx, realSystem(getenv))
}

// system is what FromSLURM reads of the machine (tests fake it).
type system struct {
	getenv     func(string) string
	hostname   func() (string, error)
	lookupIP   func(ctx context.Context, host string) ([]net.IP, error)
	ifaceAddrs func() ([]net.Addr, error)
	readFile   func(path string) ([]byte, error)
	stat       func(path string) (os.FileInfo, error)
	uid        int
	openPMI    func(fd string, timeout time.Duration) (pmiServer, error)
	notice     io.Writer // where rank 0 says that it computed the addresses (nil: nowhere)
}

// pmiServer is the part of PMIClient that FromSLURM uses.
type pmiServer interface {
	Init(ctx context.Context, rank int, pmiJobID string) error
	Size() int
	Put(ctx context.Context, key, value string) error
	Fence(ctx context.Context, timeout time.Duration) error
	Get(ctx context.Context, key string) (string, bool, error)
	Finalize(ctx context.Context) error
	Close() error
}

func realSystem(getenv func(string) string) system {
	return system{
		getenv:   getenv,
		hostname: os.Hostname,
		lookupIP: func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		},
		ifaceAddrs: net.InterfaceAddrs,
		readFile:   os.ReadFile,
		stat:       os.Stat,
		uid:        os.Getuid(),
		openPMI: func(fd string, timeout time.Duration) (pmiServer, error) {
			return PMIFromFD(fd, timeout)
		},
		notice: os.Stderr,
	}
}

func stepID(getenv func(string) string) string {
	if s := getenv("SLURM_STEP_ID"); s != "" {
		return s
	}
	return getenv("SLURM_STEPID")
}

func fromSLURM(ctx context.Context, sys system) (Bootstrap, error) {
	getenv := sys.getenv
	var b Bootstrap
	bad := func(format string, args ...any) (Bootstrap, error) {
		return Bootstrap{}, fmt.Errorf("%w: under SLURM: %s", ErrBootstrap, fmt.Sprintf(format, args...))
	}
	job, step := strings.TrimSpace(getenv("SLURM_JOB_ID")), strings.TrimSpace(stepID(getenv))
	if job == "" || step == "" {
		// PMI_FD without SLURM's ids: another PMI server (mpiexec); its
		// job id could still name the job, but the secret needs ids that
		// every task sees alike.
		return bad("PMI_FD is set but SLURM_JOB_ID or SLURM_STEP_ID is not (only SLURM's srun is supported)")
	}
	cluster := strings.TrimSpace(getenv("SLURM_CLUSTER_NAME"))
	b.JobID = "slurm-" + job + "." + step
	if cluster != "" {
		b.JobID = "slurm-" + cluster + "-" + job + "." + step
	}
	if len(b.JobID) > wire.MaxJobIDLen {
		return bad("the job name %q is longer than %d bytes", clip(b.JobID), wire.MaxJobIDLen)
	}
	user, err := userSecret(sys)
	if err != nil {
		return Bootstrap{}, err
	}
	b.Secret = deriveSecret(user, cluster, job, step)

	timeout := DefaultSlurmTimeout
	if t := strings.TrimSpace(getenv(EnvSlurmTimeout)); t != "" {
		if timeout, err = time.ParseDuration(t); err != nil || timeout <= 0 {
			return bad("%s=%q is not a positive duration such as 90s", EnvSlurmTimeout, t)
		}
	}
	if v := strings.TrimSpace(getenv(EnvFanout)); v != "" {
		if b.Fanout, err = strconv.Atoi(v); err != nil || b.Fanout == 0 {
			return bad("%s=%q is not a fan-out (a power of two from 2)", EnvFanout, v)
		}
	}
	b.Detector = strings.TrimSpace(getenv(EnvDetector))
	// The user's, exported before srun: the step's last tasks are spares
	// (Validate checks the count against the step's size).
	if v := strings.TrimSpace(getenv(EnvSpares)); v != "" {
		if b.Spares, err = strconv.Atoi(v); err != nil {
			return bad("%s=%q is not a number of spare tasks", EnvSpares, v)
		}
	}

	// SLURM's own view of the step, to check PMI's against.
	envRank, envSize := -1, -1
	if v := getenv("SLURM_PROCID"); v != "" {
		if envRank, err = strconv.Atoi(v); err != nil {
			return bad("SLURM_PROCID=%q is not a number", v)
		}
	}
	for _, name := range []string{"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"} {
		if v := getenv(name); v != "" {
			if envSize, err = strconv.Atoi(v); err != nil {
				return bad("%s=%q is not a number", name, v)
			}
			break
		}
	}

	fd := getenv("PMI_FD")
	if fd == "" {
		return fromSLURMEnv(ctx, sys, b, cluster, job, step)
	}
	rankText := getenv("PMI_RANK")
	pmiRank, err := strconv.Atoi(rankText)
	if err != nil {
		return bad("PMI_FD is set but PMI_RANK=%q is not a rank", rankText)
	}
	srv, err := sys.openPMI(fd, 0)
	if err != nil {
		return Bootstrap{}, err
	}
	if err := srv.Init(ctx, pmiRank, getenv("PMI_JOBID")); err != nil {
		srv.Close()
		return Bootstrap{}, err
	}
	b.Rank, b.Size = pmiRank, srv.Size()
	switch {
	case envRank >= 0 && envRank != b.Rank:
		srv.Close()
		return bad("PMI says rank %d, SLURM_PROCID says %d", b.Rank, envRank)
	case envSize >= 0 && envSize != b.Size:
		srv.Close()
		return bad("PMI says %d tasks, SLURM_STEP_NUM_TASKS says %d", b.Size, envSize)
	}
	if b.Listen, err = listenHost(ctx, sys); err != nil {
		srv.Close()
		return Bootstrap{}, err
	}
	b.Exchange = &pmiExchange{srv: srv, rank: b.Rank, size: b.Size, fence: timeout}
	b.Source = "SLURM PMI-2"
	if err := b.Validate(); err != nil {
		srv.Close()
		return Bootstrap{}, err
	}
	return b, nil
}

// deriveSecret is the job secret of step job.step of cluster under the
// user's secret: HMAC-SHA256(user, "cohort slurm job secret" ‖ 0 ‖
// cluster ‖ 0 ‖ job ‖ 0 ‖ step).
func deriveSecret(user []byte, cluster, job, step string) []byte {
	m := hmac.New(sha256.New, user)
	m.Write([]byte("cohort slurm job secret\x00" + cluster + "\x00" + job + "\x00" + step))
	return m.Sum(nil)
}

// userSecret reads the user's secret from EnvUserSecret, which it removes
// from the process's environment, else from EnvSecretFile (default
// ~/.cohort/secret), which must belong to the user and be readable by
// nobody else.
func userSecret(sys system) ([]byte, error) {
	// Out of the environment as soon as read (the file's path, which is
	// no secret, stays).
	if v := strings.TrimSpace(secretenv.Take(sys.getenv, EnvUserSecret)); v != "" {
		if len(v) < MinSecretLen {
			return nil, fmt.Errorf("%w: %s has %d characters, want at least %d; %s", ErrNoSecret, EnvUserSecret, len(v), MinSecretLen, secretHint)
		}
		return []byte(v), nil
	}
	path := strings.TrimSpace(sys.getenv(EnvSecretFile))
	if path == "" {
		home := sys.getenv("HOME")
		if home == "" {
			return nil, fmt.Errorf("%w: %s is not set and there is no HOME for ~/.cohort/secret; %s", ErrNoSecret, EnvUserSecret, secretHint)
		}
		path = filepath.Join(home, ".cohort", "secret")
	}
	fi, err := sys.stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is not set and %s does not exist; %s", ErrNoSecret, EnvUserSecret, path, secretHint)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrNoSecret, path, err)
	}
	if fi.Mode()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s can be read by others (mode %v); make it private: chmod 600 %s", ErrNoSecret, path, fi.Mode().Perm(), path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != sys.uid {
		return nil, fmt.Errorf("%w: %s belongs to uid %d, not to this user (uid %d)", ErrNoSecret, path, st.Uid, sys.uid)
	}
	data, err := sys.readFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoSecret, path, err)
	}
	s := strings.TrimSpace(string(data))
	if len(s) < MinSecretLen {
		return nil, fmt.Errorf("%w: %s holds %d characters, want at least %d; %s", ErrNoSecret, path, len(s), MinSecretLen, secretHint)
	}
	return []byte(s), nil
}

// listenHost picks the address this rank listens on: EnvListenHost if
// set; 127.0.0.1 when the step runs on one node; otherwise a non-loopback
// address of this node's name (SLURMD_NODENAME, then the host name), or
// failing that the first non-loopback address of an interface that is up.
func listenHost(ctx context.Context, sys system) (string, error) {
	if h := strings.TrimSpace(sys.getenv(EnvListenHost)); h != "" {
		return h, nil
	}
	nodes := sys.getenv("SLURM_STEP_NUM_NODES")
	if nodes == "" {
		nodes = sys.getenv("SLURM_NNODES")
	}
	if strings.TrimSpace(nodes) == "1" {
		return "127.0.0.1", nil
	}
	var names []string
	if n := sys.getenv("SLURMD_NODENAME"); n != "" {
		names = append(names, n)
	}
	if h, err := sys.hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	for _, name := range names {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := sys.lookupIP(lctx, name)
		cancel()
		if err != nil {
			continue
		}
		for _, ip := range ips {
			if !ip.IsLoopback() && !ip.IsUnspecified() && !ip.IsLinkLocalUnicast() {
				return ip.String(), nil
			}
		}
	}
	addrs, err := sys.ifaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("%w: under SLURM with %s nodes: no address of this node that other nodes can reach (its name %v does not resolve to one and no interface has one); set %s",
		ErrBootstrap, nodes, names, EnvListenHost)
}

// pmiExchange exchanges the ranks' addresses through the PMI-2 key-value
// space in two rounds, so that the server answers O(n) gets instead of
// one per pair of tasks: every task puts its address and fences; task 0
// gets them all and puts the table (in values of at most 1 KiB); a second
// fence; every other task gets the table.
type pmiExchange struct {
	srv        pmiServer
	rank, size int
	fence      time.Duration
}

// The keys of the exchange.
const (
	pmiTableCount = "cohort-table-n"     // how many table chunks, or absent
	pmiTableError = "cohort-table-error" // why task 0 could not build the table
)

func pmiAddrKey(rank int) string   { return "cohort-addr-" + strconv.Itoa(rank) }
func pmiTableKey(chunk int) string { return "cohort-table-" + strconv.Itoa(chunk) }

func (e *pmiExchange) Exchange(ctx context.Context, addr string) ([]string, error) {
	if err := e.srv.Put(ctx, pmiAddrKey(e.rank), addr); err != nil {
		return nil, err
	}
	if err := e.srv.Fence(ctx, e.fence); err != nil {
		return nil, err
	}
	if e.rank == 0 {
		addrs, err := e.collect(ctx, addr)
		if err != nil {
			// Tell the others why before the fence they wait in.
			msg := strings.Map(func(r rune) rune {
				if r == ';' || r == '\n' || r == 0 {
					return ' '
				}
				return r
			}, err.Error())
			e.srv.Put(ctx, pmiTableError, clip(msg))
			e.srv.Fence(ctx, e.fence)
			return nil, err
		}
		chunks := chunkTable(addrs, pmiMaxValueLen)
		for i, c := range chunks {
			if err := e.srv.Put(ctx, pmiTableKey(i), c); err != nil {
				return nil, err
			}
		}
		if err := e.srv.Put(ctx, pmiTableCount, strconv.Itoa(len(chunks))); err != nil {
			return nil, err
		}
		if err := e.srv.Fence(ctx, e.fence); err != nil {
			return nil, err
		}
		return addrs, nil
	}
	if err := e.srv.Fence(ctx, e.fence); err != nil {
		return nil, err
	}
	return e.readTable(ctx, addr)
}

// collect is task 0's gets of every task's address.
func (e *pmiExchange) collect(ctx context.Context, addr string) ([]string, error) {
	addrs := make([]string, e.size)
	addrs[0] = addr
	for r := 1; r < e.size; r++ {
		v, ok, err := e.srv.Get(ctx, pmiAddrKey(r))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: task %d published no address (is every task of the step a cohort program?)", ErrPMI, r)
		}
		if err := checkAddr(v); err != nil || strings.Contains(v, ",") {
			return nil, fmt.Errorf("%w: task %d published the address %q, not host:port", ErrPMI, r, clip(v))
		}
		addrs[r] = v
	}
	return addrs, nil
}

// readTable gets the table task 0 put.
func (e *pmiExchange) readTable(ctx context.Context, addr string) ([]string, error) {
	v, ok, err := e.srv.Get(ctx, pmiTableCount)
	if err != nil {
		return nil, err
	}
	if !ok {
		why, found, _ := e.srv.Get(ctx, pmiTableError)
		if !found {
			why = "it put no table (it died, or is not a cohort program)"
		}
		return nil, fmt.Errorf("%w: task 0 could not gather the addresses: %s", ErrPMI, why)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > e.size {
		return nil, fmt.Errorf("%w: task 0's table has %q chunks", ErrPMI, clip(v))
	}
	addrs := make([]string, 0, e.size)
	for i := 0; i < n; i++ {
		c, ok, err := e.srv.Get(ctx, pmiTableKey(i))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: chunk %d of task 0's table is missing", ErrPMI, i)
		}
		addrs = append(addrs, strings.Split(c, ",")...)
		if len(addrs) > e.size {
			break
		}
	}
	if len(addrs) != e.size {
		return nil, fmt.Errorf("%w: task 0's table lists %d addresses for %d tasks", ErrPMI, len(addrs), e.size)
	}
	for r, a := range addrs {
		if err := checkAddr(a); err != nil {
			return nil, fmt.Errorf("%w: task 0's table gives task %d the address %q: %v", ErrPMI, r, clip(a), err)
		}
	}
	if addrs[e.rank] != addr {
		return nil, fmt.Errorf("%w: task 0's table gives this task (%d) the address %q, it listens on %q", ErrPMI, e.rank, clip(addrs[e.rank]), addr)
	}
	return addrs, nil
}

// chunkTable joins addrs with commas into values of at most max bytes
// (an address is at most maxAddrLen < max bytes).
func chunkTable(addrs []string, max int) []string {
	var chunks []string
	var b strings.Builder
	for _, a := range addrs {
		if b.Len() > 0 && b.Len()+1+len(a) > max {
			chunks = append(chunks, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a)
	}
	return append(chunks, b.String())
}

// Close finalizes the PMI connection (bounded), as an MPI program does at
// its end.
func (e *pmiExchange) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.srv.Finalize(ctx)
	e.srv.Close()
	return err
}

// exchange is Register with an Exchanger instead of a launcher.
func (b Bootstrap) exchange(ctx context.Context, listenAddr string) (*Registration, error) {
	if err := checkAddr(listenAddr); err != nil {
		b.Exchange.Close()
		return nil, fmt.Errorf("%w: listen address %q: %v", ErrRendezvous, listenAddr, err)
	}
	addrs, err := b.Exchange.Exchange(ctx, listenAddr)
	if err == nil && len(addrs) != b.Size {
		err = fmt.Errorf("%w: %d addresses for %d ranks", ErrRendezvous, len(addrs), b.Size)
	}
	if err != nil {
		b.Exchange.Close()
		return nil, fmt.Errorf("rank %d (%s): %w", b.Rank, b.Source, err)
	}
	r := &Registration{Addrs: addrs, ex: b.Exchange, lost: make(chan struct{}), readDone: make(chan struct{}),
		stopCtx: func() bool { return false }}
	close(r.readDone)
	return r, nil
}
