package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

func init() {
	register(&command{
		name:     "ca",
		synopsis: "init|issue|renew|list|revoke [flags] [NAME]",
		summary:  "the cluster's certificate authority for mutual TLS between daemons and submitters",
		help: `Ca makes the cluster's certificate authority and issues certificates from it.
Supernodes, peer daemons and submitters speak mutual TLS with certificates of
one CA; a daemon accepts a job only from a submitter whose certificate chains
to it and whose name its configuration allows.

  cohort ca init [--dir DIR] [--name NAME]
      writes DIR/ca.crt and DIR/ca.key (0600); refuses to overwrite.
  cohort ca issue [--dir DIR] [--out DIR] [--days N] NAME
      writes OUT/NAME.crt and OUT/NAME.key (0600), signed by the CA in DIR,
      for NAME: a daemon's host name or address, or a submitter's name. The
      certificate lives N days (default 90, at most 1095) and says when it
      expires; refuses to overwrite.
  cohort ca renew [--dir DIR] [--out DIR] [--days N] NAME
      replaces OUT/NAME.crt and OUT/NAME.key with a new key and certificate
      of N days. The old certificate stays valid until it expires. A daemon
      or supernode reads its certificate at start: restart it to use the
      new one.
  cohort ca list [--dir DIR]
      every certificate the CA issued: name, serial, expiry, and whether it
      is valid, expired or revoked.
  cohort ca revoke [--dir DIR] NAME   |   cohort ca revoke [--dir DIR] --serial S
      puts every certificate issued to NAME (or the one of serial S, as
      list prints it) on the CA's revocation list, DIR/ca.crl, signed by
      the CA.

DIR defaults to ~/.cohort/ca; OUT to DIR. Keep ca.key on one machine only.
The CA records what it issues in DIR/issued.txt.

A member's certificate is short lived so that a lost key or a member that
leaves stops being trusted on its own: renew the certificates of members
that stay before they expire ('cohort ca list' shows when).

To stop trusting a member sooner, revoke it and copy DIR/ca.crl to every
machine of the cluster, beside its ca.crt. Daemons and supernodes read
ca.crl beside their CA certificate (or the file given by their crl setting
or --crl) at start, refuse to start on one that is not the CA's, and look at
the file again on every connection: once the new list is there, a revoked
member is refused at its next handshake or request, and named in the log.

Examples:
  cohort ca init
  cohort ca issue node1.example.org
  cohort ca issue --out /tmp/alice --days 30 alice
  cohort ca list
  cohort ca renew node1.example.org
  cohort ca revoke alice && scp ~/.cohort/ca/ca.crl node1.example.org:.cohort/ca/`,
		run: runCA,
	})
}

func runCA(_ context.Context, c *call) error {
	if len(c.args) == 0 {
		return usagef("missing init, issue, renew, list or revoke")
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
	case "issue", "renew":
		fs := c.newFlags()
		dir := fs.String("dir", def, "`directory` of the CA")
		out := fs.String("out", "", "`directory` to write NAME.crt and NAME.key to (default: the CA's)")
		days := fs.Int("days", int(ca.MemberValidity/(24*time.Hour)), "the certificate's lifetime in `days`")
		if err := c.parse(fs, c.args[1:], 1); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return usagef("missing the NAME to %s a certificate for", sub)
		}
		if max := int(ca.MaxMemberValidity / (24 * time.Hour)); *days < 1 || *days > max {
			return usagef("--days %d: want 1 to %d", *days, max)
		}
		name := fs.Arg(0)
		if *out == "" {
			*out = *dir
		}
		lifetime := time.Duration(*days) * 24 * time.Hour
		issue := ca.IssueFor
		if sub == "renew" {
			issue = ca.Renew
		}
		cert, err := issue(*dir, *out, name, lifetime)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%s.crt and %s.key (0600) in %s: serial %s, expires %s\n",
			name, name, *out, ca.SerialText(cert.SerialNumber), cert.NotAfter.UTC().Format(time.RFC3339))
		return nil
	case "list":
		fs := c.newFlags()
		dir := fs.String("dir", def, "`directory` of the CA")
		if err := c.parse(fs, c.args[1:], 0); err != nil {
			return err
		}
		list, err := ca.List(*dir)
		if err != nil {
			return err
		}
		now := time.Now()
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSERIAL\tEXPIRES\tSTATUS")
		for _, is := range list {
			status := "valid, " + daysLeft(is.NotAfter.Sub(now))
			switch {
			case !is.Revoked.IsZero():
				status = "revoked " + is.Revoked.UTC().Format(time.RFC3339)
			case !now.Before(is.NotAfter):
				status = "expired"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", is.Name, ca.SerialText(is.Serial), is.NotAfter.UTC().Format(time.RFC3339), status)
		}
		return tw.Flush()
	case "revoke":
		fs := c.newFlags()
		dir := fs.String("dir", def, "`directory` of the CA")
		serialText := fs.String("serial", "", "revoke the certificate of this `serial` (hexadecimal) rather than a NAME's")
		if err := c.parse(fs, c.args[1:], 1); err != nil {
			return err
		}
		var what string
		switch {
		case *serialText != "" && fs.NArg() == 1:
			return usagef("give a NAME or --serial, not both")
		case *serialText != "":
			n, err := ca.ParseSerial(*serialText)
			if err != nil {
				return usagef("--serial: %v", err)
			}
			if err := ca.RevokeSerial(*dir, n); err != nil {
				return err
			}
			what = "serial " + ca.SerialText(n)
		case fs.NArg() == 1:
			serials, err := ca.Revoke(*dir, fs.Arg(0))
			if err != nil {
				return err
			}
			texts := make([]string, len(serials))
			for i, n := range serials {
				texts[i] = ca.SerialText(n)
			}
			what = fmt.Sprintf("%s (serial %s)", fs.Arg(0), strings.Join(texts, ", "))
		default:
			return usagef("missing the NAME (or --serial) to revoke")
		}
		crl := filepath.Join(*dir, ca.CRLFile)
		fmt.Fprintf(c.stdout, "revoked %s in %s\ncopy it beside ca.crt on every daemon and supernode: they read it at their next connection\n", what, crl)
		return nil
	case "-h", "-help", "--help":
		writeCommandUsage(c.stdout, c.cmd, nil)
		return nil
	default:
		return usagef("unknown ca command %q (want init, issue, renew, list or revoke)", sub)
	}
}

// daysLeft says how long remains, in days (hours in the last one).
func daysLeft(d time.Duration) string {
	if d < 24*time.Hour {
		return fmt.Sprintf("%dh left", int(d.Hours()))
	}
	return fmt.Sprintf("%dd left", int(d/(24*time.Hour)))
}
