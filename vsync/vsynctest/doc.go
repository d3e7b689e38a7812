// Package vsynctest is package vsync's simulation swarm, shared by vsync's
// tests and by `cohort sim swarm --protocol vsync`. The swarm runs real node
// stacks — the gossip failure detector of package fd (binary round-robin),
// the radix-tree membership (member), a stability detector and package
// vsync's layer, under an application that multicasts every few
// milliseconds — on the simulator, with crashes, joins, partitions, cut
// links, message loss and delay spikes drawn from the seed, and checks on
// every event:
//
//   - per-sender FIFO and no duplicates: each node delivers sender s's
//     messages of view v as 1, 2, 3, … exactly once;
//   - same-view delivery (Varma et al. §2.1): a message is delivered in the
//     view it was sent in (the node's current view), with the payload its
//     sender sent, and every node that moves from view v to view w
//     delivered exactly the same messages in v;
//   - stability (Friedman et al. §1): no vector is declared stable while a
//     live member of its view holds less (as that member reported in its
//     own Progress), and each node's vectors of one view only grow;
//   - after the faults heal, every live node ends in the same view, has
//     delivered the same messages in it, and holds no buffered message;
//     the buffers never exceed a bound that follows from the window.
//
// To run one seed (with FakeStable, or RealStable over package stable's
// four protocols):
//
//	err := vsynctest.Swarm(seed, vsynctest.FakeStable)
//
// An error wrapping ErrMembershipStuck means the membership itself stayed
// split.
package vsynctest
