package comm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	groupstack "github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/transport/tcp"
)

// Init joins the job this process was started in by `cohort run` or by
// SLURM's `srun --mpi=pmi2`: it reads its bootstrap from the environment
// (package launch, [launch.Detect]: job id, rank, size, secret, and the
// launcher's rendezvous address or SLURM's PMI-2 server), listens with
// transport/tcp on 127.0.0.1 (a free port; under SLURM on several nodes, an
// address of this node the others reach; ranks on one host connect over
// Unix sockets unless COHORT_UNIX=off, see unixEnv), registers its address with the
// launcher (or puts it in PMI's key-value space), learns every rank's
// address, and starts its node (failure detector and
// membership, package host) and matching engine. ctx bounds the
// rendezvous. A program started by hand gets an error wrapping
// launch.ErrNotLaunched (run it with `cohort run -n N`). If the launcher
// asked for the node's event stream (launch.EnvEvents), Init writes it to
// that file.
//
// Init sets GOMAXPROCS to this host's CPUs divided by the ranks it runs
// (at least 1), unless the GOMAXPROCS environment variable is set: see
// procs.go. When this host runs from 2 ranks to as many as it has CPUs,
// Init binds the process to its share of them, as Open MPI does, unless
// COHORT_BIND=off: see bind.go.
//
// Call [Session.Finalize] before the process exits.
func Init(ctx context.Context, opts ...Option) (*Session, error) {
	boot, err := launch.Detect(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	if opts, err = eventsFromEnv(os.Getenv, opts); err != nil {
		return nil, err
	}
	bind, err := parseBind(os.Getenv(bindEnv))
	if err != nil {
		return nil, err
	}
	cpus, err := parseCPUs(os.Getenv(cpusEnv))
	if err != nil {
		return nil, err
	}
	links, err := linkNoticesFromEnv(os.Getenv, os.Stderr)
	if err != nil {
		return nil, err
	}
	opts = append(opts, func(o *options) { o.links = links })
	s, err := initBootstrap(ctx, boot, opts...)
	if err == nil {
		s.wholeProcess = true
		shareCPUs(s.addrs, boot.Rank)
		if bind {
			bindCPUs(s.addrs, boot.Rank, cpus)
		}
	}
	return s, err
}

// initBootstrap joins the job described by boot (Init without the
// environment: tests start several ranks in one process this way).
func initBootstrap(ctx context.Context, boot launch.Bootstrap, opts ...Option) (*Session, error) {
	o := options{fanout: boot.Fanout, detector: boot.Detector}
	for _, opt := range opts {
		opt(&o)
	}
	o.spares = boot.Spares
	if boot.IsSpare() && (boot.Spares > 0 || boot.Newcomer) && !o.allowSpares {
		return nil, ErrSpare
	}
	det, err := detectorOf(o.detector)
	if err != nil {
		return nil, err
	}
	if _, _, err := o.flowLimits(); err != nil {
		return nil, err
	}
	tcfg := tcp.DefaultConfig()
	tcfg.Node = core.NodeID(boot.Rank)
	tcfg.ListenAddr = boot.ListenAddr()
	tcfg.JobID = boot.JobID
	tcfg.Secret = boot.Secret
	tcfg.Logger = o.logger
	tcfg.DialOutOnly = boot.DialOutOnly
	if tcfg.NoUnix, err = parseOff(unixEnv, os.Getenv(unixEnv)); err != nil {
		return nil, err
	}
	if tcfg.NoShm, err = parseOff(shmEnv, os.Getenv(shmEnv)); err != nil {
		return nil, err
	}
	if tcfg.Integrity, err = tcp.ParseIntegrity(os.Getenv(integrityEnv)); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadArg, integrityEnv, err)
	}
	tcfg.ShmInProcess = o.shmInProcess
	if o.queueLen > 0 {
		tcfg.QueueLen = o.queueLen
	}
	tcfg.SocketBuffer = o.sockBuf
	if tcfg.TLS, err = boot.TLSConfig(); err != nil {
		return nil, err
	}
	tr, err := tcp.Listen(tcfg)
	if err != nil {
		return nil, fmt.Errorf("comm: %w", err)
	}
	reg, err := boot.Register(ctx, tr.Addr())
	if err != nil {
		tr.Close()
		return nil, err
	}
	if want := tableLen(boot); len(reg.Addrs) != want {
		reg.Close()
		tr.Close()
		return nil, fmt.Errorf("comm: the launcher sent %d addresses for %d processes", len(reg.Addrs), want)
	}
	local := localRanks(reg.Addrs, boot.Rank)
	rings := !tcfg.NoShm && !tcfg.NoUnix && tcfg.TLS == nil
	poll, err := parsePoll(os.Getenv(pollEnv), runtime.NumCPU(), pollingRanks(reg.Addrs, boot.Rank, boot.Replicas, rings))
	if err == nil {
		err = tr.SetSpin(poll)
	}
	if err != nil {
		reg.Close()
		tr.Close()
		return nil, err
	}
	ids := make([]core.NodeID, boot.Size)
	for r := range ids {
		ids[r] = core.NodeID(r)
	}
	for r, addr := range reg.Addrs {
		if r != boot.Rank && addr != "" && !slices.Contains(reg.Gone, r) {
			tr.SetPeer(core.NodeID(r), addr)
		}
	}
	// With replicas, the replication layer sits above the membership and
	// the session is the logical rank's (see replicated.go).
	var rep *replicated
	var layers []core.Machine
	rank, size, _ := boot.Logical()
	if boot.Replicas > 1 {
		layout := replica.Layout{Ranks: size, Replicas: boot.Replicas}
		rcfg := replica.DefaultConfig(layout)
		rcfg.KeepReleased = true // replicaSend reuses the buffers
		if o.maxBackup > 0 {
			rcfg.MaxBackup = o.maxBackup
		}
		l, err := replica.New(rcfg)
		if err != nil {
			reg.Close()
			tr.Close()
			return nil, fmt.Errorf("comm: %w", err)
		}
		rep = newReplicated(layout, core.NodeID(boot.Rank), l)
		layers = []core.Machine{rep.machine()}
	}
	stack, err := newStackJoin(core.NodeID(boot.Rank), ids, contactsOf(boot, reg), o, det, layers...)
	if err != nil {
		reg.Close()
		tr.Close()
		return nil, err
	}
	codec, err := groupstack.NewCodec()
	if err == nil && rep != nil {
		err = replica.RegisterCodecs(codec)
	}
	if err != nil {
		reg.Close()
		tr.Close()
		return nil, err
	}
	s := newSessionAs(tr, core.NodeID(rank), size, o)
	s.rep = rep
	if o.links != nil {
		noun := "rank"
		if rep != nil {
			noun = "process"
		}
		s.links = &linkNotices{w: o.links, self: tr.Self(), noun: noun}
	}
	if rep != nil {
		rep.bind(s, codec)
		rep.pollTime = poll
	}
	s.addrs = reg.Addrs
	if rep == nil {
		s.prog, s.progTime = tr, poll
		s.collPoll = collPollFor(runtime.NumCPU(), local)
		// The collectives share memory where the connections of one
		// host do: not over loopback TCP, which stands for a network
		// (COHORT_UNIX=off), nor under TLS (no ring either).
		if !boot.Newcomer {
			// A newcomer's communicators all hold it, a process no
			// member's table numbers a host for: they run their
			// collectives without shared memory, and so must it.
			s.collHost = hostsOf(reg.Addrs)
		}
		s.collNoShm = tcfg.NoShm || tcfg.NoUnix || tcfg.TLS != nil
	}
	s.onFinal = func() {
		tr.Close()
		s.reportExcluded(reg)
		reg.Close()
	}
	reg.SetOnJoin(func(p int, addr string) { s.joined(p, addr) })
	if err := s.run(stack, codec, o, o.events); err != nil {
		reg.Close()
		tr.Close()
		return nil, err
	}
	if rep != nil {
		go rep.run(s)
	}
	return s, nil
}

// unixEnv names the environment variable Init reads to choose how ranks on
// one host connect: "on" (the default, also when unset) over transport/tcp's
// same-host Unix sockets, "off" over loopback TCP, as ranks on different
// hosts do (tcp.Config.NoUnix). Benchmarks compare the two (`cohort bench
// p2p --impl ours,ours-tcp`).
const unixEnv = "COHORT_UNIX"

// integrityEnv names the environment variable Init reads to choose which
// connections carry their frames in authenticated records
// (tcp.Config.Integrity): "auto" (the default, also when unset: those
// between hosts), "on" (every TCP connection, loopback too: `cohort bench
// p2p --impl ours-tcp,ours-mac` measures the cost on one host) or "off"
// (none; unsafe between hosts, and it takes both ends).
const integrityEnv = "COHORT_INTEGRITY"

// shmEnv names the environment variable Init reads to choose whether ranks
// of one host that connected over a Unix socket move to shared memory:
// "on" (the default, also when unset) or "off" (they stay on the socket;
// tcp.Config.NoShm). It also chooses whether their communicators run
// collectives on a segment of shared memory (coll_shm.go), as does
// COHORT_UNIX=off. `cohort bench p2p --impl ours,ours-unix` compares them.
const shmEnv = "COHORT_SHM"

// readerSpin is how long a rank's connection readers poll (a shared-memory
// ring, or a socket with non-blocking reads) after a message before they
// park, when every rank of the host has a core (readerSpinFor; the
// transport's SetSpin). Messages of the failure detector do not start
// polling, so an idle rank does not poll. A blocking wait polls the
// shared-memory rings itself for as long (spin.go), reading the message
// it waits for on its own goroutine. Measured on 2 cores with 2 ranks
// (cohort bench p2p): 8 B one-way latency over shared memory about 3 µs
// with the readers polling, against 25 µs over the Unix socket without
// polling; about 1 µs with the waits polling too.
const readerSpin = 50 * time.Microsecond

// readerSpinFor returns the polling time of a rank with local ranks on a
// host of cpus cores (pollingRanks: of a replicated job, its logical
// ranks): readerSpin when each has a core, 0 otherwise (a poller would
// take the core another rank needs).
func readerSpinFor(cpus, local int) time.Duration {
	if local > cpus {
		return 0
	}
	return readerSpin
}

// pollEnv names the environment variable Init reads for the polling time
// of the rank's connections: "auto" (the default, also when unset:
// readerSpinFor), "off" or "0", or a duration up to tcp.MaxSpin.
const pollEnv = "COHORT_POLL"

// parsePoll reads COHORT_POLL's value v for a rank with local ranks on a
// host of cpus cores.
func parsePoll(v string, cpus, local int) (time.Duration, error) {
	switch strings.ToLower(v) {
	case "", "auto":
		return readerSpinFor(cpus, local), nil
	case "off", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > tcp.MaxSpin {
		return 0, fmt.Errorf("%w: %s=%q: want auto, off or a duration up to %v", ErrBadArg, pollEnv, v, tcp.MaxSpin)
	}
	return d, nil
}

// parseOff reads an on/off environment variable (name's value v) and
// reports whether it says off. A value it does not know is an error rather
// than a silent default, so that a benchmark never measures another path
// than the one it names.
func parseOff(name, v string) (off bool, err error) {
	switch strings.ToLower(v) {
	case "", "on", "1", "true", "yes":
		return false, nil
	case "off", "0", "false", "no":
		return true, nil
	}
	return false, fmt.Errorf("%w: %s=%q: want on or off", ErrBadArg, name, v)
}
