package submit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/place"
	"github.com/cohort-mp/cohort/p2p/submit"
)

// A job with spares on three daemons of two slots each: the N+S
// processes run (the spares after the ranks, the size counting them),
// spread puts the spares on the hosts the ranks fill least and the
// submitter says where; a spare that fails on its own fails the job,
// named as a process.
func TestRunSparesOnLoopbackDaemons(t *testing.T) {
	c := newCluster(t, 3)
	run := func(env ...string) (submit.Result, string, string, error) {
		var out, log lockedBuf
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := submit.Run(ctx, submit.Config{N: 4, Spares: 2, Strategy: place.Spread, Supernodes: []string{c.sn}, Creds: c.alice,
			Program: c.script, Env: env, Stdout: &out, Log: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) },
			RendezvousTimeout: 2 * time.Second})
		return res, out.String(), log.String(), err
	}
	res, out, log, err := run()
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for p := range 6 {
		if !strings.Contains(out, fmt.Sprintf("rank %d of 6 on 127.0.0.1", p)) {
			t.Errorf("process %d did not run:\n%s", p, out)
		}
	}
	if len(res.Exits) != 6 {
		t.Fatalf("%d exits, want 6 (4 ranks, 2 spares)", len(res.Exits))
	}
	// Round robin in latency order: ranks 0-2 on the three hosts, rank 3
	// on the first again, the spares on the second and third.
	want := fmt.Sprintf("spares (process@host): 4@%s 5@%s", res.Ranked[1].Name, res.Ranked[2].Name)
	if !strings.Contains(log, want) {
		t.Errorf("want %q in the log:\n%s", want, log)
	}
	if strings.Contains(log, "every spare is on") {
		t.Errorf("a warning about the spares' host although they are on two:\n%s", log)
	}
	_, _, _, err = run("FAIL_RANK=5")
	if !errors.Is(err, submit.ErrFailed) || !strings.Contains(err.Error(), "1 of 6 processes: process 5 (exit status 3 on") {
		t.Errorf("a spare exiting 3: %v", err)
	}
}
