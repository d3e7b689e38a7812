package netlab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Faults narrower than a host's whole link live in each host's own
// firewall: an nftables table named "netlab" in its namespace, rewritten
// whole (in one nft transaction) from the lab's record of the faults each
// time one changes, so a heal never has to find the rule it undoes and the
// table goes with the namespace when the lab closes. A dropped packet is
// dropped where it arrives, in silence: the sender sees what it would see
// on a real broken path (no answer), never a local error such as the
// EINVAL that a blackhole route hands to a local sender.

// ErrNftUnavailable: this machine can build labs but not the faults that
// need a host firewall (no nft command).
var ErrNftUnavailable = errors.New("netlab: host firewalls unavailable")

// nftTable is the table the lab keeps in each host's namespace.
const nftTable = "netlab"

// NftAvailable reports whether this machine can hold the faults that need
// a firewall (CutPair, CutOneWay, SetDialOutOnly), and why not.
func NftAvailable() error {
	if err := Available(); err != nil {
		return err
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("%w: no nft command (install nftables)", ErrNftUnavailable)
	}
	return nil
}

// NeedNft skips t, saying why, unless the lab's firewall faults work here.
func NeedNft(t testing.TB) {
	t.Helper()
	if err := NftAvailable(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
}

// CutPair drops every packet between a and b, both ways, while each still
// reaches every other host and the machine: a partial partition.
func (l *Lab) CutPair(a, b *Host) error {
	return l.setDrop([2]*Host{a, b}, [2]*Host{b, a}, true)
}

// HealPair undoes CutPair (and any one-way cut between a and b).
func (l *Lab) HealPair(a, b *Host) error {
	return l.setDrop([2]*Host{a, b}, [2]*Host{b, a}, false)
}

// CutOneWay drops every packet from one host to another; the other way is
// delivered. A TCP connection needs both ways, so neither host can open
// one to the other; datagrams from to reach from.
func (l *Lab) CutOneWay(from, to *Host) error {
	return l.setDrop([2]*Host{from, to}, [2]*Host{}, true)
}

// HealOneWay undoes CutOneWay(from, to); a cut the other way stays.
func (l *Lab) HealOneWay(from, to *Host) error {
	return l.setDrop([2]*Host{from, to}, [2]*Host{}, false)
}

// SetDialOutOnly makes h a host nobody can dial, as behind a NAT or a
// firewall that refuses inbound connections (on), or an ordinary host
// again (off). Packets that start a conversation with h — a TCP SYN, a
// first datagram — are dropped on arrival; conversations h starts work
// both ways, and so does traffic within h. It holds against the machine
// too, not only against other hosts. Switch it on before the conversations
// it should refuse begin: the firewall learns of a connection from its
// packets, so one already open may stall until h sends on it.
func (l *Lab) SetDialOutOnly(h *Host, on bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.dialOutOnly = on
	return h.applyRules()
}

// setDrop records (on) or clears a drop of the packets from p[0] to p[1],
// and of q's when q is set, and rewrites the receivers' tables.
func (l *Lab) setDrop(p, q [2]*Host, on bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, d := range [][2]*Host{p, q} {
		from, to := d[0], d[1]
		if from == nil {
			continue
		}
		if from == to {
			return fmt.Errorf("netlab: a cut from %s to itself", from.Name)
		}
		i := slices.Index(to.dropFrom, from.Addr)
		switch {
		case on && i < 0:
			to.dropFrom = append(to.dropFrom, from.Addr)
			slices.Sort(to.dropFrom)
		case !on && i >= 0:
			to.dropFrom = slices.Delete(to.dropFrom, i, i+1)
		}
		if err := to.applyRules(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ruleset is the nft script that replaces h's table by what the lab
// records for h (or only removes it, when nothing is recorded).
func (h *Host) ruleset() string {
	var b strings.Builder
	// Adding the table first makes the delete valid when there is none.
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\n", nftTable, nftTable)
	if len(h.dropFrom) == 0 && !h.dialOutOnly {
		return b.String()
	}
	fmt.Fprintf(&b, "table inet %s {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n", nftTable)
	if len(h.dropFrom) > 0 {
		fmt.Fprintf(&b, "\t\tip saddr { %s } drop\n", strings.Join(h.dropFrom, ", "))
	}
	if h.dialOutOnly {
		b.WriteString("\t\tiifname \"lo\" accept\n\t\tct state new drop\n")
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// applyRules loads h's ruleset into its namespace.
func (h *Host) applyRules() error {
	if err := NftAvailable(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(h.ruleset())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netlab: firewall of %s: %v: %s", h.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
