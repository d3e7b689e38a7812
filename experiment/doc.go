// Package experiment reproduces the figures of the papers cohort is built
// on. An experiment is a sweep of independent, deterministic runs (each a
// simulation or a Monte-Carlo batch seeded from the experiment's seed), whose
// results are gathered in a fixed order and written as CSV files, PNG and SVG
// plots and a short markdown report that puts our figures beside the paper's
// and lists which checks passed.
//
// The command `cohort sim <name>` runs an experiment. Its common flags are
// --seed, --out (default out/<name>), --quick (a smaller sweep for a quick
// look) and --workers (default GOMAXPROCS); each experiment may add its own.
//
// Writing an experiment:
//
//  1. Define a type that implements [Experiment]: Flags registers its own
//     flags on the command's FlagSet, Run does the work.
//  2. Register it from an init function with [Register], giving its name and
//     a one-line summary.
//  3. In Run, build a list of [Task] values, one per independent run, each
//     with a stable Key (the run's seed is derived from the experiment's seed
//     and the key, so a run's result does not depend on which other runs are
//     in the sweep) and call [RunAll]. The results come back in the order of
//     the tasks, whatever the number of workers and whatever order they
//     finished in, so the outputs are identical for one seed.
//  4. Write the outputs through the [Session]: [Session.WriteCSV],
//     [Session.Figure] (PNG and SVG through gonum.org/v1/plot, placed in
//     the report beside a description of the paper's figure),
//     [Session.Table], [Session.Text] and [Session.Check]. [Execute] writes
//     report.md at the end and reports failed checks as [ErrChecksFailed].
//
// Nothing in the outputs depends on the wall clock or on the number of
// workers: a test runs an experiment with one and with two workers and
// compares the files byte for byte.
//
// The experiments:
//
//   - fd-detect: P2P-MPI §5.3, Fig. 13, detection time of the gossip
//     detector against n (BRR, DBRR, RR, random), against
//     model.DefaultCleanup and fd.DetectionBound. It runs a
//     [GossipCluster], which `cohort demo` uses too.
//   - fd-reliability: P2P-MPI §5.2, Fig. 12, a Monte-Carlo over failure
//     patterns of the probability that BRR or DBRR gossip stops reaching
//     some live node, with exact enumeration for n ≤ 16.
//   - fd-heartbeat: Phoenix §6.2, Fig. 2, heartbeats per process per
//     T_interval, detector messages against n, and heartbeats saved by
//     application traffic.
//   - membership-ts: membership paper §4 and §7, Figs. 4–8, the
//     stabilization time T_s of the real member machines after one crash
//     against n for a = 2, 4, 8, on constant-latency (TCP and BG/L
//     parameters), 3D-torus and switch-contention networks, beside the
//     base, distance and contention models of package model, from n = 4
//     to 65,536 (a world is O(n): about 1 KB per member, the machines of
//     a job share their views); --mem-budget caps n if a sweep would not
//     fit.
//   - stability: the stability paper §4, Figs. 8–14: Coord, FullDist,
//     S_Coord and CubeFullDist (package stable) on random topologies of
//     100 Mbit/s links (sim.NewGraph), n = 10 … 1,900 with 50 senders:
//     RTT of the first and last node to finish a round, network load,
//     maximum queue, hop and message counts, topology sensitivity, and
//     CubeFullDist with 0–5 failed neighbours of the coordinator.
package experiment
