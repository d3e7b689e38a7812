// Package slurm finds or starts a SLURM cluster on this machine for
// cohort's tests and benchmarks (the one-machine cluster of
// scripts/slurm-up), and runs job steps on it with srun.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cluster is a SLURM cluster that answers: srun can start steps on it.
type Cluster struct {
	Conf string // the slurm.conf to use ("" = SLURM's default)
	Node string // a node that is idle (or in use but up)
	// On, for the multi-node cluster of `scripts/slurm-up --nodes N`, is
	// scripts/slurm-on: commands run on node Node through it.
	On string
	// Nodes is the number of nodes (1 for the one-machine cluster).
	Nodes int
}

// MultiStateDir is the state directory of `scripts/slurm-up --nodes N`.
func MultiStateDir() string {
	if d := os.Getenv("COHORT_SLURM_MULTI_DIR"); d != "" {
		return d
	}
	return "/tmp/cohort-slurm-multi"
}

// EnsureNodes returns the multi-node cluster of `scripts/slurm-up --nodes
// nodes` under repoRoot, starting it (it needs root and network
// namespaces) if it does not answer. It never installs packages.
func EnsureNodes(ctx context.Context, repoRoot string, nodes int) (Cluster, error) {
	on := filepath.Join(repoRoot, "scripts", "slurm-on")
	c := Cluster{Conf: filepath.Join(MultiStateDir(), "slurm.conf"), Node: "n1", On: on, Nodes: nodes}
	if _, err := exec.LookPath("srun"); err != nil {
		return Cluster{}, fmt.Errorf("%w: srun is not installed (scripts/slurm-up installs SLURM from the system's packages)", ErrUnavailable)
	}
	if os.Geteuid() != 0 {
		return Cluster{}, fmt.Errorf("%w: a cluster of network namespaces needs root", ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "scripts", "slurm-up"), "--nodes", strconv.Itoa(nodes))
	cmd.Env = append(os.Environ(), "COHORT_SLURM_NO_INSTALL=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return Cluster{}, fmt.Errorf("%w: scripts/slurm-up --nodes %d failed: %v: %s", ErrUnavailable, nodes, err, strings.TrimSpace(out.String()))
	}
	return c, nil
}

// ErrUnavailable wraps every reason why no cluster can be had: srun is not
// installed, no controller answers and scripts/slurm-up cannot start one
// (not root, no packages). Tests skip on it, saying why.
var ErrUnavailable = errors.New("slurm: no SLURM cluster")

// Find returns the cluster that SLURM_CONF (or the default slurm.conf, or
// scripts/slurm-up's state directory) describes, if its controller answers
// and a node is up.
func Find(ctx context.Context) (Cluster, error) {
	if _, err := exec.LookPath("srun"); err != nil {
		return Cluster{}, fmt.Errorf("%w: srun is not installed (scripts/slurm-up installs SLURM from the system's packages)", ErrUnavailable)
	}
	var confs []string
	if c := os.Getenv("SLURM_CONF"); c != "" {
		confs = append(confs, c)
	}
	confs = append(confs, "", filepath.Join(stateDir(), "slurm.conf"))
	var last error
	for _, conf := range confs {
		if conf != "" {
			if _, err := os.Stat(conf); err != nil {
				continue
			}
		}
		c := Cluster{Conf: conf, Nodes: 1}
		node, err := c.upNode(ctx)
		if err == nil {
			c.Node = node
			return c, nil
		}
		last = err
	}
	if last == nil {
		last = errors.New("no slurm.conf")
	}
	return Cluster{}, fmt.Errorf("%w: %v", ErrUnavailable, last)
}

// Ensure returns a running cluster: the one Find finds, else the one
// scripts/slurm-up (under repoRoot) starts. It never installs packages
// unless install is true; starting daemons needs root.
func Ensure(ctx context.Context, repoRoot string, install bool) (Cluster, error) {
	if c, err := Find(ctx); err == nil {
		return c, nil
	}
	script := filepath.Join(repoRoot, "scripts", "slurm-up")
	if _, err := os.Stat(script); err != nil {
		return Cluster{}, fmt.Errorf("%w: none is running and %s is missing", ErrUnavailable, script)
	}
	if os.Geteuid() != 0 {
		return Cluster{}, fmt.Errorf("%w: none is running and starting one needs root (run scripts/slurm-up as root)", ErrUnavailable)
	}
	if !install {
		if _, err := exec.LookPath("slurmctld"); err != nil {
			return Cluster{}, fmt.Errorf("%w: SLURM is not installed (scripts/slurm-up installs it: slurm-wlm and munge)", ErrUnavailable)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script)
	cmd.Env = append(os.Environ(), "COHORT_SLURM_DIR="+stateDir())
	if !install {
		cmd.Env = append(cmd.Env, "COHORT_SLURM_NO_INSTALL=1")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return Cluster{}, fmt.Errorf("%w: scripts/slurm-up failed: %v: %s", ErrUnavailable, err, strings.TrimSpace(out.String()))
	}
	return Find(ctx)
}

// stateDir is scripts/slurm-up's state directory.
func stateDir() string {
	if d := os.Getenv("COHORT_SLURM_DIR"); d != "" {
		return d
	}
	return "/tmp/cohort-slurm"
}

// Env returns the environment for SLURM commands on c: the process's own,
// with SLURM_CONF set when c has one, and extra appended.
func (c Cluster) Env(extra ...string) []string {
	env := os.Environ()
	if c.Conf != "" {
		env = append(env, "SLURM_CONF="+c.Conf)
	}
	return append(env, extra...)
}

// Command returns name (srun, sinfo, scancel, …) with args, to run on c
// (on node c.Node through c.On for the multi-node cluster).
func (c Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	if c.On != "" {
		cmd = exec.CommandContext(ctx, c.On, append([]string{c.Node, name}, args...)...)
	}
	cmd.Env = c.Env()
	return cmd
}

// upStates are the node states in which a node runs steps ("completing":
// a job's end is being cleaned up; a state with a suffix such as "idle*"
// means the node does not answer).
var upStates = map[string]bool{"idle": true, "mixed": true, "allocated": true, "completing": true}

// upNode asks the controller for a node that can run a step.
func (c Cluster) upNode(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := c.Command(ctx, "sinfo", "-h", "-N", "-o", "%N %T").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("sinfo: %v: %s", err, firstLine(out))
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && upStates[f[1]] {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("no node is up: sinfo says %q", strings.TrimSpace(string(out)))
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// TaskPIDs returns the process ids of the tasks of the job named jobName
// running on this machine, by task rank (SLURM_PROCID), read from /proc.
func TaskPIDs(jobName string) (map[int]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	pids := map[int]int{}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || fmt.Sprint(pid) != e.Name() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		name, rank := "", -1
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, _ := strings.Cut(string(kv), "=")
			switch k {
			case "SLURM_JOB_NAME":
				name = v
			case "SLURM_PROCID":
				fmt.Sscanf(v, "%d", &rank)
			case "SLURM_STEP_ID":
				if v == "" || v == "batch" || v == "extern" {
					name = ""
				}
			}
		}
		// srun and slurmstepd carry no task's SLURM_PROCID; a task's
		// children would, so the lowest pid (the task itself) is kept.
		if name == jobName && rank >= 0 {
			if old, ok := pids[rank]; !ok || pid < old {
				pids[rank] = pid
			}
		}
	}
	return pids, nil
}
