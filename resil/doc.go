// Package resil makes a parallel program that knows nothing of failures
// continue at the same ranks when processes die: spare processes take the
// ranks of the dead ones, and every rank goes back to the last
// coordinated checkpoint, kept in the memory of other ranks, without a
// relaunch (the global restart of Reinit, the in-memory checkpoints and
// spares of Fenix; Varma et al.'s "a spare node ... to assign the failed
// work to using the old MPI rank").
//
// What a program writes: its main loop inside a function that takes the
// state of the last checkpoint, and a call to [Job.Checkpoint] every K
// iterations; nothing else about failures.
//
//	s, err := comm.Init(ctx, comm.AllowSpares()) // cohort run -n N --spares S, or COHORT_SPARES=S srun
//	defer s.Finalize(ctx)
//	j, err := resil.New(s, resil.DefaultConfig())
//	err = j.Run(ctx, func(ctx context.Context, c *comm.Comm, state []byte, epoch int) error {
//		it, grid := decode(state) // nil state: the first attempt
//		for ; it < iters; it++ {
//			if it%K == 0 {
//				if err := j.Checkpoint(ctx, encode(it, grid)); err != nil {
//					return err
//				}
//			}
//			if err := step(ctx, c, grid); err != nil {
//				return err
//			}
//		}
//		return nil
//	})
//	if j.Rank() == 0 { … print the result … }
//
// # How it works
//
// A job of N ranks and S spares has N+S processes ([comm.Session.Processes]);
// the rank→process map starts as rank r on process r. Each attempt runs
// the function at the N processes of the map, on a communicator built for
// the attempt ([comm.Comm.Create]: a new context, so no message of an
// aborted attempt matches in the next); the spares wait. An attempt ends
// at every process with an agreement ([comm.Comm.Agree]) on whether every
// rank's function returned nil, then a [comm.Comm.Shrink] that gives every
// survivor the same set of failed processes. If no process of the map
// failed, Run returns. Otherwise every survivor computes, from the agreed
// survivors alone, the same new map: the failed ranks, in rank order, take
// the lowest-numbered processes that hold no rank. The survivors gather
// what each holds of the checkpoints, go back to the newest epoch any of
// them knows committed, move each rank's state to its new process and its
// buddies from the first survivor that holds it, agree that the round
// succeeded, and start the function again at every rank. A failure during
// a recovery fails the round at every survivor; they shrink again and
// begin another.
//
// A checkpoint is two-phase: every rank keeps its state and sends a copy
// to k buddies (on other hosts when the ranks span several, see
// [Config]), and once each has stored every copy it is
// owed, an agreement among the ranks commits the epoch. A commit therefore
// means that every rank's state of that epoch is at every live keeper,
// which is why a recovery may go back to the newest epoch that any
// survivor knows committed, and why each process keeps the previous epoch
// until it learns of the next one's commit.
//
// # Errors every survivor shares
//
// A rank whose process and every buddy failed before the recovery could
// copy its state: [*StateLostError], naming the rank, the epoch and the
// keepers, never a wrong result. A failed rank and no process left to take
// it: [*NoSpareError], unless the program set Config.Shrink (below). A
// function that returns an error without any failure: that error at its
// rank, [ErrAborted] at the others.
//
// # Continuing on fewer ranks
//
// A program that can spread its data over any number of ranks sets
// Config.Shrink: when no process is left to take a failed rank, the
// failed ranks are dropped and the others numbered again in their order,
// and the function starts again on the smaller communicator. The last
// checkpoint's states are still those of the ranks that took it (a slot
// each): every survivor restores its own, and each dropped rank's state,
// fetched from a buddy, goes to the rank of the nearest slot below it
// that survived (above, for slot 0). [Job.Restored] lists the states that
// fall to a rank, by the rank that took each; the program moves its data
// to where it wants it and checkpoints again. Until that checkpoint
// commits, a further failure goes back to the same epoch, its slots
// handed on again the same way.
//
// # Newcomers
//
// A process may join the running job as a spare: a process started
// again where one died (`cohort run --spares S --respawn`, or
// [comm.JoinLocal] in a job of one process).
// It is a new process with a new number (comm's newcomers), never the
// failed one back; it runs New and Run like the others, and Run waits
// until the survivors add it. Every process ANDs into the agreement that
// ends an attempt a bit per newcomer its views admitted, so the survivors
// add, with [comm.Comm.Grow], exactly the newcomers every one of them
// knows, and tell them how the attempt ended and its map. In the
// recovery that follows a newcomer is an idle process like a spare: the
// failed ranks take the lowest-numbered idle processes, spares of the
// start before newcomers, and the state comes from a buddy. A join that
// races with a failure or a recovery is added at the next attempt's end
// where every survivor has seen it admitted, at the latest the run's end
// (its Run then returns nil, as a spare's does); one admitted after the
// run's last agreement gets [comm.ErrNoWelcome] (its Run's error) once
// the others have gone, or, if some of them finalized, [comm.ErrNotNeeded],
// and its Run returns nil.
//
// # Limits
//
// Over TCP only `cohort run` on one host starts newcomers (--respawn,
// which bounds the restarts of each process); with --hosts and under
// SLURM the job is its N+S processes of the start. A newcomer that is
// not yet admitted by every survivor's view when a rank is lost is not
// a spare for that loss. A job admits at most [comm.MaxNewcomers]. Where
// the processes run is the launcher's choice (cohort run --hosts spreads
// the spares; under SLURM, srun's distribution places them).
//
// # On disk
//
// With Config.Dir, every committed epoch is also written to disk, each
// rank its own state, and a job started again with the same directory
// resumes from the newest epoch every rank has there (disk.go): a restart
// of the whole job, for when more processes die than the spares and
// buddies cover.
package resil
