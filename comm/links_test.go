package comm

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport"
)

// A pair's change of path is told once, by the lower rank, in words about
// the job: when the link becomes relayed and when it is direct again, not
// when only its relay changes, nor once the process is leaving.
func TestLinkNotices(t *testing.T) {
	var out strings.Builder
	n := &linkNotices{w: &out, self: 0, noun: "rank"}
	for _, e := range []core.Event{
		transport.PairRelayed{Peer: 4, Via: 2},
		transport.PairRelayed{Peer: 4, Via: 1}, // a new relay: no news
		transport.PairRelayed{Peer: 4, Via: 2},
		core.Suspected{Node: 4}, // not a path
		member.Evicted{Epoch: 3},
		transport.PairDirect{Peer: 4},
		transport.PairDirect{Peer: 4},
		transport.PairDirect{Peer: 5},          // direct from the start: no news
		transport.PairRelayed{Peer: 5, Via: 5}, // no third rank
	} {
		n.event(e)
	}
	n.quiet.Store(true)
	n.event(transport.PairRelayed{Peer: 3, Via: 1})
	want := "cohort: ranks 0 and 4: link down, relayed through rank 2\ncohort: ranks 0 and 4: direct link back\n"
	if out.String() != want {
		t.Errorf("rank 0 wrote\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	hi := &linkNotices{w: &out, self: 4, noun: "rank"}
	hi.event(transport.PairRelayed{Peer: 0, Via: 2})
	hi.event(transport.PairDirect{Peer: 0})
	if out.Len() != 0 {
		t.Errorf("rank 4, the higher of the pair, wrote %q; rank 0 tells of it", out.String())
	}

	out.Reset()
	rep := &linkNotices{w: &out, self: 1, noun: "process"}
	rep.event(transport.PairRelayed{Peer: 5, Via: 3})
	if want := "cohort: processes 1 and 5: link down, relayed through process 3\n"; out.String() != want {
		t.Errorf("with replicas: %q, want %q", out.String(), want)
	}
}

// A link that goes down because its peer is gone is not told of: not
// for a peer that announced its leave or was declared failed, and, for a
// suspected peer, only once the suspicion is withdrawn with the link
// still relayed. A direct link back is told only after its relay was.
func TestLinkNoticesOfGonePeers(t *testing.T) {
	var out strings.Builder
	n := &linkNotices{w: &out, self: 0, noun: "rank"}
	for _, e := range []core.Event{
		member.Leaving{Node: 1},
		transport.PairRelayed{Peer: 1, Via: 2}, // left: no news
		transport.PairDirect{Peer: 1},
		core.Suspected{Node: 3},
		transport.PairRelayed{Peer: 3, Via: 2}, // held while suspected
		core.Failed{Node: 3},
		core.Unsuspected{Node: 3},
		transport.PairDirect{Peer: 3}, // its relay was never told
		core.Suspected{Node: 4},
		transport.PairRelayed{Peer: 4, Via: 2},
		core.Unsuspected{Node: 4}, // alive after all, still relayed: told now
		transport.PairDirect{Peer: 4},
		core.Suspected{Node: 5},
		transport.PairRelayed{Peer: 5, Via: 2},
		transport.PairDirect{Peer: 5},
		core.Unsuspected{Node: 5}, // direct again before: nothing to tell
	} {
		n.event(e)
	}
	want := "cohort: ranks 0 and 4: link down, relayed through rank 2\ncohort: ranks 0 and 4: direct link back\n"
	if out.String() != want {
		t.Errorf("rank 0 wrote\n%s\nwant\n%s", out.String(), want)
	}
}

func TestLinkNoticesFromEnv(t *testing.T) {
	var sink strings.Builder
	for v, want := range map[string]bool{"": false, "0": false, "1": true} {
		w, err := linkNoticesFromEnv(func(string) string { return v }, &sink)
		if err != nil || (w != nil) != want {
			t.Errorf("%s=%q: %v, %v; want notices %v", launch.EnvLinkNotices, v, w, err, want)
		}
	}
	if _, err := linkNoticesFromEnv(func(string) string { return "yes" }, &sink); !errors.Is(err, ErrBadArg) {
		t.Errorf("%s=yes: %v, want ErrBadArg", launch.EnvLinkNotices, err)
	}
}
