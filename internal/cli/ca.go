package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cohort-mp/cohort/p2p/ca"
)

func init() {
	register(&command{
		name:     "ca",
		synopsis: "init [--dir DIR] [--name NAME]   |   cohort ca issue [--dir DIR] [--out DIR] NAME",
		summary:  "the cluster's certificate authority for mutual TLS between daemons and submitters",
		help: `Ca makes the cluster's certificate authority and issues certificates from it.
Supernodes, peer daemons and submitters speak mutual TLS with certificates of
one CA; a daemon accepts a job only from a submitter whose certificate chains
to it and whose name its configuration allows.

  cohort ca init [--dir DIR] [--name NAME]
      writes DIR/ca.crt and DIR/ca.key (0600); refuses to overwrite.
  cohort ca issue [--dir DIR] [--out DIR] NAME
      writes OUT/NAME.crt and OUT/NAME.key (0600), signed by the CA in DIR,
      for NAME: a daemon's host name or address, or a submitter's name.

DIR defaults to ~/.cohort/ca; OUT to DIR. Keep ca.key on one machine only.

Examples:
  cohort ca init
  cohort ca issue node1.example.org
  cohort ca issue --out /tmp/alice alice`,
		run: runCA,
	})
}

func runCA(_ context.Context, c *call) error {
	if len(c.args) == 0 {
		return usagef("missing init or issue")
	}
	home := "."
	if h, err := os.UserHomeDir(); err == nil {
		home = h
	}
	def := filepath.Join(home, ".cohort", "ca")
	switch sub := c.args[0]; sub {
	case "init":
		fs := c.newFlags()
		dir := fs.String("dir", def, "`directory` of the CA")
		name := fs.String("name", "cohort-ca", "the CA's `name`")
		if err := c.parse(fs, c.args[1:], 0); err != nil {
			return err
		}
		if err := ca.Init(*dir, *name); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "CA %q in %s (ca.crt, ca.key 0600)\n", *name, *dir)
		return nil
	case "issue":
		fs := c.newFlags()
		dir := fs.String("dir", def, "`directory` of the CA")
		out := fs.String("out", "", "`directory` to write NAME.crt and NAME.key to (default: the CA's)")
		if err := c.parse(fs, c.args[1:], 1); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return usagef("missing the NAME to issue a certificate for")
		}
		name := fs.Arg(0)
		if *out == "" {
			*out = *dir
		}
		if err := ca.Issue(*dir, *out, name); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%s.crt and %s.key (0600) in %s\n", name, name, *out)
		return nil
	case "-h", "-help", "--help":
		writeCommandUsage(c.stdout, c.cmd, nil)
		return nil
	default:
		return usagef("unknown ca command %q (want init or issue)", sub)
	}
}
