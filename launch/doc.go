// Package launch starts a cohort job on this machine and gives each of its
// processes its place in the job: the local launcher behind `cohort run`,
// with no daemon to start.
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
//	COHORT_DETECTOR    brr, dbrr, heartbeat, heartbeat-paper or off (optional, default brr)
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
// KillAt inject crashes with SIGKILL. By default a failed rank does not stop
// the others (cohort's ranks see failures as errors and decide for
// themselves); Config.AbortOnFailure stops the job at the first failure, as
// mpirun does. Wait reports each rank's [Exit]: its code or signal, and
// whether the launcher killed it (a crash injected) or stopped it.
package launch
