// Package stack puts a group node's machines together: the failure
// detector chosen by name, the radix-tree membership (package member),
// optionally the stability detector and view-synchronous multicast
// (packages stable and vsync), and the directory (addresses, the
// confirmation of graceful leaves, bootstrap probes and metadata) that
// package group runs below them; and the codec of every kind they send.
//
// It is the plumbing shared by package group, package comm and cohort's
// runners and benchmarks, which drive their own hosts over it. A service
// uses package group, not this package.
package stack
