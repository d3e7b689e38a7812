// Package sim is cohort's deterministic discrete-event simulator. It runs the
// very same protocol machines (core.Machine) that the real host runs, on a
// virtual clock, over a modelled network, with faults injected as data.
//
// A World holds nodes, each running one machine (usually a core.Stack). Events
// — node starts, message deliveries, timer firings, scheduled functions — sit
// in one queue ordered by (time, sequence number); the sequence number is
// unique and increasing, so the order is total. Every node has its own random
// source derived from the world's seed and the node id (and incarnation), and
// the network has another. A run is therefore a pure function of its seed and
// its inputs, and its TraceHash proves it: the same seed twice gives the same
// hash.
//
// Use:
//
//	w := sim.New(sim.Config{Seed: 42, Network: sim.Constant(time.Millisecond)})
//	for i := 0; i < n; i++ {
//		w.Add(fd.NewGossip(...))
//	}
//	w.OnEmit(func(at time.Duration, id core.NodeID, e core.Event) { ... })
//	w.CrashAt(30*time.Second, 7)
//	w.RunUntil(10 * time.Minute)
//
// Messages are delivered as the same Go value that was sent (no encoding);
// core.MsgSize gives their size for bandwidth models. Between a pair, delivery
// is FIFO unless Config.Reorder is set. A crashed node's pending timers and
// in-flight messages are discarded; Recover starts a fresh machine under the
// same id with a fresh incarnation (and random source). With
// Config.RefuseDead, a message that reaches a crashed node also hands its
// sender core.PeerHint{Refused: true} that long after, as a host refuses a
// connection to a port where nothing listens.
//
// CPU model: with SendOverhead / RecvOverhead set (LogP's o_s and o_r), a node
// sends and receives messages one at a time, so a node that many others talk
// to (a coordinator) queues them, as it would on a real host.
//
// A World is single-threaded; experiments run many worlds in parallel.
//
// # Network models
//
// Config.Network chooses how messages travel. Every model is deterministic
// given the seed; all keep each pair of nodes FIFO (the world enforces it
// for models that could reorder, unless Config.Reorder is set).
//
// Constant(d): every message takes d.
//
// Uniform(min, max): each message's latency is drawn uniformly from
// [min, max] with the network's random source.
//
// LogP overheads (any model): Config.SendOverhead o_s and RecvOverhead o_r
// serialize a node's sends and receives, so a message sent at t by a node
// whose previous send left at s departs at max(t, s) + o_s, and one reaching
// a node whose CPU is busy until c is handled at max(arrival, c) + o_r.
//
// Graph (NewGraph, GraphConfig): the random topology of Friedman, Manor and
// Guo, "Scalable Stability Detection Using Logical Hypercube", §4.1: an
// Erdős–Rényi graph G(V, P) over the nodes (vertex i is node i) plus
// optional router-only vertices, P from 0.01 to 0.04, duplex links of
// 100 Mbit/s per direction, propagation uniform in [0, 1 ms]. Disconnected
// draws are connected deterministically (each component, by smallest
// vertex, gets one edge to a random vertex of the earlier ones) rather than
// redrawn. Routing is by shortest path in hops, from a breadth-first search
// per destination that visits neighbours in increasing id order (ties go to
// the lowest-id discoverer); next-hop tables are built lazily, one per
// destination that receives a message, 4·V bytes each, so 4·V² bytes at
// worst: 16 MB at V = 2000, the paper's largest size; do not use it for
// tens of thousands of nodes. Messages are stored and forwarded: each hop is
// an event of the world, and on a link
//
//	start   = max(arrival at the vertex, link free)   (FIFO queue per link)
//	tx      = size·8 / bandwidth
//	arrival = start + tx + propagation delay
//
// Graph.Stats reports the paper's indices: message count, hop count (each
// message counted at each link it crosses), average network load (the
// time-average number of messages on all links — waiting, transmitting or
// propagating — computed as an exact integral where the paper sampled every
// 1 ms; LoadSince gives per-round averages), the maximum queue size (messages
// waiting on one link, not counting the one being transmitted) and link
// utilization.
//
// Switch (NewSwitch, SwitchConfig): the switch-contention latency of Varma,
// Wang, Mueller, Engelmann and Scott, "Scalable, Fault-Tolerant Membership
// for MPI Tasks on HPC Systems", §7.2 and Figure 7: on one Gigabit switch the
// latency is flat up to twelve communicating nodes and rises linearly after,
//
//	L(c)    = Base + PerNode·max(0, c − Knee)      Base 118 µs, Knee 12
//	arrival = max(send + L(c), previous arrival at the destination + size·8/PortBits)
//
// where c is the number of nodes with a message in the switch (dynamic), or
// fixed at the job size (StaticNodes, the paper's substitution of L(N) into
// its Equation (1)). The port term serializes messages to one destination,
// the mechanism the paper gives for a parent with 2 or 4 children suffering
// more than pairs. The paper gives the slope only as a plot: PerNode's
// default of 5 µs is an assumption to calibrate.
//
// Torus (NewTorus, BlueGeneL): the distance model of the same paper, §7.1:
// on BlueGene/L's 8×8×8 torus every hop costs the point-to-point latency
// L = 4.6 µs, so latency = Base + PerHop·hops, hops being the Manhattan
// distance with wraparound between the nodes' coordinates (ids mapped in
// order, x fastest; Mesh drops the wraparound, for partitions smaller than a
// midplane).
//
// WithSpikes(n, spikes...): n plus Extra for messages sent in [From, Until),
// all or only between given nodes; overlapping spikes add up.
//
// # Faults as data
//
// A Plan is a list of Fault values — Crash, Recover, Pause (a live node's
// loop stops for a while: what reaches it is held and handed over, late,
// when it resumes), CrashRandom, Cut, Heal, Partition, Loss, DelaySpike,
// HealAll — applied to a world with
// Plan.Apply(w, factory) (factory builds the machines of restarting nodes).
// A Cut is a partial partition: the link between two nodes is down, both
// ways or, with OneWay, only from A to B, while both still reach everyone
// else; a message sent across it is dropped, not delayed.
// Overlapping windows combine: the largest loss applies, partitions meet,
// cuts count per direction. Each fault prints itself, and World.FaultLog
// records what happened, with the victims drawn by CrashRandom.
// Swarm(seed, n, horizon, opts) draws a random plan from a seed — each kind
// of fault switched on or off per seed, crashes capped at a fraction of the
// nodes, every window healed by the horizon — and ends it with HealAll:
// after the horizon comes the liveness phase, in which a test demands
// convergence within a bound. One-way cuts and partial partitions of small
// groups (SwarmOptions.MaxOneWayCuts, MaxPartialPartitions) are drawn only
// when asked for, so the plans of existing seeds stay what they were.
//
// # Invariant checkers
//
// A Checker registered with World.AddChecker sees every delivered message,
// every emitted event, every crash and recovery, and the end of the run
// (World.Finish). Its first error stops the world and becomes a *Violation
// (World.Err, World.RunChecked) that gives the invariant, the time, the
// node, the seed, the plan, the fault log and the command that replays the
// run (World.SetReplay, ReplayCommand). CrashDetected (every crash is
// reported core.Failed by every live node within a bound) and
// NoFalseFailure (no live, connected node is reported core.Failed) are the
// generic ones; protocol packages add their own. Package simtest chooses the
// seeds: simtest.Seeds(t, n) gives n seeds, or only the one named by -seed
// or COHORT_SEED.
//
// A swarm test, end to end:
//
//	for _, seed := range simtest.Seeds(t, 20) {
//		w := sim.New(sim.Config{Seed: seed, Network: sim.Uniform(100*time.Microsecond, 2*time.Millisecond)})
//		for i := range n {
//			w.Add(newNode(core.NodeID(i)))
//		}
//		plan := sim.Swarm(seed, n, horizon, sim.DefaultSwarmOptions())
//		if err := plan.Apply(w, newNode); err != nil {
//			t.Fatal(err)
//		}
//		w.AddChecker(&sim.CrashDetected{Bound: bound, After: plan.HealedAt()})
//		w.SetReplay("go test ./fd -run TestSwarm -seed=%d")
//		if err := w.RunChecked(horizon + 2*bound); err != nil {
//			t.Fatal(err)
//		}
//		if err := w.Finish(); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// # Costs
//
// The kernel processes several million events per second on one core
// (BenchmarkPing); on a Graph every hop is an event. A node of a trivial
// machine costs about 75 bytes of kernel state once started, its random
// source (32 bytes) is created on first use, and the event queue keeps the
// capacity its busiest moment needed (about 67 bytes per node after 100,000
// simultaneous starts); see BenchmarkMemoryPerNode.
package sim
