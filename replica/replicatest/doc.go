// Package replicatest is package replica's simulation swarm, shared by
// replica's tests and by `cohort sim swarm --protocol replica`. A run is
// a job of 2–5 logical ranks × 1–4 replicas, every physical process a real
// stack — a detector, the radix-tree membership (package member) and
// package replica's layer — under a program that is the same function of
// the run's seed at every replica of a rank: sends to random ranks,
// receives, and decisions (each replica proposes a value of its own, so
// only the protocol can make them agree), with compute times drawn from
// each process's own random source, so that replicas run at different
// speeds. Replicas crash at random steps: in most runs at most R−1 of a
// rank (invisible to the program), in some runs every replica of one
// rank. Links are reliable (TCP): a message is lost only when a crash
// drops it; latencies are random. Each link has two lanes, as comm's
// transport does: Data in one, every other message of the layer in the
// other, each in send order, so that an acknowledgement, a commit, a
// decision or a Fin may overtake Data sent before it. In odd seeds the
// program's channels are control channels (replica.Send.Control), whose
// data travels in the second lane.
//
// The detector is an oracle: each live process declares a crashed one
// failed after its own random delay (5–40 ms), so views remove exactly the
// crashed processes and "RankFailed exactly when every replica died" can
// be checked. The checker, on every event:
//
//   - no message is delivered twice at any replica, and each channel is
//     delivered in sequence order (1, 2, 3, …);
//   - every copy of a message (each replica's send, each delivery) has the
//     same contents: the replicas of a rank agree on what they send (their
//     payloads fold in every decision so far, so divergent decisions show);
//   - every replica of a rank gets the same value for each decision, in
//     order;
//   - RankFailed names only ranks whose replicas all crashed, once per
//     process; ReplicaLost names only crashed processes;
//
// and after the run: every live process finished its program; for every
// pair of live ranks, every live replica of the destination delivered
// every message the source's program sent; every live process reported
// each dead rank failed; no backup table holds anything.
//
// To run one seed:
//
//	err := replicatest.Swarm(seed)
package replicatest
