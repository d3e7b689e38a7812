package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/internal/multihost"
	"github.com/cohort-mp/cohort/internal/netlab"
	"github.com/cohort-mp/cohort/p2p/place"
	"github.com/cohort-mp/cohort/p2p/submit"
)

// Across network-namespace hosts (ReplicationConfig.Netns), every process
// of a run has a host of its own: a rig of peer daemons, one per network
// namespace on a bridge of this machine (internal/multihost), with a
// supernode, started once for the whole benchmark and torn down at its
// end. Each run is a job submitted to the rig as `cohort run --hosts`
// submits one, spread so that no two processes share a host: their
// frames cross veth links and the bridge, over TCP in authenticated
// records, as between machines (the ranks are also told to keep off the
// same-host paths, in case the spread ever put two on one host).

// netnsRig is the rig of a benchmark across namespace hosts.
type netnsRig struct {
	rig *multihost.Rig
	exe string // the cohort executable, staged to the hosts as each job's program
}

// netnsStartTimeout bounds the rig's start: the namespaces, the CA, the
// supernode and every daemon's registration with it.
const netnsStartTimeout = 2 * time.Minute

// netnsHosts is the number of daemon hosts for degrees up to maxR: one per
// process of the largest run (2·maxR processes: the degree's pair, or
// its floor's maxR pairs).
func netnsHosts(maxR int) int { return 2 * maxR }

// startNetns builds the rig for cfg; without root or network namespaces
// it returns an error saying so.
func startNetns(ctx context.Context, cfg ReplicationConfig) (*netnsRig, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: the cohort executable for the hosts: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, netnsStartTimeout)
	defer cancel()
	rig, err := multihost.Start(ctx, netnsHosts(cfg.MaxReplicas), 2, exe)
	if errors.Is(err, netlab.ErrUnavailable) {
		return nil, fmt.Errorf("bench: replication across namespace hosts needs root and network namespaces: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: replication across namespace hosts: %w", err)
	}
	return &netnsRig{rig: rig, exe: exe}, nil
}

// close stops the rig's processes and removes its namespaces and files.
func (n *netnsRig) close() error { return n.rig.Close() }

// run runs one ping-pong job of b on the rig and returns rank 0's figures.
func (n *netnsRig) run(ctx context.Context, b *OSU) (map[int]float64, error) {
	// submit writes the ranks' lines one at a time.
	var out, stderr bytes.Buffer
	_, err := submit.Run(ctx, submit.Config{
		N: b.Ranks, Replicas: b.Replicas, Strategy: place.Spread,
		Supernodes: []string{n.rig.Supernode}, Creds: n.rig.Creds,
		Program: n.exe, Args: append([]string{"osu-worker", b.Mode, "ours-mac"}, b.Args()...),
		Env:    osuUnixEnv["ours-mac"],
		Stdout: &out, Stderr: &stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return parseFigures(out.Bytes(), b.Sizes())
}
