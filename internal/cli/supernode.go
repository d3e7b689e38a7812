package cli

import (
	"context"
	"os"
	"path/filepath"

	"github.com/cohort-mp/cohort/p2p/supernode"
)

func init() {
	register(&command{
		name:     "supernode",
		synopsis: "--name NAME [--listen ADDR] [--ca FILE] [--certs DIR] [--crl FILE] [--expiry D] [--metrics ADDR] [--log-format text|json]",
		summary:  "the bootstrap registry of the peer-to-peer middleware",
		help: `Supernode runs the registry that peer daemons register with and that
submitters ask for the list of live peers (HTTP/JSON over mutual TLS: every
client needs a certificate of the cluster's CA, see 'cohort ca'). A daemon
registers under its certificate's name; a registration not renewed within
--expiry is dropped. It logs each event once on standard error, a line of
plain text (key=value) or, with --log-format json, a JSON object; SIGTERM
or Ctrl-C shuts it down gracefully.

It refuses clients whose certificate has expired or is on the CA's
revocation list: --crl, by default ca.crl beside --ca if it is there (see
'cohort ca revoke'). A list that is not the CA's stops it from starting; it
looks at the file again on every connection, so a list copied over later is
in force from the next one (a bad one is logged and the last good one
kept).

Examples:
  cohort ca issue sn1.example.org
  cohort supernode --name sn1.example.org --listen :7940`,
		run: runSupernode,
	})
}

func runSupernode(ctx context.Context, c *call) error {
	home, _ := os.UserHomeDir()
	fs := c.newFlags()
	name := fs.String("name", "", "this supernode's `name` (its certificate NAME.crt/NAME.key)")
	listen := fs.String("listen", ":7940", "`address` to serve on")
	caFile := fs.String("ca", filepath.Join(home, ".cohort", "ca", "ca.crt"), "the cluster CA's certificate `file`")
	certs := fs.String("certs", filepath.Join(home, ".cohort", "ca"), "`directory` holding NAME.crt and NAME.key")
	crl := fs.String("crl", "", "the CA's revocation list `file` (default: ca.crl beside --ca, if there)")
	expiry := fs.Duration("expiry", supernode.DefaultExpiry, "how long a registration lives without renewal")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics on this `address` (plain HTTP, /metrics); empty: none")
	logFormat := addLogFormatFlag(fs)
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	log, err := newLogger(c.stderr, *logFormat)
	if err != nil {
		return err
	}
	if *name == "" {
		return usagef("--name is required (the name of this supernode's certificate)")
	}
	if *expiry <= 0 {
		return usagef("--expiry must be positive")
	}
	creds, err := loadCreds(*caFile, *certs, *name)
	if err != nil {
		return err
	}
	if err := creds.WatchRevocations(*crl, log); err != nil {
		return err
	}
	// The supernode logs that it serves, with its address: said once, there.
	return supernode.Serve(ctx, supernode.Config{Listen: *listen, Creds: creds, Expiry: *expiry, Logger: log, Metrics: *metricsAddr})
}
