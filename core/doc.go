// Package core is the kernel contract that every cohort protocol follows.
//
// A protocol (failure detector, membership, stability, replication) is a
// deterministic state machine: a [Machine]. It never does I/O, never starts a
// goroutine, never takes a lock, never reads the wall clock and never uses a
// global random source. Everything it needs from the world comes through its
// [Env]: its own [NodeID], the current (monotonic) time, sending a [Msg],
// setting a [Timer], a per-node seeded *rand.Rand, and emitting an [Event] to
// the layers above and to observers.
//
// The same machine is driven by two worlds: the simulator (package sim), with
// virtual time, a modelled network and injected faults, and the real host
// (package host), with real timers over TCP. What the simulator measures is
// therefore a property of the shipped code.
//
// A caller drives a machine like this:
//
//  1. Build it from its Config (every protocol has DefaultConfig and Validate).
//  2. Call Start once, handing it the Env. The machine may send and set
//     timers from Start.
//  3. For every message that arrives for it, call Receive(from, msg).
//  4. When a timer it set expires (and was not cancelled), call Fire(timer)
//     with the very value it passed to SetTimer.
//  5. Deliver events from other layers with Handle.
//  6. Never call two methods of one machine concurrently; a machine is
//     single-threaded by contract.
//
// Several machines share one node through a [Stack], which routes messages by
// the [Proto] of their [Kind], routes timers back to the layer that set them,
// and passes every emitted event to the other layers and out to the host.
//
// Message kinds are numbers that travel on the wire: each protocol owns one
// [Proto] (the high byte of a Kind) and numbers its kinds in an append-only
// list.
package core
