package submit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/daemon"
	"github.com/cohort-mp/cohort/p2p/place"
	"github.com/cohort-mp/cohort/p2p/submit"
	"github.com/cohort-mp/cohort/p2p/supernode"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cluster is a supernode and k daemons (P = 2) on loopback, in this
// process.
type cluster struct {
	dir    string
	sn     string
	alice  *ca.Credentials
	stops  []context.CancelFunc
	dones  []chan error
	script string
}

func newCluster(t *testing.T, k int) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir()}
	if err := ca.Init(c.dir, "cluster"); err != nil {
		t.Fatal(err)
	}
	load := func(name string) *ca.Credentials {
		if err := ca.Issue(c.dir, c.dir, name); err != nil {
			t.Fatal(err)
		}
		cr, err := ca.Load(filepath.Join(c.dir, "ca.crt"), c.dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	snCreds := load("sn")
	c.alice = load("alice")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan string, 1)
	go supernode.Serve(ctx, supernode.Config{Listen: "127.0.0.1:0", Creds: snCreds, Ready: func(a string) { ready <- a }})
	c.sn = "sn@" + <-ready
	for i := 1; i <= k; i++ {
		name := fmt.Sprintf("d%d", i)
		load(name)
		cfg := daemon.DefaultConfig()
		cfg.Name, cfg.Listen, cfg.CA, cfg.Certs = name, "127.0.0.1:0", filepath.Join(c.dir, "ca.crt"), c.dir
		cfg.WorkDir = filepath.Join(c.dir, "work-"+name)
		cfg.JobUIDs = "none" // the test's directory is closed to other uids
		cfg.ProcsPerJob, cfg.Allowed, cfg.Supernodes = 2, []string{"alice"}, []string{c.sn}
		cfg.Refresh = daemon.Duration{Duration: 200 * time.Millisecond}
		d, err := daemon.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		dctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		up := make(chan string, 1)
		go func() { done <- d.Serve(dctx, func(a string) { up <- a }) }()
		<-up
		c.stops, c.dones = append(c.stops, stop), append(c.dones, done)
	}
	t.Cleanup(func() {
		for i, stop := range c.stops {
			stop()
			<-c.dones[i]
		}
	})
	for {
		peers, err := submit.Peers(ctx, c.alice, []string{c.sn})
		if err == nil && len(peers) == k {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.script = filepath.Join(c.dir, "rank.sh")
	os.WriteFile(c.script, []byte("#!/bin/sh\necho \"rank $COHORT_RANK of $COHORT_SIZE on $COHORT_LISTEN_HOST\"\n[ \"$COHORT_RANK\" = \"$FAIL_RANK\" ] && exit 3\nexit 0\n"), 0o700)
	return c
}

func (c *cluster) run(n int, s place.Strategy, env ...string) (submit.Result, string, string, error) {
	var out, log lockedBuf
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := submit.Run(ctx, submit.Config{N: n, Strategy: s, Supernodes: []string{c.sn}, Creds: c.alice,
		Program: c.script, Env: env, Stdout: &out, Log: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) },
		RendezvousTimeout: 2 * time.Second})
	return res, out.String(), log.String(), err
}

// Jobs on three daemons of two slots each: every rank runs once with its
// place in the environment and the placement follows the strategy; a
// daemon that stopped (still listed by the supernode) is skipped; asking
// for more than the live daemons offer is refused, naming what exists; a
// rank's failure is named.
func TestRunOnLoopbackDaemons(t *testing.T) {
	c := newCluster(t, 3)
	res, out, log, err := c.run(4, place.Spread)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for r := range 4 {
		if !strings.Contains(out, fmt.Sprintf("rank %d of 4 on 127.0.0.1", r)) {
			t.Errorf("rank %d did not run:\n%s", r, out)
		}
	}
	per := res.Placement.PerHost()
	if len(per) != 3 || per[res.Ranked[0].Name] != 2 {
		t.Errorf("spread over 3 hosts of 2: %v (ranked %v)", per, res.Ranked)
	}
	res, _, log, err = c.run(4, place.Concentrate)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if per := res.Placement.PerHost(); len(per) != 2 || per[res.Ranked[2].Name] != 0 {
		t.Errorf("concentrate: %v (ranked %v)", per, res.Ranked)
	}

	// Stop the last daemon: the supernode lists it until its registration
	// expires, the submitter's ping finds it gone.
	c.stops[2]()
	<-c.dones[2]
	c.dones[2] = make(chan error, 1)
	c.dones[2] <- nil
	res, _, log, err = c.run(4, place.Spread)
	if err != nil {
		t.Fatalf("with a daemon gone: %v\n%s", err, log)
	}
	if !strings.Contains(log, "2 of 3 peers answered") || len(res.Placement.PerHost()) != 2 {
		t.Errorf("a stopped daemon: placement %v, log:\n%s", res.Placement.PerHost(), log)
	}
	_, _, _, err = c.run(5, place.Spread)
	if err == nil || !regexp.MustCompile(`5 processes .* asked, 4 slots on 2 hosts available`).MatchString(err.Error()) {
		t.Errorf("5 ranks on 4 slots: %v", err)
	}
	_, out, _, err = c.run(3, place.Spread, "FAIL_RANK=1")
	if !errors.Is(err, submit.ErrFailed) || !strings.Contains(err.Error(), "rank 1 (exit status 3 on") {
		t.Errorf("a rank exiting 3: %v\n%s", err, out)
	}
}
