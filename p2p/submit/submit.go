// Package submit runs a job on the peers of the peer-to-peer middleware
// (P2P-MPI §3, what `cohort run --hosts` does): it asks the supernodes for
// the live peer daemons, ranks them by the latency of an application-level
// ping, reserves slots with overbooking (more hosts than needed are asked;
// the tokens the placement does not use are released), places the ranks
// with the spread or concentrate strategy (package p2p/place), stages the
// program (SHA-256 checked by each daemon), starts a rendezvous, launches
// each host's ranks and forwards their output. The ranks then exchange the
// rank table through the rendezvous and run their detectors and membership
// over the hosts, exactly as a local job does. A process that the others
// excluded from the job and that still runs once they have all ended is
// stopped by its daemon, as the local launcher stops one (excluded.go).
//
// A host whose launch stream stays silent for Config.Silence (its daemon
// sends a keep-alive every second) is lost: its ranks are reported so, as
// a killed local rank is, and the job goes on with the others (a cohort
// program sees their failure through its detectors). Cancelling the
// context closes every stream, and the daemons kill the job's processes.
package submit

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/daemon"
	"github.com/cohort-mp/cohort/p2p/place"
	"github.com/cohort-mp/cohort/p2p/stage"
	"github.com/cohort-mp/cohort/p2p/supernode"
)

// Config describes a job to run on the peers.
type Config struct {
	// N is the number of ranks.
	N int
	// Replicas (0 or 1: none) runs each rank as this many processes
	// (transparent replication, package comm): N·Replicas processes,
	// process j·N + r being replica j of rank r, replicas of a rank on
	// distinct hosts when there are enough (Log says when there are not).
	// A rank succeeds when one of its replicas exits with status 0; a lost
	// replica is logged; the output of a rank is written once (the first
	// replica to reach each line writes it).
	Replicas int
	// Spares, if positive, starts that many more processes, N to
	// N+Spares−1, that hold no rank at first and take the rank of a
	// process that fails (launch.Bootstrap.Spares; the program takes
	// them through package resil). The strategy places the N+Spares
	// processes in order, so that spread puts the spares on the hosts
	// that hold the fewest ranks; Log says when one host holds every
	// spare and ranks besides (its loss leaves no spare for its ranks).
	// A spare's output lines start with its process number with Prefix.
	// A process lost with its host counts as replaced: the job succeeds
	// when every process not lost exits with status 0. A process that
	// ends before it registers at the rendezvous, or whose host is lost
	// by then, does not fail the start: the job starts without it
	// (launch.Rendezvous.Excuse) and a spare takes its rank. Spares and
	// Replicas > 1 do not go together.
	Spares int
	// Respawn, if positive (it needs Spares), starts again as a newcomer
	// a process that a signal ends, or that is lost with its host, once
	// the job has started: on its host while that host's daemon is
	// reachable, else on another host of the job with a free slot, by
	// Strategy (respawn.go). Each process of the start comes back at
	// most Respawn times, counting its restarts' deaths, and the job at
	// most launch.MaxNewcomers times; Log says each restart, refusal and
	// failure. Its restarts are processes N+Spares on, after the others
	// in Result.Exits.
	Respawn int
	// Strategy places them (spread or concentrate).
	Strategy place.Strategy
	// Supernodes are NAME@HOST:PORT or HOST:PORT (see daemon.ParseSupernode).
	Supernodes []string
	// Creds are the submitter's credentials.
	Creds *ca.Credentials
	// Program is a local executable, staged to every host used; Args are
	// passed to every rank.
	Program string
	Args    []string
	// Env holds extra environment entries ("NAME=value", no NUL byte)
	// given to every rank. A rank's environment is what its daemon gives
	// (PATH, LANG, TZ, HOME, TMPDIR: nothing of the submitter's), then
	// Env, then the rank's bootstrap variables, which win over an entry of
	// the same name (the last of a name counts), as with package launch.
	Env []string
	// Encrypt runs the ranks' connections over TLS 1.3 with a certificate
	// made for the job (launch.NewJobTLS); its key travels to the daemons
	// inside their TLS and reaches the ranks in their environment.
	Encrypt bool
	// Fanout and Detector are the job's membership settings (0, "": the
	// defaults).
	Fanout   int
	Detector string
	// Stdout and Stderr receive the ranks' output, line by line ("[rank] "
	// first with Prefix); nil discards it.
	Stdout, Stderr io.Writer
	Prefix         bool
	// Log, if not nil, receives progress lines: the ranked hosts, the
	// placement, the hosts lost.
	Log func(format string, args ...any)
	// Silence is how long a launch stream may stay silent before its host
	// is taken as lost (default 5 s).
	Silence time.Duration
	// PingTimeout bounds a peer's latency measurement (default 3 s).
	PingTimeout time.Duration
	// RendezvousTimeout bounds the wait for every rank to register its
	// address (default 30 s); the ranks are then told the job failed.
	RendezvousTimeout time.Duration
	// DialOutOnly names daemons whose ranks must dial every other rank
	// and wait to be dialled by none (launch.Bootstrap.DialOutOnly): hosts
	// the submitter reaches but the other hosts do not. A daemon
	// registered as dial-out-only is so without being named.
	DialOutOnly []string
}

// Host is a peer that answered: its daemon's name and address, measured
// latency and what it offers.
type Host struct {
	Name, Addr string
	Latency    time.Duration
	Info       daemon.Info
	// DialOutOnly: nobody can dial the host; it is reached through a
	// supernode and its ranks dial out.
	DialOutOnly bool
}

// Exit is how a process ended: replica Replica of rank Rank.
type Exit struct {
	Rank    int
	Replica int
	Host    string
	Code    int
	Signal  string
	// Lost: its host was lost before the rank's end was known.
	Lost bool
	// Err is a daemon's error about this rank's host.
	Err string
	// Of is, for a process started again (Config.Respawn), the process
	// of the job's start it stands for; else the process itself.
	Of int
	// Replaced is the number of the process started again in its place
	// (Config.Respawn), 0 if none.
	Replaced int
	// Idle: a process started again that was stopped because every
	// process of the job's start had ended: the job never needed it.
	Idle bool
	// Excluded: a process that exited with status 0 reported that its
	// views excluded this one from the job (took it for failed) while it
	// lived (excluded.go); its failure (an exit other than status 0) is
	// named so.
	Excluded bool
	// Stopped: Excluded, and still running once every other process had
	// ended; the submitter asked its daemon to stop it.
	Stopped bool
}

// OK says the rank exited with status 0.
func (e Exit) OK() bool { return !e.Lost && e.Err == "" && e.Signal == "" && e.Code == 0 }

// How says how the rank ended, for messages.
func (e Exit) How() string {
	switch {
	case e.Idle:
		return "stopped on " + e.Host + ": the job never needed it"
	case e.Lost:
		return "lost with host " + e.Host
	case e.Excluded:
		return e.howExcluded()
	case e.Err != "":
		return e.Err
	case e.Signal != "":
		return "killed by " + e.Signal + " on " + e.Host
	}
	return fmt.Sprintf("exit status %d on %s", e.Code, e.Host)
}

// Result is what a job did.
type Result struct {
	// Ranked are the hosts that answered, by increasing latency.
	Ranked []Host
	// Placement is where the ranks ran.
	Placement place.Placement
	// Exits, by process (replica·N + rank; with spares, the spares
	// after the ranks, then the processes started again).
	Exits []Exit
}

// ErrFailed: the job ran but a rank did not exit with status 0 (or was
// lost); the error names them.
var ErrFailed = errors.New("ranks failed")

// ErrNoPeers: no supernode answered, or no peer could take the job.
var ErrNoPeers = errors.New("no peers")

func (cfg *Config) check() error {
	switch {
	case cfg.N < 1 || cfg.N > launch.MaxSize:
		return fmt.Errorf("submit: %d ranks, want 1 to %d", cfg.N, launch.MaxSize)
	case cfg.Replicas < 0 || cfg.Replicas > launch.MaxReplicas || cfg.N*max(cfg.Replicas, 1) > launch.MaxSize:
		return fmt.Errorf("submit: %d replicas of %d ranks, want 0 to %d replicas and at most %d processes", cfg.Replicas, cfg.N, launch.MaxReplicas, launch.MaxSize)
	case cfg.Spares < 0 || cfg.N*max(cfg.Replicas, 1)+cfg.Spares > launch.MaxSize:
		return fmt.Errorf("submit: %d spares for %d ranks, want 0 or more and at most %d processes", cfg.Spares, cfg.N, launch.MaxSize)
	case cfg.Spares > 0 && cfg.Replicas > 1:
		return fmt.Errorf("submit: %d spares with %d replicas: spares and replicas do not go together", cfg.Spares, cfg.Replicas)
	case cfg.Respawn < 0 || cfg.Respawn > launch.MaxNewcomers:
		return fmt.Errorf("submit: %d restarts per process, want 0 to %d", cfg.Respawn, launch.MaxNewcomers)
	case cfg.Respawn > 0 && cfg.Spares < 1:
		return errors.New("submit: restarts without spares: a process started again joins as a spare, and only a program that takes spares can use it")
	case cfg.Strategy != place.Spread && cfg.Strategy != place.Concentrate:
		return fmt.Errorf("submit: strategy %v", cfg.Strategy)
	case len(cfg.Supernodes) == 0:
		return errors.New("submit: no supernode given")
	case cfg.Creds == nil:
		return errors.New("submit: no credentials")
	case cfg.Program == "":
		return errors.New("submit: no program")
	}
	for _, s := range cfg.Supernodes {
		if _, _, err := daemon.ParseSupernode(s); err != nil {
			return fmt.Errorf("submit: %w", err)
		}
	}
	for _, kv := range cfg.Env {
		if err := checkEnv(kv); err != nil {
			return err
		}
	}
	if cfg.Silence <= 0 {
		cfg.Silence = 5 * time.Second
	}
	if cfg.RendezvousTimeout <= 0 {
		cfg.RendezvousTimeout = 30 * time.Second
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 3 * time.Second
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	return nil
}

// Peers asks every supernode for its list and merges them; it fails only
// if none answered.
func Peers(ctx context.Context, creds *ca.Credentials, supernodes []string) ([]supernode.Peer, error) {
	peers, _, err := peersVia(ctx, creds, supernodes)
	return peers, err
}

// peersVia is Peers, with the supernode (its specification) that listed
// each dial-out-only peer: the one to reach it through.
func peersVia(ctx context.Context, creds *ca.Credentials, supernodes []string) ([]supernode.Peer, map[string]string, error) {
	lists := make([][]supernode.Peer, len(supernodes))
	errs := make([]error, len(supernodes))
	var wg sync.WaitGroup
	for i, s := range supernodes {
		name, addr, err := daemon.ParseSupernode(s)
		if err != nil {
			errs[i] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := supernode.NewClient(creds, name, addr)
			defer c.Close()
			lists[i], errs[i] = c.Peers(ctx)
		}()
	}
	wg.Wait()
	answered := false
	via := map[string]string{}
	for i, e := range errs {
		answered = answered || e == nil
		for _, p := range lists[i] {
			if _, seen := via[p.Name]; p.DialOutOnly && !seen {
				via[p.Name] = supernodes[i]
			}
		}
	}
	if !answered {
		return nil, nil, fmt.Errorf("%w: no supernode answered: %w", ErrNoPeers, errors.Join(errs...))
	}
	return supernode.Merge(lists...), via, nil
}

// Rank pings every peer (three times; the median counts) and returns those
// that answered, by increasing latency (then name), with one client each.
// A dial-out-only peer is not pinged: Rank has no supernode to reach it
// through.
func Rank(ctx context.Context, creds *ca.Credentials, peers []supernode.Peer, timeout time.Duration) ([]Host, map[string]*daemon.Client) {
	return rank(ctx, creds, peers, nil, timeout)
}

// rank is Rank, reaching each dial-out-only peer through the supernode
// via names for it (specification, see daemon.ParseSupernode). Its
// latency then counts the way through the supernode, as its traffic does.
func rank(ctx context.Context, creds *ca.Credentials, peers []supernode.Peer, via map[string]string, timeout time.Duration) ([]Host, map[string]*daemon.Client) {
	hosts := make([]*Host, len(peers))
	clients := make([]*daemon.Client, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		c := daemon.NewClient(creds, p.Name, p.Addr)
		if p.DialOutOnly {
			name, addr, err := daemon.ParseSupernode(via[p.Name])
			if err != nil {
				continue
			}
			c = daemon.NewClientVia(creds, p.Name, p.Addr, supernode.NewClient(creds, name, addr))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var rtts []time.Duration
			var info daemon.Info
			for range 3 {
				in, rtt, err := c.Ping(pctx)
				if err != nil {
					c.Close()
					return
				}
				info = in
				rtts = append(rtts, rtt)
			}
			slices.Sort(rtts)
			hosts[i] = &Host{Name: p.Name, Addr: p.Addr, Latency: rtts[1], Info: info, DialOutOnly: p.DialOutOnly}
			clients[i] = c
		}()
	}
	wg.Wait()
	var out []Host
	byName := map[string]*daemon.Client{}
	for i, h := range hosts {
		if h != nil {
			out = append(out, *h)
			byName[h.Name] = clients[i]
		}
	}
	slices.SortStableFunc(out, func(a, b Host) int {
		if c := cmp.Compare(a.Latency, b.Latency); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out, byName
}

// grant is a reservation held on a host.
type grant struct {
	host  Host
	token string
	procs int
}

// Run runs the job and returns once every rank has ended or was lost. The
// error wraps ErrFailed if a rank did not exit with status 0.
func Run(ctx context.Context, cfg Config) (Result, error) {
	var res Result
	if err := cfg.check(); err != nil {
		return res, err
	}
	prog, err := os.Open(cfg.Program)
	if err != nil {
		return res, fmt.Errorf("submit: program: %w", err)
	}
	defer prog.Close()
	sum, size, err := digest(prog)
	if err != nil {
		return res, fmt.Errorf("submit: program: %w", err)
	}
	peers, via, err := peersVia(ctx, cfg.Creds, cfg.Supernodes)
	if err != nil {
		return res, err
	}
	if len(peers) == 0 {
		return res, fmt.Errorf("%w: no peer daemon is registered with the supernodes", ErrNoPeers)
	}
	ranked, clients := rank(ctx, cfg.Creds, peers, via, cfg.PingTimeout)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	res.Ranked = ranked
	if len(ranked) < len(peers) {
		cfg.Log("%d of %d peers answered the ping", len(ranked), len(peers))
	}
	for _, h := range ranked {
		how := ""
		if h.DialOutOnly || slices.Contains(cfg.DialOutOnly, h.Name) {
			how = ", dial-out only"
		}
		cfg.Log("host %s (%s%s): latency %v, %d processes per job, %d free job slots", h.Name, h.Addr, how, h.Latency.Round(time.Microsecond), h.Info.ProcsPerJob, h.Info.FreeJobs)
	}
	idb := make([]byte, 6)
	rand.Read(idb)
	jobID := "cohort-" + hex.EncodeToString(idb)

	grants, refusals := reserve(ctx, cfg, jobID, ranked, clients)
	releaseAll := func(gs []grant) {
		for _, g := range gs {
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			clients[g.host.Name].Release(rctx, g.token)
			cancel()
		}
	}
	offered := make([]place.Host, len(grants))
	byName := map[string]grant{}
	for i, g := range grants {
		offered[i] = place.Host{Name: g.host.Name, Latency: g.host.Latency, Capacity: g.procs}
		byName[g.host.Name] = g
	}
	reps := max(cfg.Replicas, 1)
	procs := cfg.N*reps + cfg.Spares
	// With spares the placement's "ranks" are the processes, the
	// spares last, and an output line is a process's (no replica to
	// merge it with).
	placed, outs := cfg.N, cfg.N
	if cfg.Spares > 0 {
		placed, outs = procs, procs
	}
	pl, release, err := place.Plan(offered, placed, reps, cfg.Strategy)
	if err != nil {
		releaseAll(grants)
		if len(refusals) > 0 {
			return res, fmt.Errorf("%w; refused: %s", err, strings.Join(refusals, "; "))
		}
		return res, err
	}
	res.Placement = pl
	var unused []grant
	for _, name := range release {
		unused = append(unused, byName[name])
	}
	releaseAll(unused)
	per := pl.PerHost()
	var desc []string
	for _, h := range pl.Hosts() {
		desc = append(desc, fmt.Sprintf("%s:%d", h, per[h]))
	}
	cfg.Log("placement (%v): %s", cfg.Strategy, strings.Join(desc, " "))
	if len(pl.Shared) > 0 {
		ranks := make([]string, len(pl.Shared))
		for i, r := range pl.Shared {
			ranks[i] = strconv.Itoa(r)
		}
		cfg.Log("too few hosts to keep the replicas of every rank apart: rank(s) %s have two replicas on one host (its loss takes both)", strings.Join(ranks, ", "))
	}
	if cfg.Spares > 0 {
		logSpares(cfg, pl)
	}
	used := make([]grant, 0, len(per))
	for _, h := range pl.Hosts() {
		used = append(used, byName[h])
	}

	// Stage the program on every host used.
	file := stage.File{Path: filepath.Base(cfg.Program), Size: size, SHA256: sum, Exec: true}
	if err := forEach(used, func(g grant) error {
		f, err := os.Open(cfg.Program)
		if err != nil {
			return err
		}
		defer f.Close()
		return clients[g.host.Name].Stage(ctx, g.token, file, f)
	}); err != nil {
		releaseAll(used)
		return res, fmt.Errorf("submit: staging: %w", err)
	}

	// The rendezvous listens on the address this machine reaches the
	// first host from.
	secret := make([]byte, 32)
	rand.Read(secret)
	local, err := localAddrToward(used[0].host.Addr)
	if err != nil {
		releaseAll(used)
		return res, fmt.Errorf("submit: %w", err)
	}
	rz, err := launch.NewRendezvous(launch.RendezvousConfig{JobID: jobID, Secret: secret, Size: procs, Addr: net.JoinHostPort(local, "0")})
	if err != nil {
		releaseAll(used)
		return res, err
	}
	defer rz.Close()
	// A rank that never registers (its host lost, its process dead before
	// it could) would leave the others waiting for the table: give up.
	rzCtx, rzStop := context.WithCancel(ctx)
	defer rzStop()
	go func() {
		select {
		case <-rz.Done():
		case <-rzCtx.Done():
		case <-time.After(cfg.RendezvousTimeout):
			rz.Abort(fmt.Sprintf("not every rank registered within %v (missing %v)", cfg.RendezvousTimeout, rz.Missing()))
		}
	}()

	var certPEM, keyPEM []byte
	if cfg.Encrypt {
		if certPEM, keyPEM, err = launch.NewJobTLS(jobID); err != nil {
			releaseAll(used)
			return res, fmt.Errorf("submit: the job's certificate: %w", err)
		}
	}
	res.Exits = make([]Exit, procs)
	for _, s := range pl.Slots {
		p := s.Replica*cfg.N + s.Rank
		res.Exits[p] = Exit{Rank: s.Rank, Replica: s.Replica, Host: s.Host, Lost: true, Of: p}
	}
	newcomers := 0
	if cfg.Respawn > 0 {
		newcomers = launch.MaxNewcomers
	}
	var outMu sync.Mutex
	lines := make([][2]int, procs+newcomers)  // lines of each process's stdout, stderr
	written := make([][2]int, outs+newcomers) // lines of each rank's streams written
	write := func(p int, line string, stderr bool) {
		w, k := cfg.Stdout, 0
		if stderr {
			w, k = cfg.Stderr, 1
		}
		rank := p % outs
		if p >= procs {
			rank = p - procs + outs // a process started again: its own lines
		}
		outMu.Lock()
		defer outMu.Unlock()
		lines[p][k]++
		if lines[p][k] <= written[rank][k] {
			return // a replica's copy of a line written already
		}
		written[rank][k] = lines[p][k]
		if w == nil {
			return
		}
		if cfg.Prefix {
			fmt.Fprintf(w, "[%d] %s\n", rank, line)
		} else {
			fmt.Fprintln(w, line)
		}
	}
	var exitMu sync.Mutex
	var wg sync.WaitGroup
	// Closing the launch streams stops every process of the job (the
	// restarts left idle, respawn.go); ctx's end is the job's.
	streamCtx, stopStreams := context.WithCancel(ctx)
	defer stopStreams()
	rs := &restarter{cfg: &cfg, ctx: streamCtx, mu: &exitMu, exits: &res.Exits, procs: procs, clients: clients, rz: rz,
		wg: &wg, stop: stopStreams, of: map[int]int{}, startLeft: procs,
		boot: launch.Bootstrap{JobID: jobID, Size: procs, Rendezvous: rz.Addr(), Secret: secret,
			Fanout: cfg.Fanout, Detector: cfg.Detector, TLSCert: certPEM, TLSKey: keyPEM, Spares: cfg.Spares}}
	for _, g := range grants {
		if per[g.host.Name] > 0 {
			rs.hosts = append(rs.hosts, &hostRun{g: g, listen: listenHost(g.host.Addr), up: true, alive: per[g.host.Name],
				dialOut: g.host.DialOutOnly || slices.Contains(cfg.DialOutOnly, g.host.Name)})
		}
	}
	go rs.followExclusions()
	for _, g := range used {
		host, _, _ := net.SplitHostPort(g.host.Addr)
		var lr daemon.LaunchRequest
		lr.Program, lr.Args, lr.Env = file.Path, cfg.Args, cfg.Env
		for _, s := range pl.Slots {
			if s.Host != g.host.Name {
				continue
			}
			p := s.Replica*cfg.N + s.Rank
			boot := launch.Bootstrap{JobID: jobID, Rank: p, Size: procs, Rendezvous: rz.Addr(), Secret: secret,
				Fanout: cfg.Fanout, Detector: cfg.Detector, Listen: host, TLSCert: certPEM, TLSKey: keyPEM, Spares: cfg.Spares,
				DialOutOnly: g.host.DialOutOnly || slices.Contains(cfg.DialOutOnly, g.host.Name)}
			if reps > 1 {
				boot.Replicas = reps
			}
			lr.Ranks = append(lr.Ranks, daemon.LaunchRank{Rank: p, Env: boot.Environ()})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := clients[g.host.Name].Launch(streamCtx, g.token, lr, cfg.Silence, func(ev daemon.Event) {
				switch {
				case ev.Exited:
					exitMu.Lock()
					if ev.Rank >= 0 && ev.Rank < len(res.Exits) && res.Exits[ev.Rank].Host == g.host.Name && res.Exits[ev.Rank].Lost {
						x := &res.Exits[ev.Rank]
						*x = Exit{Rank: x.Rank, Replica: x.Replica, Host: g.host.Name, Code: ev.Code, Signal: ev.Signal, Of: x.Of, Idle: x.Idle && ev.Signal != "",
							Excluded: x.Excluded, Stopped: x.Stopped}
						if cfg.Spares > 0 && ev.Rank < procs {
							// Ended before it registered: the job starts
							// without it, a spare takes its rank.
							rz.Excuse(ev.Rank)
						}
						rs.exitedLocked(ev.Rank, *x)
						rs.stopExcludedLocked()
					}
					exitMu.Unlock()
				case ev.Error != "":
					cfg.Log("host %s: %s", g.host.Name, ev.Error)
				case !ev.Alive && ev.Rank >= 0 && ev.Rank < procs+newcomers:
					write(ev.Rank, ev.Out, ev.Stderr)
				}
			})
			exitMu.Lock()
			rs.host(g.host.Name).up = false
			exitMu.Unlock()
			if err != nil && streamCtx.Err() == nil {
				cfg.Log("host %s lost: %v", g.host.Name, err)
				if cfg.Spares > 0 {
					// Its processes that never registered: the job starts
					// without them.
					for _, p := range lr.Ranks {
						rz.Excuse(p.Rank)
					}
				}
				exitMu.Lock()
				if !errors.Is(err, daemon.ErrSilent) {
					for i := range res.Exits {
						if res.Exits[i].Host == g.host.Name && res.Exits[i].Lost {
							res.Exits[i].Err = err.Error()
						}
					}
				}
				rs.hostLostLocked(g.host.Name)
				rs.stopExcludedLocked()
				exitMu.Unlock()
			}
		}()
	}
	wg.Wait()
	exitMu.Lock()
	rs.over = true // an idle stop past this point changes nothing
	rs.markExcludedLocked()
	exitMu.Unlock()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if cfg.Spares > 0 {
		return res, spareOutcome(cfg, res.Exits, procs, rz.Joined())
	}
	// A rank succeeded if one of its replicas did.
	okRank := make([]bool, cfg.N)
	for _, e := range res.Exits {
		okRank[e.Rank] = okRank[e.Rank] || e.OK()
	}
	var bad []string
	for _, e := range res.Exits {
		switch {
		case e.OK():
		case okRank[e.Rank]:
			cfg.Log("replica %d of rank %d lost (%s); the rank lived on", e.Replica, e.Rank, e.How())
		case e.Replica == 0:
			bad = append(bad, fmt.Sprintf("rank %d (%s)", e.Rank, e.How()))
		}
	}
	if len(bad) > 0 {
		return res, fmt.Errorf("%w: %d of %d: %s", ErrFailed, len(bad), cfg.N, strings.Join(bad, ", "))
	}
	return res, nil
}

// logSpares says where the spares run, and warns when one host holds
// every spare and ranks too: its loss takes ranks and leaves no spare to
// take them.
func logSpares(cfg Config, pl place.Placement) {
	ranksOn := map[string]bool{}
	var where []string
	spareHosts := map[string]bool{}
	for _, s := range pl.Slots {
		if s.Rank < cfg.N {
			ranksOn[s.Host] = true
			continue
		}
		where = append(where, fmt.Sprintf("%d@%s", s.Rank, s.Host))
		spareHosts[s.Host] = true
	}
	cfg.Log("spares (process@host): %s", strings.Join(where, " "))
	if len(spareHosts) == 1 {
		for h := range spareHosts {
			if ranksOn[h] {
				cfg.Log("every spare is on %s, which holds ranks too: its loss leaves no spare to take them", h)
			}
		}
	}
}

// spareOutcome judges a job with spares: a process lost with its host
// was replaced (a spare took its rank, or it was an idle spare), and,
// with restarts (Config.Respawn), so was a process that a signal ended
// (whether or not a restart could start), a restart that ended before
// it joined the job (it held nothing) and a restart stopped as idle; the
// job succeeded if
// every other process exited with status 0. A process that failed
// otherwise (the program's verdict: no spare left, a state lost) fails
// the job, and so does one the submitter stopped as excluded (it ran on
// after the others had ended).
func spareOutcome(cfg Config, exits []Exit, procs int, joined []int) error {
	var bad []string
	ended := 0
	for p, e := range exits {
		who := fmt.Sprintf("process %d", p)
		if e.Of != p {
			who = fmt.Sprintf("process %d (process %d started again)", p, e.Of)
		}
		switch {
		case e.OK():
			ended++
		case e.Idle:
			cfg.Log("%s stopped: the job never needed it", who)
		case e.Lost:
			cfg.Log("%s lost (%s); the job went on without it", who, e.How())
		case e.Excluded && e.Stopped:
			// Excluded alone is no verdict: the others exclude every
			// process that died, and a signal's end is tolerated below.
			bad = append(bad, fmt.Sprintf("%s (%s)", who, e.How()))
		case e.Signal != "" && cfg.Respawn > 0 && e.Replaced > 0:
			cfg.Log("%s %s; started again as process %d", who, e.How(), e.Replaced)
		case e.Signal != "" && cfg.Respawn > 0:
			cfg.Log("%s %s; the job went on without it", who, e.How())
		case p >= procs && e.Host == "":
			// Never started: said when every host refused it.
		case p >= procs && !slices.Contains(joined, p):
			cfg.Log("%s ended before it joined (%s); the job went on without it", who, e.How())
		default:
			bad = append(bad, fmt.Sprintf("%s (%s)", who, e.How()))
		}
	}
	if len(bad) == 0 && ended == 0 {
		return fmt.Errorf("%w: every process of the job was lost", ErrFailed)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %d of %d processes: %s", ErrFailed, len(bad), len(exits), strings.Join(bad, ", "))
	}
	return nil
}

// reserve asks the ranked hosts for slots, a batch at a time
// (overbooking: place.Overbook hosts for what is still missing), until the
// grants cover N or no host is left; it returns the grants (ranked) and
// every refusal's reason.
func reserve(ctx context.Context, cfg Config, jobID string, ranked []Host, clients map[string]*daemon.Client) ([]grant, []string) {
	var grants []grant
	var refusals []string
	// With replicas, a host counts for at most N processes (one replica of
	// each rank) until the grants cover the job that way, so that the
	// replicas of a rank can go to distinct hosts; when the hosts run out
	// first, place.Place uses all their slots and says which ranks share.
	need := cfg.N*max(cfg.Replicas, 1) + cfg.Spares
	counts := need
	if cfg.Replicas > 1 {
		counts = cfg.N
	}
	next, have := 0, 0
	for have < need && next < len(ranked) {
		perHost := 1
		for _, h := range ranked[next:] {
			perHost = max(perHost, min(h.Info.ProcsPerJob, counts))
		}
		k := min(place.Overbook(need-have, perHost), len(ranked)-next)
		batch := ranked[next : next+k]
		next += k
		got := make([]*grant, len(batch))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, h := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				procs := max(1, min(h.Info.ProcsPerJob, need))
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				rep, err := clients[h.Name].Reserve(rctx, jobID, procs)
				if err != nil {
					errs[i] = err
					return
				}
				got[i] = &grant{host: h, token: rep.Token, procs: rep.Procs}
			}()
		}
		wg.Wait()
		for i, g := range got {
			if g != nil {
				grants = append(grants, *g)
				have += min(g.procs, counts)
			} else {
				refusals = append(refusals, errs[i].Error())
				cfg.Log("host %s refused: %v", batch[i].Name, errs[i])
			}
		}
	}
	return grants, refusals
}

// checkEnv says whether kv is a NAME=value environment entry (a
// non-empty name without '=', no NUL byte anywhere).
func checkEnv(kv string) error {
	name, _, ok := strings.Cut(kv, "=")
	switch {
	case !ok || name == "":
		return fmt.Errorf("submit: environment entry %q: want NAME=value", kv)
	case strings.ContainsRune(kv, 0):
		return fmt.Errorf("submit: environment entry %q: contains a NUL byte", kv)
	}
	return nil
}

// forEach runs f for every grant at once and joins the errors.
func forEach(gs []grant, f func(grant) error) error {
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(g) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// digest returns the SHA-256 (hex) and size of r's contents.
func digest(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// localAddrToward returns this machine's address on the route to addr
// (no packet is sent: a UDP socket is only connected).
func localAddrToward(addr string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", fmt.Errorf("no route to %s: %w", addr, err)
	}
	defer c.Close()
	host, _, err := net.SplitHostPort(c.LocalAddr().String())
	return host, err
}
