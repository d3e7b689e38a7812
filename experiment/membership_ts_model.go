package experiment

import (
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// logpStabilization returns T_s as the simulator must produce it for the
// member protocol after one failure: the root handles the report at time 0,
// sends FAILURE_DET_ACK to the reporter (unless it is the reporter), then
// FAILED_NODE to its children; every node handles the Prepare, passes it to
// its children, and acknowledges once it has handled the ACKs of all its
// children; a leaf acknowledges at once. Every message costs its receiver
// recv of CPU time, one message at a time in arrival order (sim.Config's
// RecvOverhead), and its sender send (SendOverhead); lat is the network's
// latency between two nodes. members is the survivors' view, in view order;
// reporter the node that reported the failure.
//
// This is the paper's base model (§4) with its one refinement spelled out:
// the paper charges O_cp once per level (the tree update on FAILED_NODE),
// the simulator charges it for every message, so a parent also spends
// O_cp on each of its children's ACKs, one after the other. For a complete
// tree of height H with constant latency L and send = 0 that gives
//
//	T_s = 2·L·(H−1) + O_cp·(H−1)·(1 + a)
//
// instead of Eq. 2's 2·L·(H−1) + O_cp·H; with a partial last level, or when
// the reporter's FAILURE_DET_ACK shares its CPU with the Prepare, this
// function follows the exact order of events.
func logpStabilization(members []core.NodeID, a int, lat func(from, to core.NodeID) time.Duration, send, recv time.Duration, reporter core.NodeID) (time.Duration, error) {
	m := len(members)
	t, err := topo.NewRadix(m, a)
	if err != nil {
		return 0, err
	}
	if m == 0 {
		return 0, fmt.Errorf("experiment: no members")
	}
	rep := slices.Index(members, reporter)
	prep := make([]time.Duration, m)     // arrival, then handling, of the Prepare
	sendFree := make([]time.Duration, m) // when the node's last send left
	cpu := make([]time.Duration, m)      // when the node's CPU is free after the Prepare
	raArr := time.Duration(-1)           // FAILURE_DET_ACK's arrival at the reporter
	raLate := false                      // it arrives after the Prepare
	if rep > 0 {
		sendFree[0] = send
		raArr = send + lat(members[0], members[rep])
	}
	for i := range m {
		if i > 0 {
			arr, free := prep[i], time.Duration(0)
			if i == rep {
				if raArr <= arr { // sent before any Prepare: first on a tie
					free = raArr + recv
				} else {
					raLate = true
				}
			}
			prep[i] = max(arr, free) + recv
			cpu[i] = prep[i]
		}
		lo, hi := t.Children(i)
		for c := lo; c < hi; c++ {
			d := max(prep[i], sendFree[i]) + send
			sendFree[i] = d
			prep[c] = d + lat(members[i], members[c])
		}
	}
	ackArr := make([]time.Duration, m)
	type arrival struct {
		at  time.Duration
		ack bool
	}
	var q []arrival
	for i := m - 1; i >= 0; i-- {
		lo, hi := t.Children(i)
		ready := prep[i]
		if hi > lo {
			q = q[:0]
			for c := lo; c < hi; c++ {
				q = append(q, arrival{ackArr[c], true})
			}
			if i == rep && raLate {
				q = append(q, arrival{raArr, false}) // came after the Prepare
			}
			slices.SortStableFunc(q, func(x, y arrival) int {
				if x.at != y.at {
					return int(x.at - y.at)
				}
				if x.ack == y.ack {
					return 0
				}
				if !x.ack { // FAILURE_DET_ACK was sent first
					return -1
				}
				return 1
			})
			c, got := cpu[i], 0
			for _, a := range q {
				c = max(c, a.at) + recv
				if a.ack {
					got++
					if got == hi-lo {
						ready = c
					}
				}
			}
		}
		if i == 0 {
			return ready, nil
		}
		d := max(ready, sendFree[i]) + send
		sendFree[i] = d
		ackArr[i] = d + lat(members[i], members[t.Parent(i)])
	}
	return 0, nil // not reached: position 0 is always visited
}
