package livedemo

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/tracker"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/member"
)

// liveWatch follows a run through its ranks' event files.
type liveWatch struct {
	dir   string
	out   *liveOut
	base  *liveRun
	start time.Time
	procs int
	files []*eventFile
	track *tracker.Tracker
	// What the summary needs: per victim, the first suspicion and
	// declaration of it by any survivor; per rank, the views it installed.
	killAt    map[core.NodeID]time.Time
	suspected map[core.NodeID]time.Time
	declared  map[core.NodeID]time.Time
	views     map[core.NodeID][]viewAt
	lastView  member.ViewInstalled
	drawn     time.Duration // when the status line was last drawn
	// Suspicions and declarations of ranks that were alive (not killed
	// by then): the detectors' mistakes, which pings usually refute.
	liveSuspected, liveDeclared int
}

type viewAt struct {
	view member.ViewInstalled
	at   time.Time
}

// eventFile is one rank's events file, read as it grows.
type eventFile struct {
	path    string
	f       *os.File
	partial []byte
}

func (w *liveWatch) begin(start time.Time, procs int) {
	w.start, w.procs = start, procs
	w.track = tracker.NewTracker(start)
	w.killAt = map[core.NodeID]time.Time{}
	w.suspected = map[core.NodeID]time.Time{}
	w.declared = map[core.NodeID]time.Time{}
	w.views = map[core.NodeID][]viewAt{}
	for r := range procs {
		w.files = append(w.files, &eventFile{path: launch.EventsPath(w.dir, r)})
	}
}

func (w *liveWatch) killed(rank int, at time.Time) {
	id := core.NodeID(rank)
	w.killAt[id] = at
	w.out.event(at.Sub(w.start), id.String(), "✗", "killed (SIGKILL)", bold+red)
	lines := w.track.Add(record.Record{Node: id, Time: at, Type: "record.Killed", Event: record.Killed{}})
	w.viewLines(lines[1:]) // the first is the Tracker's own kill line
}

// poll reads what the ranks wrote since the last call, in time order.
func (w *liveWatch) poll() {
	var recs []record.Record
	buf := make([]byte, 64<<10)
	for _, ef := range w.files {
		if ef.f == nil {
			f, err := os.Open(ef.path)
			if err != nil {
				continue // the rank has not started its node yet
			}
			ef.f = f
		}
		for {
			n, err := ef.f.Read(buf)
			data := append(ef.partial, buf[:n]...)
			for {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					break
				}
				if rec, err := record.DecodeRecord(data[:i]); err == nil {
					recs = append(recs, rec)
				}
				data = data[i+1:]
			}
			ef.partial = append(ef.partial[:0], data...)
			if err != nil || n == 0 {
				break
			}
		}
	}
	slices.SortStableFunc(recs, func(a, b record.Record) int { return a.Time.Compare(b.Time) })
	for _, rec := range recs {
		w.record(rec)
	}
}

func (w *liveWatch) record(rec record.Record) {
	at := rec.Time.Sub(w.start)
	who := rec.Node.String()
	switch e := rec.Event.(type) {
	case core.Suspected:
		w.out.event(at, who, "?", fmt.Sprintf("suspects %v", e.Node), yellow)
		k, ok := w.killAt[e.Node]
		switch {
		case !ok || rec.Time.Before(k):
			w.liveSuspected++
		case w.suspected[e.Node].IsZero():
			w.suspected[e.Node] = rec.Time
		}
	case core.Unsuspected:
		w.out.event(at, who, "✓", fmt.Sprintf("no longer suspects %v", e.Node), dim)
	case core.Failed:
		w.out.event(at, who, "●", fmt.Sprintf("declares %v failed", e.Node), red)
		k, ok := w.killAt[e.Node]
		switch {
		case !ok || rec.Time.Before(k):
			w.liveDeclared++
		case w.declared[e.Node].IsZero():
			w.declared[e.Node] = rec.Time
		}
	case member.ViewInstalled:
		w.views[rec.Node] = append(w.views[rec.Node], viewAt{e, rec.Time})
		if e.Epoch > w.lastView.Epoch {
			w.lastView = e
		}
	}
	w.viewLines(w.track.Add(rec))
}

// viewLines prints the Tracker's lines: each view once every live member
// installed it.
func (w *liveWatch) viewLines(lines []string) {
	for _, l := range lines {
		stamp, rest, _ := strings.Cut(strings.TrimLeft(l, " "), " ")
		at, err := strconv.ParseFloat(strings.TrimSuffix(stamp, "s"), 64)
		if err != nil {
			w.out.event(0, "view", "◆", l, cyan)
			continue
		}
		w.out.event(time.Duration(at*float64(time.Second)), "view", "◆", rest, cyan)
	}
}

// progress redraws the status line (at most every 100 ms): the time
// against the failure-free run's, the kills, the live ranks, the view.
func (w *liveWatch) progress(elapsed time.Duration, killed, kills int) {
	if elapsed-w.drawn < 100*time.Millisecond {
		return
	}
	w.drawn = elapsed
	frac := min(float64(elapsed)/float64(w.base.reportAt), 1)
	const width = 16
	full := int(frac * width)
	bar := strings.Repeat("█", full) + strings.Repeat("░", width-full)
	w.out.status(fmt.Sprintf("%+7.2fs %s %3.0f%% of the failure-free time · %d/%d killed · view %s",
		elapsed.Seconds(), bar, 100*float64(elapsed)/float64(w.base.reportAt), killed, kills, member.FormatEpoch(w.lastView.Epoch)))
}

// end prints the views not yet printed.
func (w *liveWatch) end() {
	w.viewLines(w.track.Flush())
	for _, ef := range w.files {
		if ef.f != nil {
			ef.f.Close()
		}
	}
	w.out.clear()
}

// excluded returns when the last survivor installed a view without victim
// (zero if some survivor never did).
func (w *liveWatch) excluded(victim core.NodeID, survivors []core.NodeID) time.Time {
	var last time.Time
	for _, s := range survivors {
		i := slices.IndexFunc(w.views[s], func(v viewAt) bool { return !slices.Contains(v.view.Members, victim) })
		if i < 0 {
			return time.Time{}
		}
		last = later(last, w.views[s][i].at)
	}
	return last
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
