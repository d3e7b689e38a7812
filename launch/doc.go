// Package launch starts a cohort job on this machine and gives each of its
// processes its place in the job: the local launcher behind `cohort run`,
// with no daemon to start, or SLURM's srun.
//
// # A process of a job
//
// A process started by a launcher finds its place in its environment, never
// on its command line (a secret on the command line is visible to every user
// of the machine):
//
//	COHORT_JOB_ID      the job's name (peers of another job are refused)
//	COHORT_RANK        this process's rank, 0 ≤ rank < size
//	COHORT_SIZE        the number of ranks
//	COHORT_RENDEZVOUS  host:port of the launcher's rendezvous listener
//	COHORT_SECRET      the job secret, hex, at least 16 bytes
//	COHORT_FANOUT      the membership radix tree's fan-out (optional)
//	COHORT_DETECTOR    brr, dbrr, heartbeat, heartbeat-paper or off (optional, default heartbeat)
//
// [FromEnv] reads and checks them ([ErrNotLaunched] when none is set: the
// program was started by hand). The process then listens where its peers
// can reach it and registers that address; [Bootstrap.Register] returns
// once every rank has registered, with every rank's address:
//
//	boot, err := launch.FromEnv(os.Getenv)
//	ln, err := net.Listen("tcp", "127.0.0.1:0")
//	reg, err := boot.Register(ctx, ln.Addr().String())
//	defer reg.Close()
//	// reg.Addrs[r] is rank r's address; rank r is node core.NodeID(r).
//
// Package comm does all of this in comm.Init; programs rarely call launch
// themselves.
//
// # The rendezvous
//
// Register opens a TCP connection to the launcher and runs the handshake of
// package wire on it (Hello both ways, then an HMAC-SHA256 proof of the job
// secret bound to both Hellos), so that only the job's processes can
// register and a rank knows it talks to its own launcher. The rank then
// sends its size and listen address; when the last rank has registered, the
// launcher's [Rendezvous] sends every rank the table of addresses. The
// connection stays open afterwards: its end tells the launcher that the
// rank is gone, and tells the rank ([Registration.Lost]) that the launcher
// is. If the rendezvous cannot complete (a rank died before registering, or
// the ranks did not all register in time) the launcher aborts it with a
// reason, and every waiting Register returns an error that quotes it
// (wrapping [ErrRendezvous]): no rank waits forever.
//
// # Under SLURM
//
// A program started by SLURM's `srun --mpi=pmi2` needs no launcher of
// ours. [Detect] (which comm.Init calls) finds SLURM's variables when no
// COHORT_* one is set, and [FromSLURM] speaks the PMI-2 wire protocol on
// the descriptor in PMI_FD ([PMIClient]: version handshake, fullinit, then
// a put of this rank's address, a fence, and a get of every other rank's;
// each wait is bounded, the fence by COHORT_SLURM_TIMEOUT, default 60 s).
// The job is named slurm-CLUSTER-JOB.STEP and its secret is HMAC-SHA256 of
// those ids under the user's own secret, which the user gives in
// COHORT_SLURM_SECRET or in a file only they can read (COHORT_SECRET_FILE,
// default ~/.cohort/secret); a task without one refuses to start
// ([ErrNoSecret]). A step on one node listens on 127.0.0.1; on several, on
// an address of its node that the others can reach: COHORT_LISTEN_HOST,
// else a non-loopback address of SLURMD_NODENAME or the host name, else of
// an interface.
//
// Without PMI (srun --mpi=none) the addresses are computed from SLURM's
// environment (the step's host list and tasks per node, block
// distribution, port = a base derived from the job and step ids, between
// 10000 and 32767 (below Linux's default ephemeral ports), or
// COHORT_SLURM_PORT_BASE, plus the local task id), and rank 0 says so on
// standard error.
//
// # A job
//
// [Start] runs N processes of one program with their bootstraps and a fresh
// random job secret, and forwards their standard output and error line by
// line (optionally prefixed with "[rank] "), so that lines never mix:
//
//	job, err := launch.Start(ctx, launch.Config{N: 8, Program: "./pi",
//		Stdout: os.Stdout, Stderr: os.Stderr, Prefix: true,
//		Kills: []launch.Kill{{Rank: 3, After: 200 * time.Millisecond}}})
//	exits, err := job.Wait() // a *FailedError names the failed ranks
//
// Each rank runs in a process group of its own. When ctx ends (Ctrl-C),
// Config.Timeout passes or the rendezvous fails, the job stops: SIGTERM to
// every rank, SIGKILL to those still running after Config.Grace. Kill and
// KillAt inject crashes with SIGKILL; Config.Kills count from the moment
// every rank has registered, and [Job.MissedKills] names those that did
// not happen (the job ended first, the rank had ended). By default a failed rank does not stop
// the others (cohort's ranks see failures as errors and decide for
// themselves); Config.AbortOnFailure stops the job at the first failure, as
// mpirun does. Wait reports each rank's [Exit]: its code or signal, and
// whether the launcher killed it (a crash injected) or stopped it.
package launch
