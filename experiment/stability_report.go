package experiment

import (
	"fmt"
	"math"

	"github.com/cohort-mp/cohort/stable"
	"gonum.org/v1/plot/vg"
)

// stabFit is a least-squares fit y = a + b·x with its coefficient of
// determination.
type stabFit struct{ a, b, r2 float64 }

func stabLinear(xs, ys []float64) stabFit {
	n := float64(len(xs))
	if len(xs) < 2 {
		return stabFit{r2: math.NaN()}
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return stabFit{r2: math.NaN()}
	}
	b := (n*sxy - sx*sy) / den
	a := (sy - b*sx) / n
	return stabFit{a: a, b: b, r2: stabR2(xs, ys, func(x float64) float64 { return a + b*x })}
}

// stabR2 is the coefficient of determination of model f on (xs, ys).
func stabR2(xs, ys []float64, f func(float64) float64) float64 {
	mean := 0.0
	for _, y := range ys {
		mean += y
	}
	mean /= float64(len(ys))
	var ssr, sst float64
	for i := range xs {
		d := ys[i] - f(xs[i])
		ssr += d * d
		sst += (ys[i] - mean) * (ys[i] - mean)
	}
	if sst == 0 {
		return math.NaN()
	}
	return 1 - ssr/sst
}

// stabProportional fits y = c·x through the origin (least squares) and
// returns c and the largest relative deviation |y − c·x| / (c·x).
func stabProportional(xs, ys []float64) (c, maxDev float64) {
	var sxy, sxx float64
	for i := range xs {
		sxy += xs[i] * ys[i]
		sxx += xs[i] * xs[i]
	}
	c = sxy / sxx
	for i := range xs {
		maxDev = max(maxDev, math.Abs(ys[i]-c*xs[i])/(c*xs[i]))
	}
	return c, maxDev
}

func nlog2(n float64) float64 { l := math.Log2(n); return n * l * l }

// stabCurve returns the main-sweep points of protocol p as (n, value).
func stabCurve(points []*stabPoint, p stable.Protocol, y func(*stabPoint) float64) (xs, ys []float64) {
	for _, pt := range points {
		if pt.run.p == p && pt.run.faults == 0 && !pt.faultOnly {
			if v := y(pt); !math.IsNaN(v) {
				xs = append(xs, float64(pt.run.n))
				ys = append(ys, v)
			}
		}
	}
	return xs, ys
}

func (e *stabilityExp) report(s *Session, points []*stabPoint, sizes, faultSizes []int, protos []stable.Protocol) error {
	xt := make([]float64, 0, len(sizes))
	for _, n := range sizes {
		if n >= 100 {
			xt = append(xt, float64(n))
		}
	}
	ticks := []float64{10, 100, 200, 500, 1000, 1900}
	_ = xt
	mean := func(f func(*stabPoint) Summary) func(*stabPoint) (float64, float64, float64) {
		return func(pt *stabPoint) (float64, float64, float64) {
			sm := f(pt)
			return sm.Mean, sm.Min, sm.Max
		}
	}
	color := map[stable.Protocol]int{stable.Coord: 1, stable.FullDist: 2, stable.SCoord: 3, stable.CubeFullDist: 4}
	series := func(ps []stable.Protocol, label string, f func(*stabPoint) Summary) []Series {
		var out []Series
		for _, p := range ps {
			out = append(out, Series{Label: p.PaperName() + label, Points: stabSeries(points, p, mean(f)), Color: color[p]})
		}
		return out
	}
	rtt := func(ps []stable.Protocol) []Series {
		var out []Series
		for _, p := range ps {
			out = append(out,
				Series{Label: p.PaperName() + " first node", Points: stabSeries(points, p, mean(func(pt *stabPoint) Summary { return pt.rttFirst })), Color: color[p]},
				Series{Label: p.PaperName() + " last node", Points: stabSeries(points, p, mean(func(pt *stabPoint) Summary { return pt.rttLast })), Color: color[p], Dashed: true, Style: Lines})
		}
		return out
	}
	flat := []stable.Protocol{stable.SCoord, stable.CubeFullDist}
	noFull := []stable.Protocol{stable.Coord, stable.SCoord, stable.CubeFullDist}
	h := 11 * vg.Centimeter

	s.Text("Each point is one protocol round of the real stable.Detector machines (Config.Resend = 0: Figures 1, 2, 3 and 5 "+
		"as written, on reliable FIFO links) over a random graph (sim.NewGraph: G(n, p) with the components joined, duplex "+
		"100 Mbit/s links, propagation uniform in [0, 1] ms, shortest-path store-and-forward routing with a FIFO queue per "+
		"link), averaged over %d topologies; the bars span the topologies. Edge probability p = 10/n clamped to [0.01, 0.04] "+
		"(0.04 up to 250 nodes, mean degree 10 up to 1,000, 0.01 above; the paper gives only the range 0.01–0.04). Each node "+
		"handles the messages it receives one at a time, %v each (LogP o_r; sending costs %v): the paper's \"message queue at "+
		"the coordinator\"; 100 µs is n × o_r ≈ the first-node RTT of FullDist that the paper's text gives (16 ms at 150 nodes, "+
		"46 ms at 400). 50 senders (nodes below 50), "+
		"4-byte sequence numbers and 32-byte headers: every stability message is 232 bytes (32 + 4·50; start and ack-info 32). "+
		"S_Coord's tree has degree ⌈log2 n⌉; node 0 is Coord's coordinator and S_Coord's root; CubeFullDist runs on the "+
		"incomplete hypercube of §3.3 (topo.Cube). All nodes start at time 0 (node 0 alone for the coordinated protocols); "+
		"a node's RTT is the time at which it learns the round's result. The protocols share the topologies: point t of "+
		"every protocol at size n runs on the same graph. Network load is the time-average number of messages on all "+
		"links (queued, transmitting or propagating) from 0 to the end of the round at the last node, computed exactly "+
		"rather than sampled every 1 ms; max queue is the largest number of messages waiting on one link.", e.topologies, e.recvOver, e.sendOver)

	paper8 := "Fig. 8: RTT of the first and last node against n (10 to 1,900). S_Coord and CubeFullDist stay almost flat, " +
		"with no jumps at powers of two; Coord grows linearly (queue at the coordinator); FullDist grows dramatically " +
		"(16 ms / 19 ms first/last at 150 nodes, 46 ms / 82 ms at 400) and could not be run beyond 400 nodes. First and last " +
		"hardly differ for Coord and S_Coord; slightly for CubeFullDist."
	if err := s.Figure(Figure{Name: "rtt", Title: "Round trip time, all protocols (Fig. 8)", XLabel: "nodes n", YLabel: "RTT (ms)",
		LogY: true, XTicks: ticks, Series: rtt(protos), Height: h, Legend: TopLeft}, paper8); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "rtt-zoom", Title: "Round trip time, S_Coord and CubeFullDist (Fig. 8)", XLabel: "nodes n",
		YLabel: "RTT (ms)", XTicks: ticks, Series: rtt(flat), Height: h, Legend: TopLeft},
		"Fig. 8, the two scalable protocols: nearly flat; data points at (100, 128), (200, 256, 300), (500, 512), (1000, 1024) "+
			"have similar RTT."); err != nil {
		return err
	}
	load := func(pt *stabPoint) Summary { return pt.load }
	queue := func(pt *stabPoint) Summary { return pt.queue }
	if err := s.Figure(Figure{Name: "load", Title: "Average network load (Fig. 9)", XLabel: "nodes n", YLabel: "messages on links (time average)",
		LogY: true, XTicks: ticks, Series: series(protos, "", load), Height: h},
		"Fig. 9: average network load against n. FullDist by far the highest (O(n²) messages); Coord's is not high, "+
			"\"even somewhat better than CubeFullDist\" (O(n) messages in total)."); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "load-zoom", Title: "Average network load, Coord, S_Coord, CubeFullDist (Fig. 9, right)", XLabel: "nodes n",
		YLabel: "messages on links (time average)", XTicks: ticks, Series: series(noFull, "", load), Height: h},
		"Fig. 9 (right): Coord, S_Coord and CubeFullDist only."); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "queue", Title: "Maximum queue size (Fig. 10)", XLabel: "nodes n", YLabel: "messages waiting on one link",
		LogY: true, XTicks: ticks, Series: series(protos, "", queue), Height: h},
		"Fig. 10: maximum queue against n. FullDist the largest; Coord grows linearly with n (the coordinator receives "+
			"O(n) messages); S_Coord and CubeFullDist almost the same, S_Coord somewhat better."); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "queue-zoom", Title: "Maximum queue size, S_Coord and CubeFullDist (Fig. 10, right)", XLabel: "nodes n",
		YLabel: "messages waiting on one link", XTicks: ticks, Series: series(flat, "", queue), Height: h},
		"Fig. 10 (right): S_Coord and CubeFullDist only."); err != nil {
		return err
	}

	// Message and hop counts with the fits.
	msgs := func(pt *stabPoint) float64 { return pt.messages.Mean }
	fx, fy := stabCurve(points, stable.FullDist, msgs)
	cx, cy := stabCurve(points, stable.CubeFullDist, msgs)
	// The n·log²n law is asymptotic: below 100 nodes the n·log n terms
	// (Step 1 and the final messages) weigh as much; fit from 100 on.
	for len(cx) > 0 && cx[0] < 100 {
		cx, cy = cx[1:], cy[1:]
	}
	var cubeC, cubeDev float64
	var cubeTheory, fullTheory []Point
	if len(cx) > 0 {
		xs := make([]float64, len(cx))
		for i, n := range cx {
			xs[i] = nlog2(n)
		}
		cubeC, cubeDev = stabProportional(xs, cy)
		for _, n := range cx {
			cubeTheory = append(cubeTheory, Point{X: n, Y: cubeC * nlog2(n)})
		}
	}
	for _, n := range fx {
		fullTheory = append(fullTheory, Point{X: n, Y: n * (n - 1)})
	}
	msgSeries := series(protos, "", func(pt *stabPoint) Summary { return pt.messages })
	msgSeries = append(msgSeries,
		Series{Label: fmt.Sprintf("%.3g·n·log²n", cubeC), Points: cubeTheory, Style: Lines, Dashed: true, Color: color[stable.CubeFullDist]},
		Series{Label: "n(n−1)", Points: fullTheory, Style: Lines, Dashed: true, Color: color[stable.FullDist]})
	if err := s.Figure(Figure{Name: "messages", Title: "Messages per round (Fig. 11, right)", XLabel: "nodes n", YLabel: "messages",
		LogX: true, LogY: true, XTicks: ticks, Series: msgSeries, Height: h},
		"Fig. 11: message count against n. FullDist O(n²); Coord and S_Coord linear; CubeFullDist O(n·log²n) (Figure 7's analysis)."); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "hops", Title: "Total hop count per round (Fig. 11, left)", XLabel: "nodes n", YLabel: "hops",
		LogX: true, LogY: true, XTicks: ticks, Series: series(protos, "", func(pt *stabPoint) Summary { return pt.hops }), Height: h},
		"Fig. 11: hop count against n. S_Coord below Coord (most messages go to a parent rather than to the root); "+
			"CubeFullDist's hop count relatively better than its message count; Coord's hops and messages below CubeFullDist's."); err != nil {
		return err
	}
	sens := func(f func(*stabPoint) float64) func(*stabPoint) (float64, float64, float64) {
		return func(pt *stabPoint) (float64, float64, float64) { return f(pt), 0, 0 }
	}
	var sensRTT, sensQ []Series
	for _, p := range protos {
		sensRTT = append(sensRTT, Series{Label: p.PaperName(), Points: stabSeries(points, p, sens(func(pt *stabPoint) float64 { return pt.sensRTT })), Color: color[p]})
		sensQ = append(sensQ, Series{Label: p.PaperName(), Points: stabSeries(points, p, sens(func(pt *stabPoint) float64 { return pt.sensQueue })), Color: color[p]})
	}
	if err := s.Figure(Figure{Name: "sensitivity-rtt", Title: "Topology sensitivity: worst − best first-node RTT (Fig. 12)", XLabel: "nodes n",
		YLabel: "worst − best RTT (ms)", XTicks: ticks, Series: sensRTT, Height: h},
		"Fig. 12: difference between the worst and best result over the topologies, first RTT. Coord very sensitive "+
			"(good when the coordinator has many links, poor when few); the others not."); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "sensitivity-queue", Title: "Topology sensitivity: worst − best max queue (Fig. 12)", XLabel: "nodes n",
		YLabel: "worst − best max queue (messages)", XTicks: ticks, Series: sensQ, Height: h},
		"Fig. 12: the same for the maximum queue."); err != nil {
		return err
	}

	// Failures (Figs. 13, 14).
	faultPoint := func(n, f int) *stabPoint {
		for _, pt := range points {
			if pt.run.p == stable.CubeFullDist && pt.run.n == n && pt.run.faults == f {
				return pt
			}
		}
		return nil
	}
	var fr, fm []Series
	top := 0.0
	var fticks []float64
	for f := 0; f <= e.maxFaults; f++ {
		fticks = append(fticks, float64(f))
	}
	for i, n := range faultSizes {
		var first, last, m []Point
		for f := 0; f <= e.maxFaults; f++ {
			pt := faultPoint(n, f)
			if pt == nil {
				continue
			}
			first = append(first, Point{X: float64(f), Y: pt.rttFirst.Mean, Lo: pt.rttFirst.Min, Hi: pt.rttFirst.Max})
			last = append(last, Point{X: float64(f), Y: pt.rttLast.Mean})
			top = max(top, pt.rttLast.Mean, pt.rttFirst.Max)
			m = append(m, Point{X: float64(f), Y: pt.messages.Mean})
		}
		fr = append(fr, Series{Label: fmt.Sprintf("n = %d first", n), Points: first, Color: i + 1},
			Series{Label: fmt.Sprintf("n = %d last", n), Points: last, Color: i + 1, Dashed: true, Style: Lines})
		fm = append(fm, Series{Label: fmt.Sprintf("n = %d", n), Points: m, Color: i + 1})
	}
	if err := s.Figure(Figure{Name: "faults-rtt", Title: "CubeFullDist RTT with failed neighbours of node 0 (Fig. 13)", XLabel: "failed nodes",
		YLabel: "RTT (ms)", Series: fr, Height: h, Legend: TopLeft, XTicks: fticks, YRange: [2]float64{0, 1.6 * top}},
		"Figs. 13–14: CubeFullDist with 0–5 failed nodes, chosen at random among node 0's hypercube neighbours (a worst case): "+
			"\"its performance is hardly affected by a small number of failures\"."); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "faults-messages", Title: "CubeFullDist messages with failed neighbours of node 0 (Fig. 14)", XLabel: "failed nodes",
		YLabel: "messages per round", LogY: true, Series: fm, Height: h, Legend: BottomRight, XTicks: fticks},
		"Figs. 13–14: the other indices of the same runs; failed nodes send nothing and their neighbours stop waiting for them."); err != nil {
		return err
	}

	// Table.
	var rows [][]string
	for _, pt := range points {
		if pt.run.faults != 0 || pt.faultOnly {
			continue
		}
		rows = append(rows, []string{pt.run.p.PaperName(), fmt.Sprint(pt.run.n), Fp(pt.rttFirst.Mean, 4), Fp(pt.rttLast.Mean, 4),
			Fp(pt.load.Mean, 4), Fp(pt.queue.Mean, 4), Fp(pt.messages.Mean, 6), Fp(pt.hops.Mean, 6), Fp(pt.sensRTT, 3), Fp(pt.sensQueue, 3)})
	}
	s.Table([]string{"protocol", "n", "RTT first (ms)", "RTT last (ms)", "avg load", "max queue", "messages", "hops",
		"sensitivity RTT (ms)", "sensitivity queue"}, rows)
	var frows [][]string
	for _, n := range faultSizes {
		for f := 0; f <= e.maxFaults; f++ {
			if pt := faultPoint(n, f); pt != nil {
				frows = append(frows, []string{fmt.Sprint(n), fmt.Sprint(f), Fp(pt.rttFirst.Mean, 4), Fp(pt.rttLast.Mean, 4),
					Fp(pt.messages.Mean, 6), Fp(pt.queue.Mean, 4), fmt.Sprint(pt.missing)})
			}
		}
	}
	s.Text("CubeFullDist with failed hypercube neighbours of node 0 (the same sets grow with the count: the f failed nodes of " +
		"a topology include its f−1):")
	s.Table([]string{"n", "failed", "RTT first (ms)", "RTT last (ms)", "messages", "max queue", "unfinished"}, frows)

	e.differences(s, points)
	e.checks(s, points, faultSizes, fx, fy, cx, cy, cubeC, cubeDev)
	return nil
}

// differences writes what our model does differently from the paper's ns
// runs, with the numbers of this run.
func (e *stabilityExp) differences(s *Session, points []*stabPoint) {
	at := func(p stable.Protocol, n int) *stabPoint {
		for _, pt := range points {
			if pt.run.p == p && pt.run.n == n && pt.run.faults == 0 && !pt.faultOnly {
				return pt
			}
		}
		return nil
	}
	var full []string
	for _, n := range []int{150, 400} {
		if pt := at(stable.FullDist, n); pt != nil {
			full = append(full, fmt.Sprintf("%.3g / %.3g ms at %d nodes", pt.rttFirst.Mean, pt.rttLast.Mean, n))
		}
	}
	fullText := "not run at 150 or 400 nodes here"
	if len(full) > 0 {
		fullText = joinAnd(full)
	}
	top := 0
	for _, pt := range points {
		if pt.run.p == stable.SCoord && !pt.faultOnly {
			top = max(top, pt.run.n)
		}
	}
	queueText := ""
	if c, sc, cb := at(stable.Coord, top), at(stable.SCoord, top), at(stable.CubeFullDist, top); c != nil && sc != nil && cb != nil {
		queueText = fmt.Sprintf(" At n = %d the maximum queue is %.3g messages for Coord, %.3g for S_Coord and %.3g for CubeFullDist.",
			top, c.queue.Mean, sc.queue.Mean, cb.queue.Mean)
	}
	s.Text("**Where our model differs from the paper's.** (1) The paper's start and info messages (and FullDist's rows) are "+
		"multicasts; our machines send n−1 unicasts, which cost no CPU (send overhead %v) but do load node 0's links: S_Coord's "+
		"maximum queue is its root's burst of n−1 infos and so equals Coord's, where the paper finds it close to CubeFullDist's.%s "+
		"(2) Per-message CPU time at the receiver (%v) is our assumption, calibrated on the only RTTs the paper's text gives: "+
		"FullDist's first/last node at 16/19 ms for 150 nodes and 46/82 ms for 400; ours are %s. We do not reproduce FullDist's "+
		"large first-to-last gap under heavy load, and with this CPU model FullDist's RTT grows like Coord's (both are n "+
		"receptions at one node in a row), not faster. (3) Failed nodes send nothing and every live node knows them from the "+
		"start (Config.ExcludeFailed): their neighbours stop waiting for them, so a round costs fewer messages and the "+
		"hypercube's other paths carry the information; the paper does not say how its nodes learn of the failures.",
		e.sendOver, queueText, e.recvOver, fullText)
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	out := xs[0]
	for _, x := range xs[1 : len(xs)-1] {
		out += ", " + x
	}
	return out + " and " + xs[len(xs)-1]
}

func (e *stabilityExp) checks(s *Session, points []*stabPoint, faultSizes []int, fx, fy, cx, cy []float64, cubeC, cubeDev float64) {
	// Correctness first: the figures mean nothing otherwise.
	var bad []string
	for _, pt := range points {
		if pt.missing > 0 || pt.wrong > 0 {
			bad = append(bad, fmt.Sprintf("%v n=%d failures=%d: %d unfinished, %d wrong", pt.run.p.PaperName(), pt.run.n, pt.run.faults, pt.missing, pt.wrong))
		}
	}
	s.Check("every live node finished the round with the exact minimum of the live nodes' vectors", len(bad) == 0,
		orJoin(bad, fmt.Sprintf("%d points", len(points))))

	rttLast := func(pt *stabPoint) float64 { return pt.rttLast.Mean }
	// Coord: linear in n.
	x, y := stabCurve(points, stable.Coord, rttLast)
	cf := stabLinear(x, y)
	s.Check("Coord's RTT grows linearly with n (Fig. 8): linear fit R² ≥ 0.9 with a positive slope",
		cf.r2 >= 0.9 && cf.b > 0, fmt.Sprintf("last-node RTT ≈ %.3g ms + %.3g ms per 100 nodes, R² = %.3f over n = %v", cf.a, 100*cf.b, cf.r2, x))

	// FullDist: n².
	if len(fx) >= 3 {
		lx, ly := make([]float64, len(fx)), make([]float64, len(fx))
		exact := true
		for i := range fx {
			lx[i], ly[i] = math.Log(fx[i]), math.Log(fy[i])
			exact = exact && fy[i] == fx[i]*(fx[i]-1)
		}
		lf := stabLinear(lx, ly)
		top := fx[len(fx)-1]
		var fullRTT, cubeRTT float64
		for _, pt := range points {
			if pt.run.n == int(top) && pt.run.faults == 0 && !pt.faultOnly {
				switch pt.run.p {
				case stable.FullDist:
					fullRTT = pt.rttLast.Mean
				case stable.CubeFullDist:
					cubeRTT = pt.rttLast.Mean
				}
			}
		}
		s.Check("FullDist's messages grow as n² (Fig. 11): log-log slope in [1.9, 2.1]", lf.b >= 1.9 && lf.b <= 2.1,
			fmt.Sprintf("slope %.3f (R² %.4f); exactly n(n−1) messages at every size: %v. FullDist stopped at n = %.0f (--fulldist-max), "+
				"where one round sends %.3g messages and its last node finishes after %.3g ms against %.3g ms for CubeFullDist; "+
				"the paper stopped at 400 nodes", lf.b, lf.r2, exact, top, fy[len(fy)-1], fullRTT, cubeRTT))
	} else {
		s.Check("FullDist's messages grow as n² (Fig. 11)", false, "fewer than 3 sizes ran FullDist")
	}

	// Flat RTT for S_Coord and CubeFullDist, against Coord's growth.
	for _, p := range []stable.Protocol{stable.SCoord, stable.CubeFullDist} {
		x, y := stabCurve(points, p, rttLast)
		f := stabLinear(x, y)
		ratio := f.b / cf.b
		s.Check(fmt.Sprintf("%s's RTT nearly flat (Fig. 8): its growth with n below 10%% of Coord's", p.PaperName()),
			cf.b > 0 && ratio < 0.1,
			fmt.Sprintf("last-node RTT ≈ %.3g ms + %.3g ms per 100 nodes (%.1f%% of Coord's slope); from %.3g ms at n = %.0f to %.3g ms at n = %.0f",
				f.a, 100*f.b, 100*ratio, y[0], x[0], y[len(y)-1], x[len(x)-1]))
	}

	// CubeFullDist: n·log²n.
	s.Check("CubeFullDist's messages follow c·n·log²n (Fig. 11): every size n ≥ 100 within 15% of the fit", len(cx) >= 3 && cubeDev <= 0.15,
		fmt.Sprintf("c = %.4f (least squares through the origin, log base 2), largest deviation %.1f%% over n = %v", cubeC, 100*cubeDev, cx))

	// Failures.
	var worse []string
	worst := 0.0
	checked := 0
	for _, n := range faultSizes {
		var base *stabPoint
		for _, pt := range points {
			if pt.run.p == stable.CubeFullDist && pt.run.n == n && pt.run.faults == 0 {
				base = pt
			}
		}
		for _, pt := range points {
			if pt.run.p != stable.CubeFullDist || pt.run.n != n || pt.run.faults == 0 || base == nil {
				continue
			}
			checked++
			r := pt.rttLast.Mean / base.rttLast.Mean
			worst = max(worst, r)
			if !(r <= 1.3) {
				worse = append(worse, fmt.Sprintf("n=%d, %d failed: %.3g ms vs %.3g ms", n, pt.run.faults, pt.rttLast.Mean, base.rttLast.Mean))
			}
		}
	}
	s.Check(fmt.Sprintf("up to %d failed neighbours of node 0 barely change CubeFullDist's RTT (Figs. 13–14): last-node RTT within +30%% of the failure-free one", e.maxFaults),
		checked > 0 && len(worse) == 0, orJoin(worse, fmt.Sprintf("%d points, largest ratio %.3f", checked, worst)))

}
