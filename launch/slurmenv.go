package launch

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
)

// Without PMI (srun --mpi=none, or a cluster whose MpiDefault is none) a
// task still has SLURM's view of the step in its environment: the step's
// nodes (SLURM_STEP_NODELIST, a host list such as "n[01-04,7]"), how many
// tasks each runs (SLURM_STEP_TASKS_PER_NODE, such as "2(x3),1"), and its
// own node and local ids. With the default block distribution, task r runs
// on the node whose range of ranks holds r, as local task r minus the
// ranks before it; every task can then compute every other's address if
// each listens on a port all agree on: base + local id, the base derived
// from the job and step ids (or EnvPortBase). The task checks that its own
// node and local id are what the computation says (a cyclic or arbitrary
// distribution would not be) and refuses to start otherwise.

// EnvPortBase sets the first port of the computed addresses (SLURM's
// environment without PMI): local task i of a node listens on base+i.
const EnvPortBase = "COHORT_SLURM_PORT_BASE"

// maxHostList bounds the expansion of a host list or a tasks-per-node list.
const maxHostList = MaxSize

// The range ports are derived from when EnvPortBase is not set: 10000 to
// 32767, below Linux's default ephemeral range (32768–60999), so that a
// connection's source port on a busy node does not hold a rank's port.
const (
	portLow   = 10000
	portRange = 32768 - portLow
)

// expandHostList expands a SLURM host list: comma-separated names, each
// with bracketed ranges ("n[1-3,7]", "r[1-2]n[01-02]"; leading zeros keep
// their width).
func expandHostList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty host list")
	}
	var out []string
	for _, part := range splitTop(s) {
		names, err := expandHost(part, maxHostList-len(out))
		if err != nil {
			return nil, err
		}
		if len(out)+len(names) > maxHostList {
			return nil, fmt.Errorf("the host list names more than %d hosts", maxHostList)
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandHost expands one name with bracketed ranges, at most limit names.
func expandHost(s string, limit int) ([]string, error) {
	if s == "" {
		return nil, errors.New("empty host name in the list")
	}
	open := strings.IndexByte(s, '[')
	if open < 0 {
		if strings.ContainsAny(s, "]") {
			return nil, fmt.Errorf("host %q has a ']' without '['", clip(s))
		}
		return []string{s}, nil
	}
	end := strings.IndexByte(s[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("host %q has an unclosed '['", clip(s))
	}
	end += open
	prefix, body, rest := s[:open], s[open+1:end], s[end+1:]
	if strings.ContainsAny(prefix, "]") || strings.ContainsAny(body, "[") {
		return nil, fmt.Errorf("host %q: bad brackets", clip(s))
	}
	tails, err := expandHost(rest, limit)
	if rest == "" {
		tails, err = []string{""}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 10, 32)
		b, err2 := strconv.ParseUint(hi, 10, 32)
		if err1 != nil || err2 != nil || a > b {
			return nil, fmt.Errorf("host %q: bad range %q", clip(s), clip(r))
		}
		width := len(lo)
		for n := a; n <= b; n++ {
			num := strconv.FormatUint(n, 10)
			if len(num) < width {
				num = strings.Repeat("0", width-len(num)) + num
			}
			for _, t := range tails {
				if len(out) >= limit {
					return nil, fmt.Errorf("the host list names more than %d hosts", maxHostList)
				}
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}

// expandTasksPerNode expands SLURM's tasks-per-node list: "2(x3),1" is
// 2, 2, 2, 1.
func expandTasksPerNode(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasSuffix(part, ")") || !strings.HasPrefix(part[i+1:], "x") {
				return nil, fmt.Errorf("bad tasks-per-node entry %q", clip(part))
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 1 || r < 1 || r > maxHostList || len(out)+r > maxHostList {
			return nil, fmt.Errorf("bad tasks-per-node entry %q", clip(part))
		}
		for i := 0; i < r; i++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// slurmLayout is where every task of a block-distributed step runs.
type slurmLayout struct {
	hosts []string // by node id
	node  []int    // by rank: node id
	local []int    // by rank: local id on its node
}

// blockLayout computes the layout of size tasks over nodes with the
// given tasks per node, block distribution.
func blockLayout(nodes []string, perNode []int, size int) (slurmLayout, error) {
	if len(nodes) != len(perNode) {
		return slurmLayout{}, fmt.Errorf("%d nodes but %d tasks-per-node entries", len(nodes), len(perNode))
	}
	l := slurmLayout{hosts: nodes}
	for n, c := range perNode {
		for i := 0; i < c; i++ {
			l.node = append(l.node, n)
			l.local = append(l.local, i)
		}
	}
	if len(l.node) != size {
		return slurmLayout{}, fmt.Errorf("the nodes run %d tasks in all, the step has %d", len(l.node), size)
	}
	return l, nil
}

// portBase is the first port of the step's computed addresses.
func portBase(getenv func(string) string, cluster, job, step string, maxLocal int) (int, error) {
	if v := strings.TrimSpace(getenv(EnvPortBase)); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1024 || p+maxLocal > 65535 {
			return 0, fmt.Errorf("%s=%q: want a port from 1024 to %d", EnvPortBase, v, 65535-maxLocal)
		}
		return p, nil
	}
	h := fnv.New32a()
	h.Write([]byte(cluster + "\x00" + job + "\x00" + step))
	span := portRange - maxLocal
	if span < 1 {
		return 0, fmt.Errorf("%d tasks on one node do not fit the port range; set %s", maxLocal, EnvPortBase)
	}
	return portLow + int(h.Sum32()%uint32(span)), nil
}

// fromSLURMEnv builds the bootstrap from SLURM's variables alone (no PMI);
// b already holds the job name, secret and options.
func fromSLURMEnv(ctx context.Context, sys system, b Bootstrap, cluster, job, step string) (Bootstrap, error) {
	getenv := sys.getenv
	bad := func(format string, args ...any) (Bootstrap, error) {
		return Bootstrap{}, fmt.Errorf("%w: under SLURM without PMI (use `srun --mpi=pmi2` to avoid this mode): %s", ErrBootstrap, fmt.Sprintf(format, args...))
	}
	num := func(name string) (int, error) {
		v := strings.TrimSpace(getenv(name))
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a number", name, v)
		}
		return n, nil
	}
	var vals [4]int
	for i, name := range []string{"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NODEID", "SLURM_LOCALID"} {
		v, err := num(name)
		if err != nil && name == "SLURM_STEP_NUM_TASKS" {
			v, err = num("SLURM_NTASKS")
		}
		if err != nil {
			return bad("%v", err)
		}
		vals[i] = v
	}
	rank, size, nodeID, localID := vals[0], vals[1], vals[2], vals[3]
	if size < 1 || size > MaxSize || rank >= size {
		return bad("rank %d of %d tasks", rank, size)
	}
	nodelist := getenv("SLURM_STEP_NODELIST")
	if nodelist == "" {
		nodelist = getenv("SLURM_JOB_NODELIST")
	}
	nodes, err := expandHostList(nodelist)
	if err != nil {
		return bad("SLURM_STEP_NODELIST=%q: %v", clip(nodelist), err)
	}
	tpn := getenv("SLURM_STEP_TASKS_PER_NODE")
	perNode, err := expandTasksPerNode(tpn)
	if err != nil {
		return bad("SLURM_STEP_TASKS_PER_NODE=%q: %v", clip(tpn), err)
	}
	// On one node every distribution places task r as local task r.
	if d := getenv("SLURM_DISTRIBUTION"); d != "" && !strings.HasPrefix(d, "block") && len(nodes) > 1 {
		return bad("SLURM_DISTRIBUTION=%s: only the block distribution can be computed", d)
	}
	layout, err := blockLayout(nodes, perNode, size)
	if err != nil {
		return bad("%v", err)
	}
	if layout.node[rank] != nodeID || layout.local[rank] != localID {
		return bad("task %d runs as local task %d of node %d, not %d of node %d as the block distribution says (was srun given -m or --distribution?)",
			rank, localID, nodeID, layout.local[rank], layout.node[rank])
	}
	maxLocal := 0
	for _, c := range perNode {
		maxLocal = max(maxLocal, c)
	}
	base, err := portBase(getenv, cluster, job, step, maxLocal)
	if err != nil {
		return bad("%v", err)
	}
	addrs := make([]string, size)
	for r := range addrs {
		host := layout.hosts[layout.node[r]]
		if len(nodes) == 1 {
			host = "127.0.0.1"
		}
		addrs[r] = net.JoinHostPort(host, strconv.Itoa(base+layout.local[r]))
	}
	// Peers dial the node's name, whatever address it resolves to there:
	// listen on all of this node's addresses (every connection is
	// authenticated before a frame is read).
	switch {
	case getenv(EnvListenHost) != "":
		b.Listen = strings.TrimSpace(getenv(EnvListenHost))
	case len(nodes) == 1:
		b.Listen = "127.0.0.1"
	default:
		b.Listen = "0.0.0.0"
	}
	b.Rank, b.Size = rank, size
	b.ListenPort = base + localID
	b.Exchange = &fixedTable{addrs}
	b.Source = fmt.Sprintf("SLURM environment (no PMI): ports %d+local id on %s", base, clip(nodelist))
	if rank == 0 && sys.notice != nil {
		fmt.Fprintf(sys.notice, "cohort: no PMI (srun without --mpi=pmi2): the %d tasks' addresses are computed from SLURM's environment: nodes %s, port %d + local task id (set %s to choose another)\n",
			size, clip(nodelist), base, EnvPortBase)
	}
	if err := b.Validate(); err != nil {
		return Bootstrap{}, err
	}
	return b, nil
}

// fixedTable is an Exchanger whose table is known in advance (a pointer,
// so that a Bootstrap holding it stays comparable).
type fixedTable struct{ addrs []string }

func (t *fixedTable) Exchange(_ context.Context, addr string) ([]string, error) {
	return append([]string(nil), t.addrs...), nil
}

func (*fixedTable) Close() error { return nil }
