// Package multihost runs the peer-to-peer middleware on several hosts of
// one machine: [Start] builds a rig, a supernode and peer daemons each in
// its own network namespace of an internal/netlab lab, with a CA and the
// credentials of a submitter, alice; jobs are then submitted from the
// machine itself (`cohort run --hosts`, or package p2p/submit with
// [Rig.Supernode] and [Rig.Creds]); [Rig.Close] removes it all. The
// daemons run as root and enter only the network of their namespace, so
// they see the machine's cgroups and confine their jobs as a daemon on a
// real host does: a cgroup per job and a uid of its own. The end-to-end
// tests of the middleware, the job-escape test, the partial-partition
// tests (a path between two hosts cut, one way or both, healed, a host
// nobody can dial), the spares test (a host lost mid-run, its ranks
// taken over by spares on the others), the excluded-rank test (a rank
// stopped until the others end, then stopped by its daemon) and the
// hosts launcher of `cohort bench launch` use it. It needs root (network namespaces): Start
// fails with an error wrapping netlab.ErrUnavailable without it, and the
// tests skip, saying so.
package multihost
