package experiment

import (
	"context"
	"flag"
	"fmt"

	"github.com/cohort-mp/cohort/model"
)

func init() {
	Register(Spec{
		Name:    "replication",
		Summary: "P2P-MPI Fig. 10: an application's failure probability against its replication degree (Weibull failures, Amdahl duration)",
		New:     func() Experiment { return &replicationModel{m: model.Figure10Model()} },
	})
}

// replicationModel evaluates P2P-MPI §4.5's model (Eq. 2 over the Amdahl
// duration with a replication overhead linear in r) for r = 1 … maxR, as
// Figure 10 does for 10 processes. It is analytic: no simulation, no seed.
type replicationModel struct {
	m    model.ReplicationModel
	maxR int
}

func (e *replicationModel) Flags(fs *flag.FlagSet) {
	fs.IntVar(&e.m.Processes, "p", e.m.Processes, "number of `processes`")
	fs.DurationVar(&e.m.Seq, "tseq", e.m.Seq, "sequential `time` T_seq of the program")
	fs.Float64Var(&e.m.Parallel, "alpha", e.m.Parallel, "parallel `part` α of the program (Amdahl)")
	fs.Float64Var(&e.m.Overhead, "beta", e.m.Overhead, "relative `cost` β of each replica beyond the first")
	fs.Float64Var(&e.m.Rate, "lambda", e.m.Rate, "Weibull failure `rate` λ per second")
	fs.Float64Var(&e.m.Shape, "delta", e.m.Shape, "Weibull `shape` δ")
	fs.IntVar(&e.maxR, "max-r", 40, "largest replication `degree`")
}

func (e *replicationModel) Run(_ context.Context, s *Session) error {
	if e.maxR < 1 {
		return fmt.Errorf("%w: --max-r %d (want ≥ 1)", ErrBadOption, e.maxR)
	}
	var rows [][]string
	var pts []Point
	for r := 1; r <= e.maxR; r++ {
		p, err := e.m.Failure(r)
		if err != nil {
			return err
		}
		t, _ := model.AmdahlDuration(e.m.Seq, e.m.Parallel, e.m.Processes, r, e.m.Overhead)
		rows = append(rows, []string{fmt.Sprint(r), fmt.Sprintf("%.3f", t.Seconds()), fmt.Sprintf("%.6g", p)})
		pts = append(pts, Point{X: float64(r), Y: p})
	}
	if err := s.WriteCSV("replication.csv", []string{"r", "duration_s", "failure_probability"}, rows); err != nil {
		return err
	}
	best, pmin, err := e.m.BestDegree(e.maxR)
	if err != nil {
		return err
	}
	s.Text("Model: P_app(p, r) = 1 − (1 − f(T)^r)^p with f(T) = 1 − exp(−(λT)^δ) and "+
		"T = T_seq·((1 − α) + α/p)·(1 + β(r − 1)); p = %d, T_seq = %v, α = %g, β = %g, λ = %g /s, δ = %g. "+
		"The chapter gives neither its parameters nor those of its reference; these defaults are chosen to "+
		"reproduce its figure's shape (see model.Figure10Model).",
		e.m.Processes, e.m.Seq, e.m.Parallel, e.m.Overhead, e.m.Rate, e.m.Shape)
	if err := s.Figure(Figure{
		Name: "replication", Title: fmt.Sprintf("Failure probability against replication degree, %d processes", e.m.Processes),
		XLabel: "replication degree r", YLabel: "failure probability", YRange: [2]float64{0, 1},
		Series: []Series{{Label: "P_app(r)", Points: pts}},
	}, "Figure 10: 10 processes; the curve falls quickly, reaches its minimum at r ≈ 7 and rises again "+
		"(more replication lengthens the run, so each host is exposed longer); x axis 0–40, y axis 0–1."); err != nil {
		return err
	}
	p1, _ := e.m.Failure(1)
	s.Table([]string{"r", "failure probability"}, [][]string{
		{"1", fmt.Sprintf("%.4f", p1)}, {fmt.Sprint(best), fmt.Sprintf("%.4f (minimum)", pmin)},
		{fmt.Sprint(e.maxR), rows[len(rows)-1][2]},
	})
	if e.m == model.Figure10Model() && e.maxR >= 20 {
		s.Check("minimum at r ≈ 7 (paper: Figure 10)", best >= 6 && best <= 8, fmt.Sprintf("minimum at r = %d, P = %.4f", best, pmin))
	}
	s.Check("replication helps, then hurts (convex around the minimum)", best > 1 && best < e.maxR && pmin < p1,
		fmt.Sprintf("P(1) = %.4f, P(%d) = %.4f, P(%d) = %s", p1, best, pmin, e.maxR, rows[len(rows)-1][2]))
	return nil
}
