package host

import (
	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
)

var _ transport.PathReporter = handler{}

// Path posts a transport's path change (transport.PairRelayed,
// transport.PairDirect) to the loop, which writes it to the event stream
// and the observers as an event of this node, so that a user sees which
// pairs are relayed and through whom. A change that finds the loop's
// queue full is counted as a lost hint.
func (hd handler) Path(ev core.Event) {
	h := hd.h
	select {
	case h.reqC <- func() { hostEnv{h}.Emit(ev) }:
	default:
		h.stats.hintsLost.Add(1)
	}
}
