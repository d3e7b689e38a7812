package experiment

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// ErrEmptyFigure is returned for a figure with no point that can be drawn.
var ErrEmptyFigure = errors.New("experiment: figure has nothing to draw")

// Figure is a line/point plot with optional error bars, written as
// Name.png and Name.svg.
type Figure struct {
	// Name is the file name without extension.
	Name string
	// Title is printed above the plot.
	Title string
	// XLabel and YLabel name the axes with their units, e.g.
	// "nodes n" and "detection time (s)".
	XLabel, YLabel string
	// LogX and LogY select logarithmic axes. Points (and error-bar ends)
	// that are not positive cannot be drawn on a log axis: points are
	// left out and listed by [Figure.Dropped]; a lower error-bar end is
	// cut at the bottom of the axis.
	LogX, LogY bool
	// XTicks, when set, are the only labelled ticks of the x axis (for
	// example the powers of two of a sweep over n).
	XTicks []float64
	// YRange, when YRange[1] > YRange[0], fixes the y axis (data outside
	// it is clipped); otherwise the axis fits the data.
	YRange [2]float64
	// Legend is the corner of the legend; choose the emptiest one.
	Legend Corner
	// Series are drawn in order; each gets its own color and mark.
	Series []Series
	// Width and Height of the picture; zero means 16 cm × 10 cm.
	Width, Height vg.Length
}

// Corner is a corner of the plotting area.
type Corner int

// The corners; TopLeft is the default.
const (
	TopLeft Corner = iota
	TopRight
	BottomLeft
	BottomRight
)

// Style says how a series is drawn.
type Style int

const (
	// LinesPoints joins the points with a line and marks each point.
	LinesPoints Style = iota
	// Points marks the points only.
	Points
	// Lines joins the points without marks (for theoretical curves).
	Lines
)

// Series is one named curve of a figure.
type Series struct {
	// Label is the legend entry.
	Label string
	// Points in the order they are joined.
	Points []Point
	// Style of the series.
	Style Style
	// Dashed draws the line dashed (theory, bounds).
	Dashed bool
	// Color, when positive, picks the palette entry Color−1 (so that a
	// measurement and its theory can share a color); 0 gives the series
	// the entry of its position.
	Color int
}

// Point is one point with an optional vertical error bar from Lo to Hi
// (drawn when Hi > Lo).
type Point struct {
	X, Y   float64
	Lo, Hi float64
}

// drawable reports whether p can be drawn on the figure's axes.
func (f *Figure) drawable(p Point) bool {
	if math.IsNaN(p.X) || math.IsInf(p.X, 0) || math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
		return false
	}
	return !(f.LogX && p.X <= 0) && !(f.LogY && p.Y <= 0)
}

// Dropped lists the points that cannot be drawn, as "label (x, y)".
func (f *Figure) Dropped() []string {
	var out []string
	for _, s := range f.Series {
		for _, p := range s.Points {
			if !f.drawable(p) {
				out = append(out, fmt.Sprintf("%s (%g, %g)", s.Label, p.X, p.Y))
			}
		}
	}
	return out
}

// yerrs adapts points to gonum's XYer and YErrorer.
type yerrs []Point

func (e yerrs) Len() int                    { return len(e) }
func (e yerrs) XY(i int) (float64, float64) { return e[i].X, e[i].Y }
func (e yerrs) YError(i int) (float64, float64) {
	return e[i].Y - e[i].Lo, e[i].Hi - e[i].Y
}

// build makes the gonum plot.
func (f *Figure) build() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker = cleanTicks{}
	p.Y.Tick.Marker = cleanTicks{}
	if f.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	if f.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	if len(f.XTicks) > 0 {
		ticks := make(plot.ConstantTicks, len(f.XTicks))
		for i, x := range f.XTicks {
			ticks[i] = plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'g', -1, 64)}
		}
		p.X.Tick.Marker = ticks
	}
	p.Legend.Top = f.Legend == TopLeft || f.Legend == TopRight
	p.Legend.Left = f.Legend == TopLeft || f.Legend == BottomLeft
	p.Legend.XOffs, p.Legend.YOffs = -vg.Millimeter*2, -vg.Millimeter*2
	if p.Legend.Left {
		p.Legend.XOffs = vg.Millimeter * 2
	}
	if !p.Legend.Top {
		p.Legend.YOffs = vg.Millimeter * 2
	}

	// The lowest positive value, for cutting error bars on a log y axis.
	floor := math.Inf(1)
	for _, s := range f.Series {
		for _, pt := range s.Points {
			if f.drawable(pt) {
				floor = math.Min(floor, pt.Y)
			}
		}
	}
	if f.YRange[1] > f.YRange[0] && f.YRange[0] > 0 {
		floor = math.Min(floor, f.YRange[0])
	}
	if math.IsInf(floor, 1) {
		return nil, fmt.Errorf("%w: %s", ErrEmptyFigure, f.Name)
	}

	for i, s := range f.Series {
		var pts []Point
		for _, pt := range s.Points {
			if !f.drawable(pt) {
				continue
			}
			if pt.Hi > pt.Lo && f.LogY && pt.Lo <= 0 {
				pt.Lo = floor / 2
			}
			pts = append(pts, pt)
		}
		if len(pts) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(pts))
		for j, pt := range pts {
			xys[j].X, xys[j].Y = pt.X, pt.Y
		}
		c := seriesColor(i)
		if s.Color > 0 {
			c = seriesColor(s.Color - 1)
		}
		var thumbs []plot.Thumbnailer
		if s.Style != Points {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("experiment: figure %s, series %q: %w", f.Name, s.Label, err)
			}
			l.Color = c
			l.Width = vg.Points(1.5)
			if s.Dashed {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l)
			thumbs = append(thumbs, l)
		}
		if s.Style != Lines {
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, fmt.Errorf("experiment: figure %s, series %q: %w", f.Name, s.Label, err)
			}
			sc.Color = c
			sc.Shape = plotutil.Shape(i)
			sc.Radius = vg.Points(3)
			p.Add(sc)
			thumbs = append(thumbs, sc)
		}
		var bars yerrs
		for _, pt := range pts {
			if pt.Hi > pt.Lo {
				bars = append(bars, pt)
			}
		}
		if len(bars) > 0 {
			eb, err := plotter.NewYErrorBars(bars)
			if err != nil {
				return nil, fmt.Errorf("experiment: figure %s, series %q: %w", f.Name, s.Label, err)
			}
			eb.Color = c
			eb.Width = vg.Points(1)
			p.Add(eb)
		}
		if s.Label != "" {
			p.Legend.Add(s.Label, thumbs...)
		}
	}
	if f.YRange[1] > f.YRange[0] {
		p.Y.Min, p.Y.Max = f.YRange[0], f.YRange[1]
	}
	return p, nil
}

// logTicks labels the powers of ten of a log axis (gonum's LogTicks
// accumulates rounding errors into labels like 9.999999e-05) and marks
// 2…9 times each without a label.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= 0 || hi < lo {
		return nil
	}
	var ticks []plot.Tick
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		base := math.Pow10(k)
		for m := 1; m < 10; m++ {
			v := base * float64(m)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = strconv.FormatFloat(base, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// cleanTicks are gonum's default ticks of a linear axis, labelled with the
// shortest decimal form ("25", not "25.00").
type cleanTicks struct{}

func (cleanTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = strconv.FormatFloat(t.Value, 'g', 6, 64)
		}
	}
	return ticks
}

// seriesColor picks well-separated colors (plotutil's dark palette).
func seriesColor(i int) color.Color {
	return plotutil.DarkColors[i%len(plotutil.DarkColors)]
}

// Save writes the figure as path+".png" and path+".svg".
func (f *Figure) Save(path string) error {
	p, err := f.build()
	if err != nil {
		return err
	}
	w, h := f.Width, f.Height
	if w == 0 {
		w = 16 * vg.Centimeter
	}
	if h == 0 {
		h = 10 * vg.Centimeter
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := p.Save(w, h, path+ext); err != nil {
			return fmt.Errorf("experiment: saving figure %s: %w", path+ext, err)
		}
	}
	return nil
}
