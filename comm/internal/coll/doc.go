// Package coll implements cohort's collective operations (broadcast,
// reductions, gathers, scatters, all-to-all, scans, barrier) over a minimal
// point-to-point Transport. The comm package adapts a communicator to
// Transport and exposes these functions as comm.Bcast, comm.Allreduce, …;
// applications use those, not this package.
//
// Every collective is generic over Elem and is called by every rank of the
// communicator, in the same order, with consistent arguments (the same root,
// counts that agree). The package doc's algorithm section is filled in as the
// algorithms land.
package coll
