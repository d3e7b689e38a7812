package member

import (
	"fmt"

	"github.com/cohort-mp/cohort/core"
)

// An epoch numbers a view. It packs two numbers: a counter in the high 32
// bits, which every proposal raises above every counter its root has seen,
// and the id of the root that proposed the view in the low 32 bits:
//
//	epoch = counter<<32 | root
//
// Epochs compare as plain integers: a higher counter wins, and between two
// proposals with the same counter (two nodes that both believe they are the
// root, each on its side of a partition) the root id breaks the tie. Because
// the proposer's id is part of the number, two different proposers never
// produce the same epoch, which is what keeps "one member set per epoch"
// true even when the paper's partition policy lets both sides of a partition
// install views (see the package documentation).

// MakeEpoch returns the epoch with the given counter proposed by root.
func MakeEpoch(counter uint32, root core.NodeID) uint64 {
	return uint64(counter)<<32 | uint64(root)
}

// EpochCounter returns the counter of epoch e.
func EpochCounter(e uint64) uint32 { return uint32(e >> 32) }

// EpochRoot returns the root that proposed the view numbered e.
func EpochRoot(e uint64) core.NodeID { return core.NodeID(uint32(e)) }

// FormatEpoch renders e as "counter.root", the form used in test output.
func FormatEpoch(e uint64) string {
	return fmt.Sprintf("%d.%v", EpochCounter(e), EpochRoot(e))
}
