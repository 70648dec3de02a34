package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
)

// Series is one line of a chart: y against x.
type Series struct {
	Name string
	X, Y []float64
}

// WriteSweepSVG draws two panels against concurrency: output tokens/s and
// p99 TTFT, one line per target (reports grouped by Target).
func WriteSweepSVG(w io.Writer, reps []Report) error {
	byTarget := map[string][]Report{}
	var names []string
	for _, r := range reps {
		if _, ok := byTarget[r.Target]; !ok {
			names = append(names, r.Target)
		}
		byTarget[r.Target] = append(byTarget[r.Target], r)
	}
	var thr, ttft []Series
	for _, n := range names {
		rs := byTarget[n]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Concurrency < rs[j].Concurrency })
		a, b := Series{Name: n}, Series{Name: n}
		for _, r := range rs {
			a.X = append(a.X, float64(r.Concurrency))
			a.Y = append(a.Y, r.OutTokPerS)
			b.X = append(b.X, float64(r.Concurrency))
			b.Y = append(b.Y, r.TTFTms.P99)
		}
		thr, ttft = append(thr, a), append(ttft, b)
	}
	const W, H = 900, 380
	if _, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H); err != nil {
		return err
	}
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	panel(w, 60, 30, 360, 280, "output tokens/s vs concurrency", thr)
	panel(w, 510, 30, 360, 280, "p99 TTFT (ms) vs concurrency", ttft)
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"}

// panel draws one chart with a log2 x axis (concurrency) and a linear y axis.
func panel(w io.Writer, x0, y0, pw, ph float64, title string, ss []Series) {
	fmt.Fprintf(w, `<text x="%g" y="%g" font-weight="bold">%s</text>`+"\n", x0, y0-10, title)
	fmt.Fprintf(w, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#888"/>`+"\n", x0, y0, pw, ph)
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for i := range s.X {
			xmin = math.Min(xmin, s.X[i])
			xmax = math.Max(xmax, s.X[i])
			ymax = math.Max(ymax, s.Y[i])
		}
	}
	if math.IsInf(xmin, 0) {
		return
	}
	if xmin <= 0 {
		xmin = 1
	}
	if xmax <= xmin {
		xmax = xmin * 2
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax *= 1.1
	lx := func(x float64) float64 {
		if x <= 0 {
			x = xmin
		}
		return x0 + (math.Log2(x)-math.Log2(xmin))/(math.Log2(xmax)-math.Log2(xmin))*pw
	}
	ly := func(y float64) float64 { return y0 + ph - y/ymax*ph }
	for i := 0; i <= 4; i++ {
		y := ymax * float64(i) / 4
		fmt.Fprintf(w, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#eee"/>`+"\n", x0, ly(y), x0+pw, ly(y))
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, ly(y)+4, tick(y))
	}
	fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle" fill="#555">concurrency</text>`+"\n", x0+pw/2, y0+ph+32)
	for x := xmin; x <= xmax; x *= 2 {
		fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle">%g</text>`+"\n", lx(x), y0+ph+16, x)
	}
	for k, s := range ss {
		c := palette[k%len(palette)]
		pts := ""
		for i := range s.X {
			pts += fmt.Sprintf("%.1f,%.1f ", lx(s.X[i]), ly(s.Y[i]))
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", lx(s.X[i]), ly(s.Y[i]), c)
		}
		fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", pts, c)
		fmt.Fprintf(w, `<text x="%g" y="%g" fill="%s">%s</text>`+"\n", x0+8, y0+16+float64(k)*14, c, s.Name)
	}
}

// tick formats an axis value compactly: 0.36, 12.5, 1.2k, 79k.
func tick(y float64) string {
	switch {
	case y == 0:
		return "0"
	case y >= 10000:
		return fmt.Sprintf("%.0fk", y/1000)
	case y >= 1000:
		return fmt.Sprintf("%.1fk", y/1000)
	}
	return fmt.Sprintf("%.3g", y)
}
