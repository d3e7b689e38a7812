// Package runner runs a cohort job as real operating-system processes on
// one machine: each process is `cohort node`, a host (package host) driving
// a stack of a failure detector (package fd) and the membership service
// (package member) over the authenticated TCP transport on 127.0.0.1, and an
// orchestrator starts them, watches what they report, kills some of them and
// checks that the survivors agree. It backs the commands `cohort node` and
// `cohort cluster`, and the benchmarks of package bench start their jobs
// through it.
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
// ([NewNode], [NewCodec]) and runs it until its context ends:
//
//	boot, err := runner.LoadBootstrap(os.Getenv)
//	err = runner.RunNode(ctx, boot, runner.NodeOptions{Fanout: 4,
//		Detector: runner.DetectorBRR, Events: eventsFile})
//
// The node writes every event of its machines as one JSON line
// ([host.EventLine]) to NodeOptions.Events: the views it installs
// (member.ViewInstalled), the root's stabilization times (member.Stabilized),
// suspicions and failures, and the events of package record
// ([record.PingPong], [record.ProcessTime], [record.Hint],
// [record.Listening], [record.Exit]), which [record.DecodeRecord] reads
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
// Nodes run supervised: each announces [record.Listening], waits for the word
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
// ordered list of [record.Record] values together with its own records (spawns,
// kills, exits, also kept in job.jsonl), and keeps a [tracker.Tracker] that knows
// every node's current view and prints one line per view change.
// [Job.Kill] sends SIGKILL; [Job.Spawn] adds a node that joins the running
// group; [Job.WaitAgreed] waits until every live node has installed the
// same view and that view holds exactly the live nodes; [Job.Close] stops
// every process and reaps it.
//
// [StartInProcess] runs the n nodes as n hosts inside the calling process
// instead (each with its own event loop and TCP transport), with the same
// interface as a [Job].
package runner
