package tcp

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/replica"
)

// The replication protocol's frames travel in the control lane, but for
// its data, which stays in order with the program's other data: a peer
// whose data queue is full still gets the commits, acknowledgements,
// decisions and end of program that the replicas need to make progress,
// and the data of control channels (comm's revocations and agreement
// steps).
func TestControlFrameReplicaKinds(t *testing.T) {
	for _, tc := range []struct {
		kind    core.Kind
		control bool
	}{
		{replica.KindData, false},
		{replica.KindAck, true},
		{replica.KindCommit, true},
		{replica.KindDecision, true},
		{replica.KindDecisionAck, true},
		{replica.KindDecisionCommit, true},
		{replica.KindFin, true},
		{replica.KindControlData, true},
		{commRevoke, true},
		{commAgree, true},
		{core.Kind(core.ProtoComm)<<8 | 1, false}, // comm's data
	} {
		if got := controlFrame(tc.kind); got != tc.control {
			t.Errorf("controlFrame(%v) = %v, want %v", tc.kind, got, tc.control)
		}
	}
}
