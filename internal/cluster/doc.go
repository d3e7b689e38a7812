// Package cluster runs a cohort job as real operating-system processes on
// one machine: each process is `cohort node`, a host (package host) driving
// a stack of a failure detector (package fd) and the membership service
// (package member) over the authenticated TCP transport on 127.0.0.1, and an
// orchestrator starts them, watches what they report, kills some of them and
// checks that the survivors agree. It backs the commands `cohort node`,
// `cohort cluster` and `cohort bench membership`.
//
// # One node
//
// A node learns its place in the job from the environment, never from the
// command line (a secret on the command line is visible to every user of
// the machine):
//
//	COHORT_JOB_ID   the job's name; peers of another job are refused
//	COHORT_NODE_ID  this node's id, a decimal number listed in COHORT_NODES
//	COHORT_NODES    "0=127.0.0.1:7000,1=127.0.0.1:7001,…" or the path of a
//	                file with one id=address per line (# starts a comment)
//	COHORT_SECRET   the job secret in hex, at least 16 bytes
//
// [LoadBootstrap] reads and checks them; [RunNode] builds the node
// ([NewNodeStack], [NewCodec]) and runs it until its context ends:
//
//	boot, err := cluster.LoadBootstrap(os.Getenv)
//	err = cluster.RunNode(ctx, boot, cluster.NodeOptions{Fanout: 4,
//		Detector: cluster.DetectorBRR, Events: eventsFile})
//
// The node writes every event of its machines as one JSON line
// ([host.EventLine]) to NodeOptions.Events: the views it installs
// (member.ViewInstalled), the root's stabilization times (member.Stabilized),
// suspicions and failures, and this package's own events ([PingPong],
// [ProcessTime], [Hint], [Listening], [Exit]). [DecodeRecord] reads them
// back.
//
// # A job
//
// [Start] launches n nodes as child processes (by default the running
// executable with the argument "node"), each with its own free port on
// 127.0.0.1 and a fresh random job secret in its environment, and
// GOMAXPROCS=1 unless the caller set it (a node's loop is one goroutine, and
// many nodes share a few cores). Ports are chosen by listening on port 0 and
// closing; a node that then finds its port taken exits before it starts,
// and Start launches the whole job again with new ports (the only window in
// which another process can take a port is before any node has started).
// Nodes run supervised: each announces [Listening], waits for the word
// "start" on its standard input (so that every node's detector starts
// watching peers that are already up), takes "peer <id>=<addr>" lines
// there to learn where a joiner listens, and exits when its standard input
// closes, so a node never outlives its orchestrator, even one killed with
// SIGKILL.
//
// Each node writes its event stream to a file (n<id>.jsonl in
// JobConfig.EventsDir, or in a temporary directory) and its logs to
// n<id>.log; the orchestrator tails the files, never a pipe, so that a
// slow orchestrator can never block a node's loop. It merges them into one
// ordered list of [Record] values together with its own records (spawns,
// kills, exits, also kept in job.jsonl), and keeps a [Tracker] that knows
// every node's current view and prints one line per view change.
// [Job.Kill] sends SIGKILL; [Job.Spawn] adds a node that joins the running
// group; [Job.WaitAgreed] waits until every live node has installed the
// same view and that view holds exactly the live nodes; [Job.Close] stops
// every process and reaps it.
//
// # The membership benchmark
//
// [RunBench] measures the stabilization time T_s of the membership paper
// (Varma et al., ICS'06, §4 and §7) on real processes: for each job size n
// and fan-out a it kills one non-root node, reads T_s from the root's
// member.Stabilized event (both ends on the root's own monotonic clock),
// admits a fresh node so that the next sample starts from n members again,
// and sets the result beside the paper's base model
// T_s = 2·L·(H−1) + O_cp·H (model.StabilizationTime) with L and O_cp
// measured in the same run: L is half the median round trip of a ping-pong
// between the root and its first child over the same transport and host
// loop, O_cp the median time a node spends handling the FAILED_NODE
// message (recomputing its tree and passing the message on). It also
// measures the delay of each tree hop during the stabilization itself and
// gives the model with that delay in place of L: on a machine with fewer
// cores than nodes, every survivor's detector fires within the same few
// milliseconds as the stabilization, and the hops wait for a core (the
// analogue of the paper's contention model, §7.2).
//
// Beside T_s it measures a baseline in the same job: the tree echo
// ([TreeEcho], [TreeEchoTime]). Right after the ping-pong the root sends a
// message down the radix tree of the whole view; every node forwards it to
// its children and answers its parent once its subtree has answered. That is
// the message pattern of a stabilization (FAILED_NODE down, FAILURE_ACK up)
// with nothing computed, so the echo time is the floor of T_s on this machine
// and T_s/echo is what the protocol itself costs above it. With n processes
// on fewer cores than n, the floor is set by how fast the kernel wakes the n
// processes one after another, not by L.
//
// With BenchConfig.InProcess (`cohort bench membership --in-process`) the n
// nodes run as n hosts inside the benchmark's own process (StartInProcess):
// each with its own event loop and its own authenticated TCP transport on
// 127.0.0.1, built by NewNode exactly as `cohort node` builds it; a kill
// cancels a node's loop and closes its sockets without a word. This measures
// the protocol and the kernel's TCP stack without the cost of waking n
// processes, and the same sample code computes every figure in both modes.
package cluster
