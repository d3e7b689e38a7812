package cli

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/experiment"
	"github.com/cohort-mp/cohort/model"
)

// tradeoffMTBFs are the job MTBFs of 'cohort model tradeoff's table.
var tradeoffMTBFs = []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 10 * time.Hour, 100 * time.Hour}

// runModelTradeoff is 'cohort model tradeoff': the expected time to
// solution with checkpoints at Daly's interval (and spares) beside
// replication r = 1 … 3 under Figure 10's model, for one failure rate per
// process.
func runModelTradeoff(_ context.Context, c *call) error {
	fs := c.newFlags()
	work := fs.Duration("work", time.Hour, "the program's failure-free time to solution without checkpoints (`duration`)")
	procs := fs.Int("p", 64, "the program's `ranks`")
	cost := fs.Duration("cost", 1400*time.Microsecond, "what one checkpoint costs (`duration`; measured: jacobi -compare)")
	restart := fs.Duration("restart", 120*time.Millisecond, "what one failure costs beside the lost work: detection and takeover (`duration`)")
	beta := fs.Float64("beta", 0.1, "β, the relative cost of each replica beyond the first (P2P-MPI's linear overhead)")
	out := fs.String("out", "", "`directory` for tradeoff.csv and the figure tradeoff.png/.svg over job MTBFs from 1 min to 100 h (none: the table only)")
	if err := c.parse(fs, c.args[1:], 0); err != nil {
		return err
	}
	switch {
	case *work <= 0:
		return usagef("--work %v: want a positive time to solution, e.g. 1h", *work)
	case *procs < 1 || *procs > maxRunRanks:
		return usagef("-p %d: want 1 to %d ranks", *procs, maxRunRanks)
	case *cost <= 0:
		return usagef("--cost %v: want the positive cost of one checkpoint, e.g. 1.4ms", *cost)
	case *restart < 0:
		return usagef("--restart %v: negative", *restart)
	case !(*beta >= 0) || math.IsInf(*beta, 0):
		return usagef("-beta %v: want a relative overhead of 0 or more", *beta)
	case float64(*work)*float64(*procs) > math.MaxInt64:
		return usagef("--work %v on %d ranks: the sequential time overflows", *work, *procs)
	}
	t := tradeoff{work: *work, p: *procs, cost: *cost, restart: *restart, beta: *beta}
	fmt.Fprintf(c.stdout, "work %v on %d ranks; checkpoint cost %v, restart %v; replication overhead β = %g per extra replica\n", t.work, t.p, t.cost, t.restart, t.beta)
	fmt.Fprintf(c.stdout, "expected time to solution over the work (— : no progress, or P(fail) rounds to 1)\n\n")
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "job MTBF\tDaly interval\tcheckpoints+spares\tr = 1 (restart)\tr = 2\tP(fail), r = 2\tr = 3\t")
	for _, m := range tradeoffMTBFs {
		row := t.at(m)
		fmt.Fprintf(tw, "%v\t%v\t%s\t%s\t%s\t%.2e\t%s\t\n", m, row.interval.Round(time.Millisecond), ratio(row.ckpt), ratio(row.repl[0]), ratio(row.repl[1]), row.fail[1], ratio(row.repl[2]))
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "\ncheckpoints: work/(1 − waste) at Daly's interval (Young's first-order waste), %d+S processes\n", t.p)
	fmt.Fprintf(c.stdout, "replication: P2P-MPI Fig. 10's model, T = work·(1 + β(r − 1)), hosts failing at λ = 1/(p·MTBF) (Weibull δ = 1), T/(1 − P(fail)); r·%d processes\n", t.p)
	if *out == "" {
		return nil
	}
	path, err := t.write(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "wrote %s and %s.png/.svg\n", filepath.Join(*out, "tradeoff.csv"), path)
	return nil
}

// tradeoff is the setting of 'cohort model tradeoff'.
type tradeoff struct {
	work, cost, restart time.Duration
	p                   int
	beta                float64
}

// tradeoffRow is the expected time over the work (NaN: no progress) at one
// job MTBF: with checkpoints at Daly's interval, and with r = 1, 2, 3.
type tradeoffRow struct {
	interval time.Duration
	ckpt     float64
	repl     [3]float64
	fail     [3]float64
}

func (t tradeoff) at(mtbf time.Duration) tradeoffRow {
	row := tradeoffRow{ckpt: math.NaN()}
	if iv, err := model.DalyInterval(t.cost, mtbf); err == nil {
		row.interval = iv
		if e, err := model.CheckpointedTime(t.work, iv, t.cost, t.restart, mtbf); err == nil {
			row.ckpt = e.Seconds() / t.work.Seconds()
		}
	}
	m := model.ReplicationModel{Processes: t.p, Seq: t.work * time.Duration(t.p), Parallel: 1, Overhead: t.beta,
		Rate: 1 / (float64(t.p) * mtbf.Seconds()), Shape: 1}
	for r := 1; r <= 3; r++ {
		row.repl[r-1], row.fail[r-1] = math.NaN(), 1
		e, _, p, err := m.ReplicatedTime(r)
		row.fail[r-1] = p
		if err == nil {
			row.repl[r-1] = e.Seconds() / t.work.Seconds()
		}
	}
	return row
}

// ratio formats an expected time over the work.
func ratio(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.4f×", x)
}

// write writes tradeoff.csv and the figure over job MTBFs from 1 min to
// 100 h into dir and returns the figure's path without extension.
func (t tradeoff) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("mtbf_s,daly_interval_s,checkpoints,r1,r2,r3,pfail_r1,pfail_r2,pfail_r3\n")
	fig := experiment.Figure{
		Name:   "tradeoff",
		Title:  fmt.Sprintf("Checkpoints and spares against replication (P2P-MPI Fig. 10's model), %d ranks", t.p),
		XLabel: "job MTBF (s)", YLabel: "expected time to solution / work",
		LogX: true, LogY: true, Legend: experiment.TopRight,
		// Where the choice is: below ×0.95 nothing is drawn, above ×10
		// every curve has left the picture.
		YRange: [2]float64{0.95, 10},
	}
	series := []experiment.Series{{Label: "checkpoints at Daly's interval, spares"}, {Label: "r = 1, restart from scratch"}, {Label: "r = 2"}, {Label: "r = 3"}}
	for i := range series {
		series[i].Style = experiment.Lines
	}
	for e := 60.0; e <= 360000*1.0001; e *= math.Pow(10, 0.125) {
		m := time.Duration(e * float64(time.Second))
		row := t.at(m)
		fmt.Fprintf(&b, "%.3f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6e,%.6e,%.6e\n", e, row.interval.Seconds(), row.ckpt, row.repl[0], row.repl[1], row.repl[2], row.fail[0], row.fail[1], row.fail[2])
		for i, y := range []float64{row.ckpt, row.repl[0], row.repl[1], row.repl[2]} {
			if !math.IsNaN(y) {
				series[i].Points = append(series[i].Points, experiment.Point{X: e, Y: y})
			}
		}
	}
	fig.Series = series
	if err := os.WriteFile(filepath.Join(dir, "tradeoff.csv"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fig.Name)
	return path, fig.Save(path)
}
