package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is a daemon's configuration, read from a TOML file by [Load]
// (every key optional but name):
//
//	name          = "node1"             # its certificate's name (NAME.crt, NAME.key)
//	listen        = ":7950"             # where it serves
//	advertise     = "10.0.0.5:7950"     # the address it registers (default: listen, if it names a host)
//	supernodes    = ["sn1@10.0.0.2:7940"]  # NAME@HOST:PORT, or HOST:PORT (its certificate must then be HOST's)
//	ca            = "~/.cohort/ca/ca.crt"
//	certs         = "~/.cohort/ca"      # the directory of NAME.crt and NAME.key
//	work_dir      = "~/.cohort/work"    # jobs' directories are made below it (see below)
//	jobs          = 1                   # J: jobs at once
//	procs_per_job = 1                   # P: processes of one job
//	allowed       = ["alice"]           # submitters allowed (empty: none, unless allow_all)
//	allow_all     = false               # true: every certificate holder of the cluster may submit
//	admins        = []                  # names that may halt it and see every job, besides its own
//	hold          = "30s"               # how long an unconfirmed reservation holds its slots
//	max_file_mb   = 256                 # per staged file
//	max_job_mb    = 1024                # per job
//	refresh       = "10s"               # registration renewal and peer-list refresh
//	ping          = "10s"               # latency measurement of the cached peers
//	metrics       = ""                  # host:port for Prometheus metrics (plain HTTP), empty: none
//	read_header_timeout = "5s"          # a request's headers, from its first byte
//	read_timeout  = "30s"               # a request's body; for a staged file, the longest pause between its bytes
//	write_timeout = "30s"               # an answer (a launch stream: each of its writes, at most 10 s)
//	idle_timeout  = "60s"               # a kept-alive connection between requests
//	crl           = ""                  # the CA's revocation list (default: ca.crl beside ca, if there)
//	job_memory_mb = 4096                # a job's memory, all its processes together
//	job_pids      = 1024                # a job's processes and threads, all together
//	job_uids      = "61000-61999"       # uids for jobs when the daemon runs as root; "none": jobs run as root
//	job_cores     = true                # each running job gets cores of its own (false: all share them)
//	cores_dir     = ""                  # the host's registry of cores held (see below); "none": none
//	dial_out_only = false               # true: nobody can dial this host (NAT, firewall); see below
//
// The work directory holds every job's files, its program and what the
// job writes; [New] makes it (0700) when missing and refuses one that is
// a symbolic link, belongs to another user, or is open to its group or
// others. Its default lies in the daemon's own state directory (~/.cohort,
// beside its keys; /var/lib/cohort for root), not in a directory shared
// with other users.
//
// With job_cores, the daemons of a host keep their jobs' cores apart
// through a registry of the cores each one's running jobs hold: cores_dir,
// a directory every daemon of the host reads before it chooses a job's
// cores and writes as it takes and gives them back. Left out, it is
// /run/cohort when the daemon may make or write it (root), else
// cohort-cores-UID in the temporary directory (os.TempDir): daemons of
// different users see each other's jobs only through a directory named
// in all their configurations, sticky and writable by all as /tmp is.
// "none" keeps a daemon's jobs apart from its own other jobs only. A
// registry that cannot be used never stops a job: the daemon says so in
// its log and chooses as if it were alone. The directory must not be open
// to writes by others unless sticky; it is shared only by daemons that
// see each other's processes (one pid namespace), for a file whose
// daemon is not running is removed.
//
// A daemon with dial_out_only = true runs on a host that accepts no
// inbound connection: it keeps a connection open to each supernode and is
// reached through it (the submitter's TLS runs end to end inside; see
// package p2p/supernode), and the ranks it launches dial every other rank
// and keep those connections (launch.EnvDialOutOnly).
//
// Jobs are confined (see the package doc): job_memory_mb and job_pids are
// the limits of a job's cgroup; job_uids is the range each job running on
// a root daemon takes a uid of its own from, so it has at least jobs uids,
// and none of them may belong to an account of /etc/passwd. With job uids
// the work directory is 0711, traversable but not listable, and every
// directory above it must be traversable by others (o+x): a job reaches
// its own directory by its path, and no other.
type Config struct {
	Name        string   `toml:"name"`
	Listen      string   `toml:"listen"`
	Advertise   string   `toml:"advertise"`
	Supernodes  []string `toml:"supernodes"`
	CA          string   `toml:"ca"`
	Certs       string   `toml:"certs"`
	WorkDir     string   `toml:"work_dir"`
	Jobs        int      `toml:"jobs"`
	ProcsPerJob int      `toml:"procs_per_job"`
	Allowed     []string `toml:"allowed"`
	AllowAll    bool     `toml:"allow_all"`
	Admins      []string `toml:"admins"`
	Hold        Duration `toml:"hold"`
	MaxFileMB   int64    `toml:"max_file_mb"`
	MaxJobMB    int64    `toml:"max_job_mb"`
	Refresh     Duration `toml:"refresh"`
	Ping        Duration `toml:"ping"`
	Metrics     string   `toml:"metrics"`

	// The HTTP server's timeouts, so that a client that sends slowly or
	// not at all, or holds connections idle, costs the daemon nothing
	// for long.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	ReadTimeout       Duration `toml:"read_timeout"`
	WriteTimeout      Duration `toml:"write_timeout"`
	IdleTimeout       Duration `toml:"idle_timeout"`

	// CRL is the CA's revocation list (see p2p/ca): a peer whose
	// certificate is on it is refused, as a client and as a server. ""
	// is ca.crl beside CA, read if it is there or once it appears; a
	// file named must exist. The file is looked at again on every
	// connection and request, so a list copied over is in force from
	// the next one; [New] refuses a list that is not the CA's.
	CRL string `toml:"crl"`

	// JobMemoryMB bounds the memory of a job's processes together, in
	// MiB (its cgroup's memory.max, or memory.limit_in_bytes on cgroup
	// v1); JobPids the number of its processes and threads (pids.max).
	JobMemoryMB int64 `toml:"job_memory_mb"`
	JobPids     int   `toml:"job_pids"`
	// JobUIDs is "FIRST-LAST", the uids a root daemon runs its jobs under
	// (each running job its own, its gid the same number), or "none" to
	// run them as root. Ignored when the daemon is not root.
	JobUIDs string `toml:"job_uids"`
	// JobCores gives each running job a set of the daemon's cores of its
	// own (in proportion to its slots, disjoint while enough are free);
	// false leaves every job all of them, as when several daemons share
	// one host (a test rig) and none may take cores for its own jobs.
	JobCores bool `toml:"job_cores"`
	// CoresDir is the host's registry of the cores the daemons' running
	// jobs hold (see above): "" its default, "none" no registry, else
	// an absolute directory, which must exist.
	CoresDir string `toml:"cores_dir"`

	// DialOutOnly says nobody can dial this host: the daemon is reached
	// through its supernodes, its ranks dial out (see above).
	DialOutOnly bool `toml:"dial_out_only"`
}

// Duration is a time.Duration written as a Go duration string in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses "30s", "1m30s", …
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as Go does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// DefaultConfig is the configuration of a key left out.
func DefaultConfig() Config {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	work := filepath.Join(home, ".cohort", "work")
	if os.Geteuid() == 0 {
		// Jobs run under uids of their own and must reach their
		// directories: root's home is usually closed to others.
		work = "/var/lib/cohort/work"
	}
	return Config{
		Listen:      ":7950",
		CA:          filepath.Join(home, ".cohort", "ca", "ca.crt"),
		Certs:       filepath.Join(home, ".cohort", "ca"),
		WorkDir:     work,
		Jobs:        1,
		ProcsPerJob: 1,
		Hold:        Duration{30 * time.Second},
		MaxFileMB:   256,
		MaxJobMB:    1024,
		Refresh:     Duration{10 * time.Second},
		Ping:        Duration{10 * time.Second},

		ReadHeaderTimeout: Duration{5 * time.Second},
		ReadTimeout:       Duration{30 * time.Second},
		WriteTimeout:      Duration{30 * time.Second},
		IdleTimeout:       Duration{60 * time.Second},

		JobMemoryMB: 4096,
		JobPids:     1024,
		JobUIDs:     "61000-61999",
		JobCores:    true,
	}
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("daemon: bad configuration")

// Load reads a TOML configuration over the defaults; unknown keys are
// errors (a misspelt key would otherwise be silently ignored).
func Load(path string) (Config, error) {
	cfg := DefaultConfig()
	md, err := toml.DecodeFile(path, &cfg)
	if err != nil {
		return cfg, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return cfg, fmt.Errorf("%w: %s: unknown keys %s", ErrConfig, path, strings.Join(keys, ", "))
	}
	cfg.CA, cfg.Certs, cfg.WorkDir, cfg.CoresDir = expand(cfg.CA), expand(cfg.Certs), expand(cfg.WorkDir), expand(cfg.CoresDir)
	return cfg, cfg.Validate()
}

func expand(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// Validate reports the first bad field, by its TOML key.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Name == "":
		return bad("name is required (the name of the daemon's certificate)")
	case c.Jobs < 1:
		return bad("jobs = %d, want at least 1", c.Jobs)
	case c.ProcsPerJob < 1:
		return bad("procs_per_job = %d, want at least 1", c.ProcsPerJob)
	case c.Hold.Duration <= 0:
		return bad("hold = %v, want a positive duration", c.Hold.Duration)
	case c.MaxFileMB < 1 || c.MaxJobMB < c.MaxFileMB:
		return bad("max_file_mb = %d, max_job_mb = %d: want 1 ≤ max_file_mb ≤ max_job_mb", c.MaxFileMB, c.MaxJobMB)
	case c.Refresh.Duration <= 0 || c.Ping.Duration <= 0:
		return bad("refresh = %v, ping = %v: want positive durations", c.Refresh.Duration, c.Ping.Duration)
	case c.ReadHeaderTimeout.Duration <= 0 || c.ReadTimeout.Duration <= 0 || c.WriteTimeout.Duration <= 0 || c.IdleTimeout.Duration <= 0:
		return bad("read_header_timeout = %v, read_timeout = %v, write_timeout = %v, idle_timeout = %v: want positive durations",
			c.ReadHeaderTimeout.Duration, c.ReadTimeout.Duration, c.WriteTimeout.Duration, c.IdleTimeout.Duration)
	case c.AllowAll && len(c.Allowed) > 0:
		return bad("allowed = %q with allow_all = true: give one or the other", c.Allowed)
	case c.WorkDir == "":
		return bad("work_dir is empty")
	case c.JobMemoryMB < 16:
		return bad("job_memory_mb = %d, want at least 16", c.JobMemoryMB)
	case c.JobPids < 16:
		return bad("job_pids = %d, want at least 16 (a Go program alone runs several threads)", c.JobPids)
	case c.CoresDir != "" && c.CoresDir != "none" && !filepath.IsAbs(c.CoresDir):
		return bad("cores_dir = %q: want an absolute directory, \"none\", or nothing for the default", c.CoresDir)
	}
	if first, last, err := parseUIDRange(c.JobUIDs); err != nil {
		return bad("job_uids = %q: %v", c.JobUIDs, err)
	} else if first > 0 && last-first+1 < c.Jobs {
		return bad("job_uids = %q holds %d uids, fewer than jobs = %d: each running job needs its own", c.JobUIDs, last-first+1, c.Jobs)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen = %q: %v", c.Listen, err)
	}
	if c.Advertise != "" {
		if h, _, err := net.SplitHostPort(c.Advertise); err != nil || h == "" {
			return bad("advertise = %q: want host:port", c.Advertise)
		}
	} else if h, _, _ := net.SplitHostPort(c.Listen); h == "" || h == "0.0.0.0" || h == "::" {
		if len(c.Supernodes) > 0 {
			return bad("advertise is required when listen (%q) names no host: the address the others dial", c.Listen)
		}
	}
	for _, s := range c.Supernodes {
		if _, _, err := ParseSupernode(s); err != nil {
			return bad("supernodes: %v", err)
		}
	}
	return nil
}

// ParseSupernode splits "NAME@HOST:PORT" (or "HOST:PORT") into the name
// its certificate must carry and its address. With no name, name is ""
// and the supernode's certificate must be HOST's (see supernode.NewClient).
func ParseSupernode(s string) (name, addr string, err error) {
	name, addr, found := strings.Cut(s, "@")
	if !found {
		name, addr = "", s
	}
	if h, _, err := net.SplitHostPort(addr); err != nil || h == "" {
		return "", "", fmt.Errorf("supernode %q: want NAME@HOST:PORT or HOST:PORT", s)
	}
	return name, addr, nil
}

// parseUIDRange reads job_uids: "FIRST-LAST" (1 ≤ FIRST ≤ LAST < 2³¹-1),
// or "none" (0, 0).
func parseUIDRange(s string) (first, last int, err error) {
	if s == "none" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, errors.New(`want "FIRST-LAST" or "none"`)
	}
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || first < 1 || last < first || last >= 1<<31-1 {
		return 0, 0, errors.New(`want "FIRST-LAST", 1 ≤ FIRST ≤ LAST < 2147483647, or "none"`)
	}
	return first, last, nil
}
