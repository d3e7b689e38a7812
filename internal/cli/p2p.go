package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/daemon"
	"github.com/cohort-mp/cohort/p2p/place"
	"github.com/cohort-mp/cohort/p2p/submit"
	"github.com/cohort-mp/cohort/p2p/supernode"
)

func init() {
	register(&command{
		name:     "boot",
		synopsis: "--config FILE [--dial-out-only] [--log-format text|json]",
		summary:  "run the peer daemon: register with supernodes, reserve, stage and launch jobs",
		help: `Boot runs this machine's peer daemon. It registers with the supernodes of its
configuration and keeps their merged list of peers (with the latency of an
application-level ping to each), and serves submitters over mutual TLS:
reservations (at most 'jobs' jobs and 'procs_per_job' processes per job,
from the submitters in 'allowed'), staging of a job's files (SHA-256 checked,
size-limited, never outside the job's directory) and the launch of its
processes, whose output goes back to the submitter. A job's processes are
stopped when its submitter goes away. It logs each event once on standard
error, a line of plain text (key=value) or, with --log-format json, a JSON
object; SIGTERM, Ctrl-C or 'cohort halt' stop it gracefully (running jobs
are told, their processes stopped).

Jobs are confined, and the log says at start exactly how. Every process of a
job runs with no_new_privs, no core files and files no larger than
max_job_mb, in the job's cgroup when the daemon may make one (cgroup v2 when
the unified hierarchy offers pids, with memory from it or from v1's; else the
v1 freezer, memory and pids hierarchies): its memory and processes are
bounded by job_memory_mb and job_pids, and stopping the job kills every
process it made, one detached with setsid too. Each running job gets cores
of its own while enough are free (COHORT_CPUS tells its ranks), apart from
other daemons' jobs on the same host too: the daemons record the cores their
jobs hold in cores_dir. Run as root, the daemon gives each job a uid of its own from
job_uids: a job cannot read the daemon's key, another job's files or
environment, nor signal or trace another job's processes. Run as another
user, the daemon has no uids to give: jobs run as that user, and may read its
key and other jobs' files and environments and signal their processes; only
the cgroup (if the user may write one, a delegated cgroup) bounds them.
Without a cgroup, a job's memory and processes are unbounded and, without a job uid either, a
process it detaches outlives it.

The configuration is a TOML file; every key but name has a default:

  name          = "node1"               # the daemon's certificate: NAME.crt, NAME.key
  listen        = ":7950"
  advertise     = "10.0.0.5:7950"       # the address the others dial
  supernodes    = ["sn1@10.0.0.2:7940"] # NAME@ADDR, or HOST:PORT (its certificate must name HOST)
  ca            = "~/.cohort/ca/ca.crt"
  certs         = "~/.cohort/ca"
  crl           = ""                    # the CA's revocation list; empty: ca.crl beside ca, if there
  work_dir      = "~/.cohort/work"      # created 0700 (0711 with job uids); refused if a link, another's,
                                        # or open to others; root: "/var/lib/cohort/work"
  jobs          = 1                     # J
  procs_per_job = 1                     # P
  allowed       = ["alice"]             # who may submit; empty admits no one
  allow_all     = false                 # true: every member of the cluster may submit
  admins        = []                    # who may halt it and see every job, besides itself
  hold          = "30s"                 # an unconfirmed reservation's life
  max_file_mb   = 256
  max_job_mb    = 1024
  refresh       = "10s"                 # registration and peer-list refresh
  ping          = "10s"                 # latency measurement
  read_header_timeout = "5s"            # HTTP: a request's head
  read_timeout  = "30s"                 # HTTP: the longest pause in a request's body
  write_timeout = "30s"                 # HTTP: an answer
  idle_timeout  = "60s"                 # HTTP: an idle kept-alive connection
  metrics       = "127.0.0.1:9150"      # Prometheus /metrics (plain HTTP); empty: none
  job_memory_mb = 4096                  # a job's memory, its processes together
  job_pids      = 1024                  # a job's processes and threads together
  job_cores     = true                  # each running job gets cores of its own (false: all share them)
  cores_dir     = ""                    # the host's registry of the cores jobs hold, shared by its daemons;
                                        # empty: /run/cohort if the daemon may write it (root), else
                                        # $TMPDIR/cohort-cores-UID; "none": apart from its own jobs only
  job_uids      = "61000-61999"         # root only: a uid per running job, none an account's;
                                        # "none": jobs run as root
  dial_out_only = false                 # true: nobody can dial this host (see below)

A host behind a NAT or a firewall that drops inbound connections sets
dial_out_only = true (or boots with --dial-out-only): the daemon keeps a
connection open to each supernode and submitters reach it through them (their
TLS with the daemon runs end to end inside), and the ranks it starts dial
every other rank and keep those connections. Ranks on two such hosts reach
each other through a rank that both reach.

Examples:
  cohort boot --config /etc/cohort/daemon.toml`,
		run: runBoot,
	})
	for _, c := range []struct{ name, summary, help string }{
		{"peers", "list the peers a daemon knows, with their latencies", `Peers asks a daemon for its cached list of peers and the round trip it
last measured to each.`},
		{"ps", "list the jobs and processes on a daemon", `Ps asks a daemon for its reservations and the processes of its running jobs.`},
		{"halt", "stop a daemon (its running jobs are told and stopped)", `Halt asks a daemon to shut down. Only the daemon's own certificate and the
names in its 'admins' may.`},
	} {
		register(&command{
			name:     c.name,
			synopsis: "--daemon NAME@HOST:PORT [--via [SN@]HOST:PORT] [--name NAME] [--ca FILE] [--certs DIR]",
			summary:  c.summary,
			help: c.help + `

--name is the certificate this command presents (NAME.crt and NAME.key in
--certs); it defaults to $USER, else the current user's login name, else
the host name. A daemon nobody can dial (dial_out_only) is reached through
a supernode it is registered with: --via names it (as in its supernodes).

Example:
  cohort ` + c.name + ` --daemon node1@10.0.0.5:7950 --name alice`,
			run: runDaemonQuery,
		})
	}
}

// credFlags are the flags naming a member's credentials.
type credFlags struct{ name, caFile, certs *string }

func addCredFlags(fs *flag.FlagSet, defName string) credFlags {
	home, _ := os.UserHomeDir()
	return credFlags{
		name:   fs.String("name", defName, "the `name` of the certificate to present (NAME.crt, NAME.key)"),
		caFile: fs.String("ca", filepath.Join(home, ".cohort", "ca", "ca.crt"), "the cluster CA's certificate `file`"),
		certs:  fs.String("certs", filepath.Join(home, ".cohort", "ca"), "`directory` holding NAME.crt and NAME.key"),
	}
}

func (f credFlags) load() (*ca.Credentials, error) {
	if *f.name == "" {
		return nil, usagef("--name is required (the name of your certificate)")
	}
	creds, err := loadCreds(*f.caFile, *f.certs, *f.name)
	if err != nil {
		return nil, err
	}
	// A submitter refuses a revoked daemon or supernode as they refuse a
	// revoked submitter, when the CA's list is beside its ca.crt.
	if err := creds.WatchRevocations("", nil); err != nil {
		return nil, err
	}
	return creds, nil
}

func runBoot(ctx context.Context, c *call) error {
	fs := c.newFlags()
	path := fs.String("config", "", "the daemon's TOML configuration `file`")
	dialOutOnly := fs.Bool("dial-out-only", false, "nobody can dial this host (NAT, firewall): as dial_out_only = true")
	logFormat := addLogFormatFlag(fs)
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	if *path == "" {
		return usagef("--config is required")
	}
	log, err := newLogger(c.stderr, *logFormat)
	if err != nil {
		return err
	}
	cfg, err := daemon.Load(*path)
	if err != nil {
		return err
	}
	cfg.DialOutOnly = cfg.DialOutOnly || *dialOutOnly
	if err := checkCredFiles(cfg.CA, cfg.Certs, cfg.Name); err != nil {
		return err
	}
	d, err := daemon.New(cfg, log)
	if err != nil {
		return err
	}
	// The daemon logs that it serves, with its address: said once, there.
	return d.Serve(ctx, nil)
}

// addLogFormatFlag adds --log-format, the format of a server's logs.
func addLogFormatFlag(fs *flag.FlagSet) *string {
	return fs.String("log-format", "text", "`format` of the logs on standard error: text (key=value) or json")
}

// newLogger returns the logger of a server, writing each event once to w
// in format ("text" or "json").
func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

func runDaemonQuery(ctx context.Context, c *call) error {
	fs := c.newFlags()
	target := fs.String("daemon", "", "the daemon: `NAME@HOST:PORT` (NAME: its certificate's name)")
	via := fs.String("via", "", "reach a daemon nobody can dial through this supernode: `[NAME@]HOST:PORT`")
	creds := addCredFlags(fs, defaultName())
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	name, addr, found := strings.Cut(*target, "@")
	if !found || name == "" {
		return usagef("--daemon %q: want NAME@HOST:PORT", *target)
	}
	var snName, snAddr string
	if *via != "" {
		var err error
		if snName, snAddr, err = daemon.ParseSupernode(*via); err != nil {
			return usagef("--via: %v", err)
		}
	}
	cr, err := creds.load()
	if err != nil {
		return err
	}
	cl := daemon.NewClient(cr, name, addr)
	if *via != "" {
		sn := supernode.NewClient(cr, snName, snAddr)
		defer sn.Close()
		cl = daemon.NewClientVia(cr, name, addr, sn)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch c.cmd.name {
	case "peers":
		peers, err := cl.Peers(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "NAME\tADDRESS\tLATENCY")
		for _, p := range peers {
			lat := "-"
			switch {
			case p.Name == name:
				lat = "(this daemon)"
			case p.DialOutOnly:
				lat = "(dial-out only: reached through a supernode)"
			case p.RTTMicros > 0:
				lat = (time.Duration(p.RTTMicros) * time.Microsecond).String()
			case p.RTTMicros < 0:
				lat = "unreachable"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.Addr, lat)
		}
	case "ps":
		jobs, err := cl.PS(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "JOB\tSUBMITTER\tPROCS\tSTATE\tRANK\tPID\tPROCESS")
		for _, j := range jobs {
			state := "reserved"
			if j.Confirmed {
				state = "running"
			}
			if len(j.Ranks) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t-\t-\t-\n", j.Job, j.Submitter, j.Procs, state)
			}
			for _, p := range j.Ranks {
				ps := "running"
				if !p.Running {
					ps = p.Exit
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\n", j.Job, j.Submitter, j.Procs, state, p.Rank, p.PID, ps)
			}
		}
	case "halt":
		if err := cl.Halt(ctx); err != nil {
			return err
		}
		fmt.Fprintf(tw, "daemon %s is shutting down\n", name)
	}
	return nil
}

// hostsFlags are cohort run's flags for a job on the peers.
type hostsFlags struct {
	hosts, alloc, dialOutOnly *string
	creds                     credFlags
}

func addHostsFlags(fs *flag.FlagSet) hostsFlags {
	return hostsFlags{
		hosts:       fs.String("hosts", "", "run on the peers known to the supernodes: `supernode:[NAME@]HOST:PORT`, comma-separated"),
		alloc:       fs.String("alloc", "spread", "with --hosts, the allocation `strategy`: spread or concentrate"),
		dialOutOnly: fs.String("dial-out-only", "", "with --hosts, the daemons (`NAME,...`) whose ranks the other hosts cannot dial: they dial out"),
		creds:       addCredFlags(fs, defaultName()),
	}
}

// parseDialOutOnly turns --dial-out-only into daemon names.
func parseDialOutOnly(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, "@: ") {
			return nil, usagef("--dial-out-only %q: want daemon names (their certificates' names), comma-separated", s)
		}
		out = append(out, name)
	}
	return out, nil
}

// parseHosts turns --hosts into supernode specifications.
func parseHosts(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		spec, ok := strings.CutPrefix(strings.TrimSpace(part), "supernode:")
		if !ok {
			return nil, usagef("--hosts %q: want supernode:[NAME@]HOST:PORT (comma-separated)", part)
		}
		if _, _, err := daemon.ParseSupernode(spec); err != nil {
			return nil, usagef("--hosts: %v", err)
		}
		out = append(out, spec)
	}
	return out, nil
}

// hostsJob carries the job that cohort run's flags describe over to the
// peers' submission: every setting of the job itself, the switches
// included, so that a flag means the same on one machine and across hosts.
func hostsJob(cfg launch.Config) submit.Config {
	return submit.Config{
		N: cfg.N, Replicas: cfg.Replicas, Spares: cfg.Spares, Respawn: cfg.Respawn, Program: cfg.Program, Args: cfg.Args, Env: cfg.Env,
		Fanout: cfg.Fanout, Detector: cfg.Detector, Prefix: cfg.Prefix, Encrypt: cfg.Encrypt,
	}
}

// runOnHosts runs cohort run's job on the peers.
func runOnHosts(ctx context.Context, c *call, hf hostsFlags, cfg launch.Config) error {
	sns, err := parseHosts(*hf.hosts)
	if err != nil {
		return err
	}
	strategy, err := place.ParseStrategy(*hf.alloc)
	if err != nil {
		return usagef("--alloc %q: want spread or concentrate", *hf.alloc)
	}
	dialOutOnly, err := parseDialOutOnly(*hf.dialOutOnly)
	if err != nil {
		return err
	}
	creds, err := hf.creds.load()
	if err != nil {
		return err
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	sc := hostsJob(cfg)
	sc.Strategy, sc.Supernodes, sc.Creds, sc.DialOutOnly = strategy, sns, creds, dialOutOnly
	sc.Stdout, sc.Stderr = c.stdout, c.stderr
	sc.Log = func(format string, args ...any) { fmt.Fprintf(c.stderr, "cohort run: "+format+"\n", args...) }
	_, err = submit.Run(ctx, sc)
	if errors.Is(err, submit.ErrFailed) {
		return errors.New(strings.TrimPrefix(err.Error(), "ranks failed: "))
	}
	return err
}
