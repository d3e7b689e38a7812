package chaos

import (
	"bufio"
	"os"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/member"
)

// viewAt is a view a rank installed, and when (its wall clock: the ranks
// and the launcher share the machine's).
type viewAt struct {
	members []core.NodeID
	at      time.Time
}

// readViews reads the views each of procs ranks installed from their event
// streams in dir (launch.EventsPath), in the order each installed them. A
// rank without a stream (it never started its node) has none.
func readViews(dir string, procs int) map[core.NodeID][]viewAt {
	views := map[core.NodeID][]viewAt{}
	for r := range procs {
		f, err := os.Open(launch.EventsPath(dir, r))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			rec, err := record.DecodeRecord(sc.Bytes())
			if err != nil {
				continue
			}
			if v, ok := rec.Event.(member.ViewInstalled); ok {
				views[rec.Node] = append(views[rec.Node], viewAt{v.Members, rec.Time})
			}
		}
		f.Close()
	}
	return views
}

// recoveryTime is the time from a kill to the moment every survivor had
// installed a view without the victim, the longest over the run's kills
// (killedAt: the moment of each kill, by process). A survivor that never
// excluded a victim has no say: it ended first, the job being over for
// it. ok is false if there was no kill or no survivor excluded some
// victim.
func recoveryTime(views map[core.NodeID][]viewAt, killedAt map[int]time.Time, procs int) (d time.Duration, ok bool) {
	if len(killedAt) == 0 {
		return 0, false
	}
	for victim, k := range killedAt {
		var last time.Time
		for s := range procs {
			if _, dead := killedAt[s]; dead {
				continue
			}
			vs := views[core.NodeID(s)]
			i := slices.IndexFunc(vs, func(v viewAt) bool {
				return !v.at.Before(k) && !slices.Contains(v.members, core.NodeID(victim))
			})
			if i >= 0 {
				last = later(last, vs[i].at)
			}
		}
		if last.IsZero() {
			return 0, false
		}
		d = max(d, last.Sub(k))
	}
	return d, true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
