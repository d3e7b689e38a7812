package comm

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
)

// A pair's change of path is told once, by the lower rank, in words about
// the job; other events, malformed ones and the higher rank's are not.
func TestLinkNotice(t *testing.T) {
	for _, tc := range []struct {
		self   int
		typ    string
		fields string
		noun   string
		want   string // "" for no line
	}{
		{0, pairRelayedEvent, `{"Peer":4,"Via":2}`, "rank", "cohort: ranks 0 and 4: link down, relayed through rank 2"},
		{0, pairDirectEvent, `{"Peer":4}`, "rank", "cohort: ranks 0 and 4: direct link back"},
		{1, pairRelayedEvent, `{"peer":5,"via":3}`, "process", "cohort: processes 1 and 5: link down, relayed through process 3"},
		{4, pairRelayedEvent, `{"Peer":0,"Via":2}`, "rank", ""}, // rank 0 tells of it
		{4, pairDirectEvent, `{"Peer":0}`, "rank", ""},
		{0, pairRelayedEvent, `{"Peer":4}`, "rank", ""},          // through whom?
		{0, pairRelayedEvent, `{"Peer":4,"Via":4}`, "rank", ""},  // not a third rank
		{0, pairRelayedEvent, `{"Peer":0,"Via":2}`, "rank", ""},  // not a pair
		{0, pairDirectEvent, `{"Via":2}`, "rank", ""},            // no peer
		{0, pairDirectEvent, `{"Peer":"four"}`, "rank", ""},      // malformed
		{0, "fd.ProbeRelayed", `{"Peer":4,"Via":2}`, "rank", ""}, // a detector's probe, not a pair's path
		{0, "core.MembersChanged", `{"Epoch":3}`, "rank", ""},
	} {
		got, ok := linkNotice(core.NodeID(tc.self), tc.typ, []byte(tc.fields), tc.noun)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("linkNotice(%d, %s, %s) = %q, %v; want %q", tc.self, tc.typ, tc.fields, got, ok, tc.want)
		}
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
