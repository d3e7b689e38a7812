package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// A partial partition cuts the path between two members A and B while both
// still reach every other member. Both: messages are lost in each
// direction; one-way: A's messages to B are lost, B's to A arrive.
const (
	cutBoth   = "both"
	cutOneWay = "oneway"
)

// How the pair is chosen: A at random and B the member A sent the most
// messages to over pairWindow (the path A's detector leans on: a
// heartbeat monitor, a gossip target; memberlist probes every member in
// turn, so for it this is nearly any member), or B at random too.
const (
	pairBusiest = "busiest"
	pairRandom  = "random"
)

// pairWindow is how long the harness counts A's messages to choose B.
const pairWindow = 2 * time.Second

// partialParams are the settings of the partial-partition scenario.
type partialParams struct {
	variants []string      // cutBoth, cutOneWay
	pair     string        // pairBusiest, pairRandom
	cut      time.Duration // how long the path stays cut
	after    time.Duration // the quiet window after the heal
}

// parseVariants checks a --partial list.
func parseVariants(s string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v != cutBoth && v != cutOneWay {
			return nil, fmt.Errorf("%q is not a cut (want %s or %s)", v, cutBoth, cutOneWay)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// partialTrial is what one trial measured. Durations are from the cut
// (firstSuspect, firstDeclare, removedAt) or from the heal (back); -1
// means it did not happen.
type partialTrial struct {
	system  string
	rate    float64
	n       int
	variant string
	trial   int
	a, b    string
	pair    string  // how b was chosen
	share   float64 // with pairBusiest: b's share of a's messages before the cut

	suspicions, suspectors     int
	firstSuspect               time.Duration
	declarations, declarers    int
	firstDeclare               time.Duration
	removedAt                  time.Duration // first sample where some live node's view lacked a or b
	removedFor                 time.Duration // how long, in all, some view lacked a or b
	maxRemovers                int           // most nodes whose views lacked a or b at once
	removedAtHeal              bool
	back                       time.Duration // from the heal until every view held everyone again
	notBack                    bool          // removed, and not whole again within the limit
	others                     int           // other members declared failed or removed
	thirdSuspicions            int           // suspicions of members other than a and b
	msgsPerSecAfter            float64       // per member, from the heal to the trial's end
	msgsPerSecCut, bytesPerSec float64       // per member, during the cut
	err                        string
}

// sampleEvery is how often a trial looks at every node's view.
const sampleEvery = 20 * time.Millisecond

// runPartial runs the partial-partition scenario for one system at one
// size and rate: the group forms, then per variant and trial the path
// between two random members is cut for pp.cut, healed, and watched for
// pp.after (longer if the group is not whole again, up to p.limit).
func runPartial(p params, pp partialParams, name string, rate float64, n int, log io.Writer) ([]partialTrial, error) {
	seed := p.seed ^ uint64(n)<<8 ^ uint64(rate*10)
	rng := rand.New(rand.NewPCG(seed, 2))
	s, err := newSystem(name, rate, seed)
	if err != nil {
		return nil, err
	}
	defer func() {
		s.close()
		runtime.GC()
	}()
	t0 := time.Now()
	if err := s.start(n); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	fmt.Fprintf(log, "  %s n=%d rate=%g: %d nodes agreed in %v\n", name, n, rate, n, time.Since(t0).Round(time.Millisecond))
	time.Sleep(max(p.warmup, s.settle())) // steady traffic before the first cut, not a wait for a condition

	var out []partialTrial
	for _, variant := range pp.variants {
		for t := 0; t < p.trials; t++ {
			if err := waitFor(s, p.limit, s.whole); err != nil {
				return out, fmt.Errorf("%s trial %d: the group is not whole before the cut: %w", variant, t, err)
			}
			a := rng.IntN(n)
			b, share := (a+1+rng.IntN(n-1))%n, 0.0
			if pp.pair == pairBusiest {
				b, share = busiestPeer(s, a, rng)
			}
			r := partialTrialRun(p, pp, s, variant, a, b)
			r.system, r.rate, r.n, r.trial, r.pair, r.share = name, rate, n, t, pp.pair, share
			fmt.Fprintf(log, "  %s n=%d rate=%g %s trial %d: %s\n", name, n, rate, variant, t, r.summary())
			out = append(out, r)
		}
	}
	return out, nil
}

// busiestPeer returns the live index of the member that the node at live
// index a sent the most messages to over pairWindow (ties broken at
// random), and that member's share of a's messages.
func busiestPeer(s system, a int, rng *rand.Rand) (int, float64) {
	before := s.sent(a)
	time.Sleep(pairWindow) // counting a's messages, not waiting for a condition
	after := s.sent(a)
	var best []int
	var most, total uint64
	for i, v := range s.views() {
		k := after[v.name] - before[v.name]
		total += k
		switch {
		case i == a:
		case k > most || best == nil:
			best, most = []int{i}, k
		case k == most:
			best = append(best, i)
		}
	}
	share := 0.0
	if total > 0 {
		share = float64(most) / float64(total)
	}
	return best[rng.IntN(len(best))], share
}

// partialTrialRun cuts the path between the live nodes at indexes a and b
// and watches the group through the cut, the heal and the quiet window.
func partialTrialRun(p params, pp partialParams, s system, variant string, a, b int) partialTrial {
	views := s.views()
	r := partialTrial{variant: variant, a: views[a].name, b: views[b].name, back: -1}
	m0, b0 := s.traffic()
	start := time.Now()
	w := newWatcher(r.a, r.b, start)
	s.setWatcher(w)
	s.cut(a, b, variant == cutOneWay)

	removed := time.Time{} // since when some view lacks a or b (zero: none does)
	r.removedAt = -1
	// look samples every view once; it returns whether the group is whole
	// (every view holds everyone, as the system defines it).
	look := func(now time.Time) bool {
		vs := s.views()
		removers := 0
		for _, v := range vs {
			if !v.members[r.a] || !v.members[r.b] {
				removers++
			}
			// A third member missing from the view of the group's main
			// part is a false death; the view of a node that is itself
			// excluded (a few members, or only itself) says nothing
			// about the others.
			if v.name == r.a || v.name == r.b || 2*len(v.members) <= len(vs) {
				continue
			}
			for _, o := range vs {
				if o.name != r.a && o.name != r.b && !v.members[o.name] {
					w.declared(v.name, o.name, now)
				}
			}
		}
		r.maxRemovers = max(r.maxRemovers, removers)
		if removers > 0 && removed.IsZero() {
			removed = now
			if r.removedAt < 0 {
				r.removedAt = now.Sub(start)
			}
		} else if removers == 0 && !removed.IsZero() {
			r.removedFor += now.Sub(removed)
			removed = time.Time{}
		}
		return removers == 0 && s.whole()
	}

	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	healAt := start.Add(pp.cut)
	for now := time.Now(); now.Before(healAt); now = <-tick.C {
		look(now)
	}
	m1, b1 := s.traffic()
	cutFor := time.Since(start).Seconds()
	s.heal()
	healed := time.Now()
	m2, _ := s.traffic()
	r.removedAtHeal = !removed.IsZero()
	quietUntil, limit := healed.Add(pp.after), healed.Add(max(pp.after, p.limit))
	for now := healed; now.Before(limit); now = <-tick.C {
		whole := look(now)
		if whole && r.back < 0 {
			r.back = now.Sub(healed)
		}
		if !whole {
			r.back = -1 // it fell apart again after the heal
		}
		if r.back >= 0 && !now.Before(quietUntil) {
			break
		}
	}
	if !removed.IsZero() {
		r.removedFor += time.Since(removed)
	}
	m3, _ := s.traffic()
	r.msgsPerSecAfter = float64(m3-m2) / time.Since(healed).Seconds() / float64(len(views))
	s.setWatcher(nil)

	w.mu.Lock()
	r.suspicions, r.suspectors, r.firstSuspect = w.suspicions, len(w.suspectors), w.firstSuspect
	r.declarations, r.declarers, r.firstDeclare = w.declarations, len(w.declarers), w.firstDeclare
	r.others, r.thirdSuspicions = len(w.others), w.thirdSuspicions
	w.mu.Unlock()
	if r.removedAt < 0 {
		r.back = -1 // nothing to come back from
	} else if r.back < 0 {
		r.notBack = true
	}
	r.msgsPerSecCut = float64(m1-m0) / cutFor / float64(len(views))
	r.bytesPerSec = float64(b1-b0) / cutFor / float64(len(views))
	return r
}

func (r partialTrial) summary() string {
	d := func(x time.Duration) string {
		if x < 0 {
			return "never"
		}
		return x.Round(time.Millisecond).String()
	}
	pair := ""
	if r.pair == pairBusiest {
		pair = fmt.Sprintf(" (%.0f%% of %s's messages went to %s)", 100*r.share, r.a, r.b)
	}
	s := fmt.Sprintf("cut %s–%s%s: %d suspicions by %d nodes (first %s), %d declarations by %d (first %s)",
		r.a, r.b, pair, r.suspicions, r.suspectors, d(r.firstSuspect), r.declarations, r.declarers, d(r.firstDeclare))
	switch {
	case r.removedAt < 0:
		s += ", never removed"
	case r.notBack:
		s += fmt.Sprintf(", removed at %s (by up to %d views) and not back", d(r.removedAt), r.maxRemovers)
	default:
		s += fmt.Sprintf(", removed at %s (by up to %d views) for %s, whole again %s after the heal",
			d(r.removedAt), r.maxRemovers, d(r.removedFor), d(r.back))
	}
	return s + fmt.Sprintf(", %d others declared or removed, %d suspicions of others; %.2f msgs/s, %.0f B/s per member during the cut, %.2f msgs/s after",
		r.others, r.thirdSuspicions, r.msgsPerSecCut, r.bytesPerSec, r.msgsPerSecAfter)
}

// partialRow aggregates one system's trials of one variant at one size
// and rate: counts of trials, medians over the trials where the thing
// happened.
type partialRow struct {
	system, variant    string
	rate               float64
	n, trials          int
	suspectedTrials    int
	suspicions         float64 // median per trial
	firstSuspect       time.Duration
	declaredTrials     int
	firstDeclare       time.Duration
	removedTrials      int
	removedAt          time.Duration
	removedFor         time.Duration
	back               time.Duration
	notBack            int
	others             int     // summed over trials
	thirdSuspicions    float64 // median per trial
	msgsPerSec, bytesS float64
	msgsAfter          float64
}

func aggregate(ts []partialTrial) []partialRow {
	type key struct {
		system, variant string
		rate            float64
		n               int
	}
	var order []key
	groups := map[key][]partialTrial{}
	for _, t := range ts {
		k := key{t.system, t.variant, t.rate, t.n}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t)
	}
	var rows []partialRow
	for _, k := range order {
		g := groups[k]
		row := partialRow{system: k.system, variant: k.variant, rate: k.rate, n: k.n, trials: len(g)}
		var susp, firstS, firstD, remAt, remFor, back []time.Duration
		var msgs, bytes, after []float64
		var third []time.Duration
		for _, t := range g {
			susp = append(susp, time.Duration(t.suspicions))
			if t.firstSuspect >= 0 {
				row.suspectedTrials++
				firstS = append(firstS, t.firstSuspect)
			}
			if t.firstDeclare >= 0 {
				row.declaredTrials++
				firstD = append(firstD, t.firstDeclare)
			}
			if t.removedAt >= 0 {
				row.removedTrials++
				remAt = append(remAt, t.removedAt)
				remFor = append(remFor, t.removedFor)
				if t.notBack {
					row.notBack++
				} else {
					back = append(back, t.back)
				}
			}
			row.others += t.others
			third = append(third, time.Duration(t.thirdSuspicions))
			after = append(after, t.msgsPerSecAfter)
			msgs = append(msgs, t.msgsPerSecCut)
			bytes = append(bytes, t.bytesPerSec)
		}
		row.suspicions = float64(median(susp))
		row.firstSuspect, row.firstDeclare = median(firstS), median(firstD)
		row.removedAt, row.removedFor, row.back = median(remAt), median(remFor), median(back)
		row.msgsPerSec, row.bytesS = medianFloat(msgs), medianFloat(bytes)
		row.thirdSuspicions, row.msgsAfter = float64(median(third)), medianFloat(after)
		rows = append(rows, row)
	}
	return rows
}

func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// printPartial prints the side-by-side table: one row per variant, size,
// rate and system.
func printPartial(out io.Writer, rows []partialRow) {
	tw := tabwriter.NewWriter(out, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cut\trate\tn\tsystem\tsuspected\tsuspicions (med)\tfirst suspicion ms\tdeclared\tfirst declared ms\tremoved\tremoved at ms\tremoved for ms\tback after heal ms\tnot back\tothers removed\tothers' suspicions (med)\tmsgs/s/member cut\tB/s/member cut\tmsgs/s/member after\t")
	frac := func(k, n int) string { return fmt.Sprintf("%d/%d", k, n) }
	// at prints a median of times that happened (0 included) and "-" when
	// none did.
	at := func(d time.Duration, happened int) string {
		if happened == 0 {
			return "-"
		}
		return strconv.FormatFloat(d.Seconds()*1000, 'f', 0, 64)
	}
	for _, r := range rows {
		third := strconv.FormatFloat(r.thirdSuspicions, 'f', 0, 64)
		if r.system == "memberlist" {
			third = "n/a" // its suspicions do not name the suspect: all count above
		}
		fmt.Fprintf(tw, "%s\t%g\t%d\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%.2f\t%.0f\t%.2f\t\n",
			r.variant, r.rate, r.n, r.system, frac(r.suspectedTrials, r.trials), r.suspicions, at(r.firstSuspect, r.suspectedTrials),
			frac(r.declaredTrials, r.trials), at(r.firstDeclare, r.declaredTrials), frac(r.removedTrials, r.trials),
			at(r.removedAt, r.removedTrials), at(r.removedFor, r.removedTrials), at(r.back, r.removedTrials-r.notBack), r.notBack, r.others, third, r.msgsPerSec, r.bytesS, r.msgsAfter)
	}
	tw.Flush()
}

// writePartialCSV writes one row per trial.
func writePartialCSV(path string, ts []partialTrial) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"system", "cut", "rate", "n", "trial", "a", "b", "pair", "b_share", "suspicions", "suspectors",
		"first_suspicion_ms", "declarations", "declarers", "first_declared_ms", "removed_at_ms",
		"removed_for_ms", "max_removers", "removed_at_heal", "back_after_heal_ms", "not_back",
		"others_removed", "others_suspicions", "msgs_per_member_s_cut", "bytes_per_member_s_cut", "msgs_per_member_s_after"})
	msCell := func(d time.Duration) string {
		if d < 0 {
			return ""
		}
		return strconv.FormatFloat(d.Seconds()*1000, 'f', 1, 64)
	}
	for _, t := range ts {
		w.Write([]string{t.system, t.variant, strconv.FormatFloat(t.rate, 'g', -1, 64), strconv.Itoa(t.n),
			strconv.Itoa(t.trial), t.a, t.b, t.pair, strconv.FormatFloat(t.share, 'f', 3, 64), strconv.Itoa(t.suspicions), strconv.Itoa(t.suspectors),
			msCell(t.firstSuspect), strconv.Itoa(t.declarations), strconv.Itoa(t.declarers),
			msCell(t.firstDeclare), msCell(t.removedAt), msCell(t.removedFor), strconv.Itoa(t.maxRemovers),
			strconv.FormatBool(t.removedAtHeal), msCell(t.back), strconv.FormatBool(t.notBack),
			strconv.Itoa(t.others), strconv.Itoa(t.thirdSuspicions), strconv.FormatFloat(t.msgsPerSecCut, 'f', 3, 64),
			strconv.FormatFloat(t.bytesPerSec, 'f', 1, 64), strconv.FormatFloat(t.msgsPerSecAfter, 'f', 3, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
