// Package bench holds cohort's benchmarks, the work behind `cohort bench`:
//
//   - membership ([RunBench], [WriteBenchTable]): the stabilization time
//     T_s on real processes (or hosts in one process), beside the model;
//   - multicast ([RunMulticastBench], [WriteMulticastTable]): throughput,
//     latency and the survivors' same-view delivery across a kill;
//   - the OSU-style p2p, bw and allreduce ([OSU], [RunOSURank],
//     [WriteOSUGoals]): package comm against raw TCP and Open MPI;
//   - overhead ([RunOverhead]): what failure detection costs N-Queens
//     (Phoenix §6.1, Table 2);
//   - flood ([Flood], [RunFloodRank]): a two-rank ping-pong's latency and
//     the failure detector's verdicts while connections without the job
//     secret flood a rank's TCP listener;
//   - resilience ([RunResilience]): the Jacobi stencil's time to solution
//     under one failure schedule with checkpoints at several intervals and
//     spares, with spares alone and with replication r = 2, beside Young's
//     model.
//
// The membership and multicast benchmarks start their jobs through package
// runner, whose nodes run the probes and load of package workload; the
// OSU-style ones and overhead start ranks through package launch. All of
// them summarize samples with the statistics of stats.go (Student-t 95%
// intervals, medians).
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
// message (recomputing its tree and passing the message on; each node
// writes that record once it has installed the view, after the
// stabilization, so that the measure does not weigh on what it measures). It also
// measures the delay of each tree hop during the stabilization itself and
// gives the model with that delay in place of L: on a machine with fewer
// cores than nodes, every survivor's detector fires within the same few
// milliseconds as the stabilization, and the hops wait for a core (the
// analogue of the paper's contention model, §7.2).
//
// Beside T_s it measures a baseline in the same job: the tree echo
// ([workload.TreeEcho], [record.TreeEchoTime]). Right after the ping-pong the root sends a
// message down the radix tree of the whole view; every node forwards it to
// its children and answers its parent once its subtree has answered. That is
// the message pattern of a stabilization (FAILED_NODE down, FAILURE_ACK up)
// with nothing computed, so the echo time is the floor of T_s on this machine
// and T_s/echo is what the protocol itself costs above it. With n processes
// on fewer cores than n, the floor is set by how fast the kernel wakes the n
// processes one after another, not by L.
//
// The echo is timed two ways. The series ([record.TreeEchoTime]) runs
// echoes back to back, each finding the threads awake and the caches
// warm from the one before. A failure finds the job idle: its threads
// asleep, its processors halted, its caches taken by other work. So
// before every failure, after the same idle wait (BenchConfig.Gap), the
// root runs one echo alone ([workload.StartEcho], [record.EchoOnce]), and
// the goal compares T_s to that floor. On the 2-core machine this was
// built on, an echo alone after 20 ms of idleness took three to four times
// the series' median and three times its processor time per node, and a
// stabilization a third longer than one started right after other work.
//
// With BenchConfig.InProcess (`cohort bench membership --in-process`) the n
// nodes run as n hosts inside the benchmark's own process
// ([runner.StartInProcess]):
// each with its own event loop and its own authenticated TCP transport on
// 127.0.0.1, built by [runner.NewNode] exactly as `cohort node` builds it; a kill
// cancels a node's loop and closes its sockets without a word. This measures
// the protocol and the kernel's TCP stack without the cost of waking n
// processes, and the same sample code computes every figure in both modes.
package bench
