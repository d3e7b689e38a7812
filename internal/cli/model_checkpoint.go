package cli

import (
	"context"
	"fmt"
	"math"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/model"
)

// runModelCheckpoint is 'cohort model checkpoint': the checkpoint interval
// from Young's and Daly's models, and the waste of intervals around it.
func runModelCheckpoint(_ context.Context, c *call) error {
	fs := c.newFlags()
	cost := fs.Duration("cost", 0, "what one checkpoint `costs` (measured: jacobi -compare)")
	restart := fs.Duration("restart", 0, "what one failure costs beside the lost work: detection and takeover (`duration`)")
	mtbf := fs.Duration("mtbf", 0, "the job's mean time between failures (`duration`)")
	if err := c.parse(fs, c.args[1:], 0); err != nil {
		return err
	}
	switch {
	case *cost <= 0:
		return usagef("--cost %v: want the positive cost of one checkpoint, e.g. 1.4ms", *cost)
	case *restart < 0:
		return usagef("--restart %v: negative", *restart)
	case *mtbf <= 0:
		return usagef("--mtbf %v: want the job's positive mean time between failures, e.g. 1h", *mtbf)
	}
	young, err := model.YoungInterval(*cost, *mtbf)
	if err != nil {
		return err
	}
	daly, err := model.DalyInterval(*cost, *mtbf)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "checkpoint cost %v, restart %v, MTBF %v\n", *cost, *restart, *mtbf)
	fmt.Fprintf(c.stdout, "optimum interval: Young %v, Daly %v\n\n", young.Round(time.Microsecond), daly.Round(time.Microsecond))
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "interval\tof Daly's\twaste\t")
	for _, f := range []float64{0.25, 0.5, 1, 2, 4} {
		iv := time.Duration(math.Round(float64(daly) * f))
		if iv <= 0 {
			continue
		}
		w, err := model.CheckpointWaste(iv, *cost, *restart, *mtbf)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%v\t×%g\t%.4f%%\t\n", iv.Round(time.Microsecond), f, 100*w)
	}
	tw.Flush()
	fmt.Fprintln(c.stdout, "\nwaste = C/(τ+C) + (R + (τ+C)/2)/M, to first order (Young 1974); Daly 2006, Eq. 37 for the optimum")
	return nil
}
