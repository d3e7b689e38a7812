package experiment

import (
	"context"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/sim"
	"gonum.org/v1/plot/vg"
)

func init() {
	Register(Spec{
		Name:    "fd-heartbeat",
		Summary: "Phoenix Fig. 2: heartbeats per process per T_interval (k = 2), control messages against n, savings from application traffic",
		New:     func() Experiment { return &fdHeartbeat{} },
	})
}

// fdHeartbeat reproduces the message-count experiment of the Phoenix fault
// detection library (Horita, Taura, Chikayama §6.2, Fig. 2) with the
// heartbeat detector of package fd in the simulator: every process runs a
// core.Stack of the detector and a small application machine that sends
// messages to random (or fixed) peers at a given rate, and every message is
// counted as it is delivered.
type fdHeartbeat struct {
	seeds    int
	duration time.Duration
	appRate  float64
	maxN     int
}

func (e *fdHeartbeat) Flags(fs *flag.FlagSet) {
	fs.IntVar(&e.seeds, "seeds", 0, "simulations per point (0: 4, or 2 with --quick)")
	fs.DurationVar(&e.duration, "duration", 0, "simulated `time` per run (0: 300s, or 200s with --quick)")
	fs.Float64Var(&e.appRate, "app-rate", 0.5, "application messages per second per process in the Fig. 2 run (`rate`)")
	fs.IntVar(&e.maxN, "max-n", 0, "largest `n` of the sweep over n (0: 1024, or 256 with --quick)")
}

// appMsg is the application's message; it owns nothing but its kind.
type appMsg struct{}

// kindApp is the kind of appMsg.
var kindApp = core.MakeKind(core.ProtoApp, 1)

func (appMsg) Kind() core.Kind { return kindApp }
func (appMsg) WireSize() int   { return 64 }

// appTraffic is an application layer that sends appMsg at exponentially
// distributed intervals (a Poisson process of the given rate per second) to
// a peer drawn uniformly among the others, or always to the same peer (the
// next process in id order).
type appTraffic struct {
	env   core.Env
	n     int
	rate  float64
	fixed bool
}

type appTick struct{}

func (a *appTraffic) Protos() []core.Proto { return []core.Proto{core.ProtoApp} }

func (a *appTraffic) Start(env core.Env) {
	a.env = env
	a.next()
}

func (a *appTraffic) next() {
	if a.rate <= 0 || a.n < 2 {
		return
	}
	d := time.Duration(a.env.Rand().ExpFloat64() / a.rate * float64(time.Second))
	a.env.SetTimer(d, appTick{})
}

func (a *appTraffic) Fire(core.Timer) {
	self := int(a.env.Self())
	to := (self + 1) % a.n
	if !a.fixed {
		to = a.env.Rand().IntN(a.n - 1)
		if to >= self {
			to++
		}
	}
	a.env.Send(core.NodeID(to), appMsg{})
	a.next()
}

func (a *appTraffic) Receive(core.NodeID, core.Msg) {}
func (a *appTraffic) Handle(core.Event)             {}

// hbRun describes one simulation.
type hbRun struct {
	n        int
	cfg      fd.HeartbeatConfig
	appRate  float64 // per process per second
	fixed    bool
	duration time.Duration
}

// hbResult is what one simulation measured.
type hbResult struct {
	stats       fd.HeartbeatStats // summed over processes
	connections float64           // mean connections per process at the end
	// Per window of one T_interval, summed over processes: heartbeats
	// (to a monitor) and insurance heartbeats delivered, application
	// messages delivered.
	beats, insurance, app []float64
	fdMessages            uint64 // every fd message delivered
	falseFailures         uint64 // core.Failed emitted (nobody crashes)
}

func runHeartbeat(ctx context.Context, seed uint64, r hbRun) (hbResult, error) {
	w := sim.New(sim.Config{Seed: seed, Network: sim.Uniform(time.Millisecond, 5*time.Millisecond)})
	members := make([]core.NodeID, r.n)
	for i := range members {
		members[i] = core.NodeID(i)
	}
	dets := make([]*fd.HeartbeatDetector, r.n)
	for i := range r.n {
		h, err := fd.NewHeartbeat(r.cfg, members)
		if err != nil {
			return hbResult{}, err
		}
		dets[i] = h
		w.Add(core.NewStack(h, &appTraffic{n: r.n, rate: r.appRate, fixed: r.fixed}))
	}
	windows := int(r.duration / r.cfg.Interval)
	res := hbResult{beats: make([]float64, windows), insurance: make([]float64, windows), app: make([]float64, windows)}
	w.OnDeliver(func(at time.Duration, _, _ core.NodeID, m core.Msg) {
		i := int(at / r.cfg.Interval)
		if i >= windows {
			return
		}
		switch m := m.(type) {
		case fd.HeartbeatMsg:
			if m.Monitor {
				res.beats[i]++
			} else {
				res.insurance[i]++
			}
		case appMsg:
			res.app[i]++
		}
		if m.Kind().Proto() == core.ProtoFD {
			res.fdMessages++
		}
	})
	w.OnEmit(func(_ time.Duration, _ core.NodeID, e core.Event) {
		if _, ok := e.(core.Failed); ok {
			res.falseFailures++
		}
	})
	for t := time.Duration(0); t < r.duration; {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		t = min(r.duration, t+10*r.cfg.Interval)
		w.RunUntil(t)
	}
	conns := 0
	for _, h := range dets {
		s := h.Stats()
		res.stats.HeartbeatsSent += s.HeartbeatsSent
		res.stats.InsuranceSent += s.InsuranceSent
		res.stats.HeartbeatsReceived += s.HeartbeatsReceived
		res.stats.InsuranceReceived += s.InsuranceReceived
		res.stats.Suppressed += s.Suppressed
		res.stats.NoticesSent += s.NoticesSent
		res.stats.PingsSent += s.PingsSent
		res.stats.PongsSent += s.PongsSent
		conns += h.Connections()
	}
	res.connections = float64(conns) / float64(r.n)
	return res, nil
}

// suppressionTheory is the expected number of heartbeats one process sends
// per T_interval to its k monitors when application messages go to random
// peers as a Poisson process of rate per second, spread over n−1 peers: on
// one link messages of rate λ = rate/(n−1) arrive, and a heartbeat is sent
// only after T_interval without any, so heartbeats form a renewal process
// of rate λ/(e^(λT)−1); per T_interval that is x/(eˣ−1) with x = λT.
func suppressionTheory(k, n int, rate float64, interval time.Duration) float64 {
	x := rate / float64(n-1) * interval.Seconds()
	if x == 0 {
		return float64(k)
	}
	return float64(k) * x / math.Expm1(x)
}

func (e *fdHeartbeat) Run(ctx context.Context, s *Session) error {
	if e.seeds == 0 {
		e.seeds = 4
		if s.Quick() {
			e.seeds = 2
		}
	}
	if e.duration == 0 {
		e.duration = 300 * time.Second
		if s.Quick() {
			e.duration = 200 * time.Second
		}
	}
	if e.maxN == 0 {
		e.maxN = 1024
		if s.Quick() {
			e.maxN = 256
		}
	}
	cfg := fd.SimHeartbeatConfig()
	switch {
	case e.seeds < 1:
		return fmt.Errorf("%w: --seeds %d", ErrBadOption, e.seeds)
	case e.duration < 4*cfg.Interval:
		return fmt.Errorf("%w: --duration %v is shorter than 4 T_interval (%v)", ErrBadOption, e.duration, 4*cfg.Interval)
	case e.appRate < 0 || math.IsNaN(e.appRate) || math.IsInf(e.appRate, 0):
		return fmt.Errorf("%w: --app-rate %v", ErrBadOption, e.appRate)
	case e.maxN < 8 || e.maxN > 1<<14:
		return fmt.Errorf("%w: --max-n %d is outside [8, 16384]", ErrBadOption, e.maxN)
	}
	k := cfg.Monitors
	const figN = 64 // the paper's run: 64 processes (Fig. 2: 63 insurance heartbeats)
	s.Logf("fd-heartbeat: k = %d, T_interval = %v, T_timeout = %v, T_insurance = %v, %v simulated per run, %d seeds per point",
		k, cfg.Interval, cfg.Timeout, cfg.Insurance, e.duration, e.seeds)

	// The three sweeps, one list of tasks.
	type point struct {
		part  string // "fig2", "n", "app"
		n     int
		rate  float64
		fixed bool
	}
	var points []point
	points = append(points, point{"fig2", figN, 0, false}, point{"fig2", figN, e.appRate, false})
	var ns []int
	for n := 8; n <= e.maxN; n *= 2 {
		ns = append(ns, n)
		points = append(points, point{"n", n, 0, false})
	}
	rates := []float64{0, 0.5, 2, 8, 32}
	if s.Quick() {
		rates = []float64{0, 2, 16}
	}
	for _, fixed := range []bool{false, true} {
		for _, r := range rates {
			points = append(points, point{"app", figN, r, fixed})
		}
	}
	var tasks []Task[hbResult]
	var owner []int
	for pi, p := range points {
		for sd := range e.seeds {
			run := hbRun{n: p.n, cfg: cfg, appRate: p.rate, fixed: p.fixed, duration: e.duration}
			tasks = append(tasks, Task[hbResult]{
				Key:  fmt.Sprintf("%s/n=%d/rate=%g/fixed=%v/seed=%d", p.part, p.n, p.rate, p.fixed, sd),
				Cost: float64(p.n) * (1 + p.rate),
				Run: func(ctx context.Context, seed uint64) (hbResult, error) {
					return runHeartbeat(ctx, seed, run)
				},
			})
			owner = append(owner, pi)
		}
	}
	res, err := RunAll(ctx, s, "simulations", tasks)
	if err != nil {
		return err
	}
	byPoint := make([][]hbResult, len(points))
	for i, r := range res {
		byPoint[owner[i]] = append(byPoint[owner[i]], r)
	}
	perInterval := func(total float64, n int) float64 {
		return total / float64(n) / (e.duration.Seconds() / cfg.Interval.Seconds())
	}
	var falseFailures uint64
	for _, rs := range byPoint {
		for _, r := range rs {
			falseFailures += r.falseFailures
		}
	}

	// Fig. 2: messages per process per T_interval over time.
	windows := int(e.duration / cfg.Interval)
	top := 0.0
	series := func(rs []hbResult, pick func(hbResult) []float64) []Point {
		pts := make([]Point, windows)
		for i := range windows {
			var sum float64
			for _, r := range rs {
				sum += pick(r)[i]
			}
			pts[i] = Point{X: (float64(i) + 0.5) * cfg.Interval.Seconds(), Y: sum / float64(len(rs)) / figN}
			top = max(top, pts[i].Y)
		}
		return pts
	}
	quiet, busy := byPoint[0], byPoint[1]
	beatsOf := func(r hbResult) []float64 { return r.beats }
	insOf := func(r hbResult) []float64 { return r.insurance }
	appOf := func(r hbResult) []float64 { return r.app }
	fig2 := Figure{
		Name:   "fig2-messages",
		Title:  fmt.Sprintf("Messages received per process per %v (n = %d, k = %d)", cfg.Interval, figN, k),
		XLabel: "time (s)", YLabel: fmt.Sprintf("messages per process per %v", cfg.Interval),
		Series: []Series{
			{Label: "heartbeats, no app traffic", Points: series(quiet, beatsOf), Style: Lines},
			{Label: fmt.Sprintf("heartbeats, app %g msg/s", e.appRate), Points: series(busy, beatsOf), Style: Lines},
			{Label: "insurance, no app traffic", Points: series(quiet, insOf), Style: Lines, Dashed: true},
			{Label: fmt.Sprintf("insurance, app %g msg/s", e.appRate), Points: series(busy, insOf), Style: Lines, Dashed: true},
			{Label: "application messages", Points: series(busy, appOf), Style: Lines},
		},
		Legend: TopRight, Height: 12 * vg.Centimeter,
	}
	fig2.YRange = [2]float64{0, top * 1.7} // room for the legend above the data
	paperFig2 := "Phoenix §6.2, Fig. 2 (N-Queens on 64 processes, k = 2, T_interval = 5 s, T_insurance = 100 s): routing " +
		"messages only at start-up; heartbeats received per process per 5 s stay \"about 2 on average, as the theory says\"; " +
		"after T_insurance the insurance heartbeats raise the count for a while, but fewer than the 63 a process should send, " +
		"because application messages postponed them. (Our detector spreads the first insurance heartbeats over one " +
		"T_insurance, so there is no single burst; the routing layer is not simulated.)"
	if err := s.Figure(fig2, paperFig2); err != nil {
		return err
	}

	// Sweep over n.
	var nRows, nTable [][]string
	var hbPts, totalPts, theoryHB, theoryMesh []Point
	var outOfRange []string
	for i, n := range ns {
		rs := byPoint[2+i]
		var recv, ctl, hbMsgs, conns []float64
		for _, r := range rs {
			recv = append(recv, perInterval(float64(r.stats.HeartbeatsReceived), n))
			ctl = append(ctl, float64(r.fdMessages)/e.duration.Seconds())
			hbMsgs = append(hbMsgs, float64(r.stats.HeartbeatsSent)/e.duration.Seconds())
			conns = append(conns, r.connections)
		}
		rv, ct, cn := Summarize(recv), Summarize(ctl), Summarize(conns)
		if rv.Min < 1.5 || rv.Max > 2.5 {
			outOfRange = append(outOfRange, fmt.Sprintf("n=%d: %.2f…%.2f", n, rv.Min, rv.Max))
		}
		x := float64(n)
		hbPts = append(hbPts, Point{X: x, Y: rv.Mean, Lo: rv.Min, Hi: rv.Max})
		totalPts = append(totalPts, Point{X: x, Y: ct.Mean, Lo: ct.Min, Hi: ct.Max})
		theoryHB = append(theoryHB, Point{X: x, Y: float64(k*n) / cfg.Interval.Seconds()})
		if n <= cfg.FullMeshMax {
			theoryMesh = append(theoryMesh, Point{X: x, Y: float64(k*n)/cfg.Interval.Seconds() + float64(n*(n-1-k))/cfg.Insurance.Seconds()})
		}
		theory := float64(k*n) / cfg.Interval.Seconds()
		nRows = append(nRows, []string{fmt.Sprint(n), fmt.Sprint(len(rs)), F(rv.Mean), F(rv.Min), F(rv.Max), F(ct.Mean),
			F(Summarize(hbMsgs).Mean), F(theory), F(cn.Mean)})
		nTable = append(nTable, []string{fmt.Sprint(n), fmt.Sprint(len(rs)), fmt.Sprintf("%s (%s–%s)", Fp(rv.Mean, 3), Fp(rv.Min, 3), Fp(rv.Max, 3)),
			Fp(ct.Mean, 4), Fp(theory, 4), Fp(cn.Mean, 3)})
	}
	if err := s.WriteCSV("heartbeat-vs-n.csv", []string{"n", "runs", "hb_received_per_process_per_interval_mean", "min", "max",
		"fd_messages_per_s", "heartbeats_sent_per_s", "theory_k_n_over_interval", "connections_per_process"}, nRows); err != nil {
		return err
	}
	xt := make([]float64, len(ns))
	for i, n := range ns {
		xt[i] = float64(n)
	}
	if err := s.Figure(Figure{
		Name: "heartbeats-per-process", Title: fmt.Sprintf("Heartbeats received per process per T_interval (k = %d)", k),
		XLabel: "processes n", YLabel: fmt.Sprintf("heartbeats per process per %v", cfg.Interval), LogX: true, XTicks: xt, YRange: [2]float64{0, 3},
		Series: []Series{
			{Label: "simulated (mean, min–max over runs)", Points: hbPts},
			{Label: fmt.Sprintf("theory: k = %d", k), Points: constLine(ns, float64(k)), Style: Lines, Dashed: true},
		},
		Legend: BottomRight,
	}, "Phoenix §4.2.3 and §6.2: with T_insurance ≫ T_interval a process receives about k heartbeats per T_interval whatever n "+
		"(\"平均して 2 個前後\" with k = 2); the paper measured it at n = 64 only."); err != nil {
		return err
	}
	ctlSeries := []Series{
		{Label: "simulated: all detector messages", Points: totalPts},
		{Label: "theory: heartbeats k·n/T_interval", Points: theoryHB, Style: Lines, Dashed: true},
	}
	if len(theoryMesh) > 0 {
		ctlSeries = append(ctlSeries, Series{Label: "theory + full-mesh insurance n(n−1−k)/T_insurance", Points: theoryMesh, Style: Lines, Dashed: true})
	}
	if err := s.Figure(Figure{
		Name: "control-messages", Title: "Detector messages per second against n (no application traffic)",
		XLabel: "processes n", YLabel: "messages per second (whole job)", LogX: true, LogY: true, XTicks: xt,
		Series: ctlSeries,
	}, "Phoenix §4.2.3: the message rate is about (k·n)/T_interval when T_insurance ≫ T_interval, so it grows linearly in n "+
		"(requirement 1 of §3.1) instead of the O(n²) of all-to-all heartbeats. The paper gives the formula, not a measured curve."); err != nil {
		return err
	}
	s.Table([]string{"n", "runs", "heartbeats received / process / T_interval (mean, min–max)", "detector msgs/s", "k·n/T_interval", "connections / process"}, nTable)

	// Application traffic.
	var appRows, appTable [][]string
	var randPts, fixedPts, theoryPts []Point
	var badTheory []string
	base := 2 + len(ns)
	for j, fixed := range []bool{false, true} {
		for i, rate := range rates {
			rs := byPoint[base+j*len(rates)+i]
			var sent, ins, supp []float64
			for _, r := range rs {
				sent = append(sent, perInterval(float64(r.stats.HeartbeatsSent), figN))
				ins = append(ins, perInterval(float64(r.stats.InsuranceSent), figN))
				supp = append(supp, perInterval(float64(r.stats.Suppressed), figN))
			}
			st := Summarize(sent)
			x := rate + 0.05 // so that rate 0 shows on the log axis
			theory := suppressionTheory(k, figN, rate, cfg.Interval)
			label, model := "random", Fp(theory, 3)
			if fixed {
				label, model = "fixed", ""
				fixedPts = append(fixedPts, Point{X: x, Y: st.Mean, Lo: st.Min, Hi: st.Max})
			} else {
				randPts = append(randPts, Point{X: x, Y: st.Mean, Lo: st.Min, Hi: st.Max})
				theoryPts = append(theoryPts, Point{X: x, Y: theory})
				if math.Abs(st.Mean-theory) > 0.1*theory+0.02 {
					badTheory = append(badTheory, fmt.Sprintf("rate %g: %.3f vs %.3f", rate, st.Mean, theory))
				}
			}
			insMean := Summarize(ins).Mean
			appRows = append(appRows, []string{label, F(rate), fmt.Sprint(len(rs)), F(st.Mean), F(st.Min), F(st.Max),
				F(insMean), F(Summarize(supp).Mean), F(theory)})
			appTable = append(appTable, []string{label, F(rate), Fp(st.Mean, 3), model, Fp(insMean, 3)})
		}
	}
	if err := s.WriteCSV("app-traffic.csv", []string{"peers", "app_rate_per_process_per_s", "runs", "heartbeats_sent_per_process_per_interval",
		"min", "max", "insurance_sent_per_process_per_interval", "suppressed_per_process_per_interval", "theory_random_peers"}, appRows); err != nil {
		return err
	}
	if err := s.Figure(Figure{
		Name: "app-traffic", Title: fmt.Sprintf("Heartbeats sent per process per T_interval against application traffic (n = %d)", figN),
		XLabel: "application messages per process per second (+0.05)", YLabel: fmt.Sprintf("heartbeats sent per %v", cfg.Interval), LogX: true,
		Series: []Series{
			{Label: "random peers (simulated)", Points: randPts},
			{Label: "random peers: k·x/(eˣ−1), x = rate·T/(n−1)", Points: theoryPts, Style: Lines, Dashed: true},
			{Label: "one fixed peer (simulated)", Points: fixedPts},
		},
		Legend: BottomLeft,
	}, "Phoenix §4.2.3: every message counts as a heartbeat, so a heartbeat is sent on a link only after T_interval without "+
		"any message there; Fig. 2 shows insurance heartbeats postponed by the N-Queens work-stealing messages. The paper gives "+
		"no curve against the traffic rate; the dashed line is our renewal-process model for Poisson traffic to random peers."); err != nil {
		return err
	}
	s.Table([]string{"peers", "app msgs / process / s", "heartbeats sent / process / T_interval", "model (random peers)", "insurance sent / process / T_interval"}, appTable)

	// Checks.
	s.Check("heartbeats received per process per T_interval in [1.5, 2.5] for every n (Phoenix §6.2: about 2 with k = 2)",
		len(outOfRange) == 0, orJoin(outOfRange, fmt.Sprintf("every run of n = %d…%d inside", ns[0], ns[len(ns)-1])))
	s.Check("application traffic to random peers suppresses heartbeats as the renewal model predicts (within 10%)",
		len(badTheory) == 0, orJoin(badTheory, fmt.Sprintf("%d rates inside", len(rates))))
	quietIns, busyIns := 0.0, 0.0
	for _, r := range quiet {
		quietIns += float64(r.stats.InsuranceSent)
	}
	for _, r := range busy {
		busyIns += float64(r.stats.InsuranceSent)
	}
	quietIns /= float64(len(quiet) * figN)
	busyIns /= float64(len(busy) * figN)
	perPeriod := e.duration.Seconds() / cfg.Insurance.Seconds()
	s.Check(fmt.Sprintf("application traffic postpones insurance heartbeats (Fig. 2: fewer than the %d due per T_insurance)", figN-1-k),
		busyIns < quietIns && busyIns/perPeriod < float64(figN-1-k),
		fmt.Sprintf("insurance sent per process per T_insurance: %.1f without, %.1f with %g app msg/s", quietIns/perPeriod, busyIns/perPeriod, e.appRate))
	s.Check("no false failure without crashes", falseFailures == 0, fmt.Sprintf("%d core.Failed events in %d runs", falseFailures, len(res)))
	return nil
}

func constLine(ns []int, y float64) []Point {
	pts := make([]Point, len(ns))
	for i, n := range ns {
		pts[i] = Point{X: float64(n), Y: y}
	}
	return pts
}
