// Package multihost holds the end-to-end tests of the peer-to-peer
// middleware on several hosts: a supernode and peer daemons, each in its
// own network namespace of an internal/netlab rig, and `cohort run
// --hosts` submitting jobs to them from the machine itself. They need root
// (network namespaces) and skip, saying so, without it.
package multihost
