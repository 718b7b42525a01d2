package netbench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Line is one run's spread over time, as the plot draws it.
type Line struct {
	Label  string
	Points []Point
}

// Panel is one N's runs, a line each, in one frame.
type Panel struct {
	Title string
	Lines []Line
}

// SpreadFloor is the least spread the plot shows: its log scale has no
// room for 0, and below 0.1 µs the offsets read are noise.
const SpreadFloor = 1e-7

// WritePlot draws the panels one above the other into a PNG: the spread
// (log scale, seconds) against the time since the release, a line per
// run, each label in the same colour in every panel (a profile's in every
// plot).
func WritePlot(file string, panels []Panel) error {
	if len(panels) == 0 {
		return errors.New("plot: nothing to draw")
	}
	if !strings.EqualFold(filepath.Ext(file), ".png") {
		return fmt.Errorf("plot %q: want a .png file", file)
	}
	colour := map[string]int{} // a profile's colour is the same in every plot
	for i, pr := range Profiles {
		colour[pr.Label] = i
	}
	plots := make([][]*plot.Plot, len(panels)) // plot.Align would leave a gap under the title
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.Title
		p.X.Label.Text = "seconds since the simultaneous start"
		p.Y.Label.Text = "spread, max − min"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = decades{}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		drawn := false
		for _, l := range pn.Lines {
			xys := make(plotter.XYs, 0, len(l.Points))
			for _, pt := range l.Points {
				if math.IsNaN(pt.Spread) {
					continue
				}
				xys = append(xys, plotter.XY{X: pt.At.Seconds(), Y: max(pt.Spread, SpreadFloor)})
			}
			if len(xys) == 0 {
				continue
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return fmt.Errorf("plot %s, %s: %w", pn.Title, l.Label, err)
			}
			c, ok := colour[l.Label]
			if !ok {
				c = len(colour)
				colour[l.Label] = c
			}
			line.Color = plotutil.Color(c)
			line.Width = vg.Points(1.2)
			p.Add(line)
			p.Legend.Add(l.Label, line)
			drawn = true
		}
		p.X.Min = 0
		if drawn { // whole decades, the lines off the frame
			p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(p.Y.Min))), math.Pow(10, math.Ceil(math.Log10(p.Y.Max)+0.01))
		} else { // an empty log axis cannot be drawn: give it a range
			p.Y.Min, p.Y.Max = SpreadFloor, 1
		}
		plots[i] = []*plot.Plot{p}
	}
	w, h := 10*vg.Inch, vg.Length(len(panels))*4*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadY: vg.Millimeter * 6}
	for i := range plots {
		plots[i][0].Draw(tiles.At(dc, 0, i))
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot %s: %w", file, err)
	}
	return nil
}

// decades ticks a log axis of seconds at every power of ten, labelled
// in µs, ms or s.
type decades struct{}

func (decades) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		ts = append(ts, plot.Tick{Value: v, Label: decade(v)})
	}
	return ts
}

// decade names a power of ten of seconds: 100 ns, 1 µs, … 1 s, 10 s.
func decade(v float64) string {
	switch {
	case v < 0.99e-6:
		return fmt.Sprintf("%.0f ns", v*1e9)
	case v < 0.99e-3:
		return fmt.Sprintf("%.0f µs", v*1e6)
	case v < 0.99:
		return fmt.Sprintf("%.0f ms", v*1e3)
	}
	return fmt.Sprintf("%.0f s", v)
}
