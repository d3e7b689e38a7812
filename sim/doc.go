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
// same id with a fresh incarnation (and random source).
//
// CPU model: with SendOverhead / RecvOverhead set (LogP's o_s and o_r), a node
// sends and receives messages one at a time, so a node that many others talk
// to (a coordinator) queues them, as it would on a real host.
//
// A World is single-threaded; experiments run many worlds in parallel.
package sim
