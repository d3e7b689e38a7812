package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Jobs get cores in proportion to their slots, free ones first and
// disjoint while there are enough; a job larger than the free cores
// shares the least held ones; a job's release gives its cores back.
func TestCoreSets(t *testing.T) {
	cs := newCoreSets([]int{7, 6, 5, 4, 3, 2, 1, 0}, 4) // 2 cores a slot
	steps := []struct {
		slots  int
		want   []int
		shared bool
	}{
		{1, []int{0, 1}, false},
		{2, []int{2, 3, 4, 5}, false},
		{2, []int{0, 1, 6, 7}, true}, // 6 and 7 free, then 0 and 1 held once
		{9, []int{0, 1, 2, 3, 4, 5, 6, 7}, true},
	}
	var sets [][]int
	for i, s := range steps {
		got, shared := cs.take(s.slots)
		if !slices.Equal(got, s.want) || shared != s.shared {
			t.Errorf("step %d: take(%d) = %v shared %v, want %v shared %v", i, s.slots, got, shared, s.want, s.shared)
		}
		sets = append(sets, got)
	}
	cs.release(sets[3])
	cs.release(sets[1])
	if got, shared := cs.take(1); !slices.Equal(got, []int{2, 3}) || shared {
		t.Errorf("after two releases, take(1) = %v shared %v, want the freed [2 3] of its own", got, shared)
	} else {
		sets[1] = got
	}
	for _, s := range sets[:3] {
		cs.release(s)
	}
	if n := cs.held(); n != 0 {
		t.Errorf("every job released, %d cores still held", n)
	}
	if got, _ := newCoreSets(nil, 2).take(1); got != nil {
		t.Errorf("no cores known: take = %v, want nil", got)
	}
	if got, _ := newCoreSets([]int{0, 1}, 8).take(1); !slices.Equal(got, []int{0}) {
		t.Errorf("more slots than cores: take(1) = %v, want one core", got)
	}
}

func TestFormatCPUs(t *testing.T) {
	for want, set := range map[string][]int{"": nil, "3": {3}, "0-3": {0, 1, 2, 3}, "0-1,4,6-8": {0, 1, 4, 6, 7, 8}} {
		if got := formatCPUs(set); got != want {
			t.Errorf("formatCPUs(%v) = %q, want %q", set, got, want)
		}
	}
}

// Two jobs running at once on one daemon get disjoint sets of its cores:
// each job's process may run on its set only and is told it in
// COHORT_CPUS; once both ended, every core is free again.
func TestConcurrentJobsDisjointCores(t *testing.T) {
	if n := len(daemonCPUs()); n < 2 {
		t.Skipf("SKIP: this process may run on %d cores: two jobs cannot have one each", n)
	}
	r := startDaemon(t, func(c *Config) { c.Jobs, c.ProcsPerJob = 2, 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := NewClient(r.creds("alice"), "d1", r.addr)
	defer c.Close()
	gate := filepath.Join(t.TempDir(), "go")
	// Each job says its cores, then waits for the other to have started.
	script := "#!/bin/sh\necho \"cpus=$COHORT_CPUS allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)\"\n" +
		"while [ ! -e \"$1\" ]; do sleep 0.05; done\n"
	type result struct {
		cpus, allowed string
		err           error
	}
	lines := make(chan result, 2)
	var wg sync.WaitGroup
	var sets [][]int
	for _, name := range []string{"a", "b"} {
		tok, err := c.Reserve(ctx, name, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stage(ctx, tok.Token, fileOf("p", []byte(script), true), strings.NewReader(script)); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			said := false
			// What the submitter says of the cores does not hold.
			err := c.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Args: []string{gate}, Env: []string{EnvCPUs + "=0-1023"},
				Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(ev Event) {
				f := fields(ev.Out)
				if f["cpus"] != "" && !said {
					said = true
					lines <- result{cpus: f["cpus"], allowed: f["allowed"]}
				}
			})
			if !said {
				lines <- result{err: fmt.Errorf("job %s said nothing: %v", name, err)}
			}
		}()
		// The second job is launched once the first runs.
		res := <-lines
		if res.err != nil {
			os.WriteFile(gate, nil, 0o644)
			t.Fatal(res.err)
		}
		if res.cpus != res.allowed {
			t.Errorf("job %s, told cores %s, runs on %s", name, res.cpus, res.allowed)
		}
		sets = append(sets, parseList(t, res.cpus))
	}
	os.WriteFile(gate, nil, 0o644)
	wg.Wait()
	for _, c := range sets[0] {
		if slices.Contains(sets[1], c) {
			t.Errorf("two jobs at once share core %d: %v and %v", c, sets[0], sets[1])
		}
	}
	if !strings.Contains(r.log.String(), "the job's cores") {
		t.Errorf("the log does not say the jobs' cores:\n%s", r.log.String())
	}
	if !strings.Contains(r.log.String(), "cores apart from the other daemons' jobs") {
		t.Errorf("the log does not say the host's registry of cores is used:\n%s", r.log.String())
	}
	if names, err := os.ReadDir(r.d.cfg.CoresDir); err != nil || len(names) != 1 {
		t.Errorf("both jobs ended, the registry holds %v (%v), want its lock file alone", names, err)
	}
	if n := r.d.conf.cores.held(); n != 0 {
		t.Errorf("both jobs ended, %d cores still held", n)
	}
}

// fields parses the "key=value" words of a line.
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			m[k] = v
		}
	}
	return m
}

// parseList parses a kernel cpu list such as "0-2,5".
func parseList(t *testing.T, s string) []int {
	t.Helper()
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil {
			t.Fatalf("cpu list %q", s)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// With job_cores = false a job runs on every core of the daemon and is
// told no set.
func TestJobCoresOff(t *testing.T) {
	r := startDaemon(t, func(c *Config) { c.JobCores = false })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, tok := r.stagedJob(t, ctx, "#!/bin/sh\necho \"cpus=${COHORT_CPUS:-none} allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)\"\n")
	var got map[string]string
	err := c.Launch(ctx, tok.Token, LaunchRequest{Program: "p", Ranks: []LaunchRank{{Rank: 0}}}, 5*time.Second, func(ev Event) {
		if strings.HasPrefix(ev.Out, "cpus=") {
			got = fields(ev.Out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := formatCPUs(daemonCPUs()); got["cpus"] != "none" || got["allowed"] != want {
		t.Errorf("job_cores = false: the job was told %q and runs on %q, want none and the daemon's %q", got["cpus"], got["allowed"], want)
	}
	if !strings.Contains(r.log.String(), "job_cores = false") {
		t.Errorf("the log does not say jobs share the daemon's cores:\n%s", r.log.String())
	}
}
