package reports

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// plotsView holds the throughput and latency plots of a run page, drawn
// as inline SVG.
type plotsView struct {
	Throughput template.HTML
	Latency    template.HTML
	Buckets    int
	Width      string // one bucket, e.g. "100ms"
}

// series is one line of a plot.
type series struct {
	name, colour string
	ys           []float64 // NaN: no value in that bucket
	dash         bool
}

// buildPlots buckets the operations by the time they completed: the
// successful and failed acquires per second, and the median and maximum
// latency of acquires and releases (return - call) that completed in each
// bucket; indeterminate operations (no return) are left out. Fault windows
// are shaded.
func buildPlots(h *history.History) plotsView {
	end := h.End
	if end <= 0 {
		return plotsView{}
	}
	n := int(end / 1e8) // 100 ms buckets...
	if n < 10 {
		n = 10
	}
	if n > 200 { // ...at most 200 of them
		n = 200
	}
	width := float64(end) / float64(n)
	okAcq, failAcq := make([]float64, n), make([]float64, n)
	lat := make([][]float64, n)
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Return == history.Never || op.Return < 0 {
			continue
		}
		b := int(float64(op.Return) / width)
		if b >= n {
			b = n - 1
		}
		if op.Op == history.Acquire {
			switch op.Type {
			case history.OK:
				okAcq[b]++
			case history.Fail:
				failAcq[b]++
			}
		}
		if op.Op == history.Acquire || op.Op == history.Release {
			lat[b] = append(lat[b], float64(op.Return-op.Call)/1e6)
		}
	}
	perSec := 1e9 / width
	p50, pmax := make([]float64, n), make([]float64, n)
	for b := range lat {
		okAcq[b] *= perSec
		failAcq[b] *= perSec
		if len(lat[b]) == 0 {
			p50[b], pmax[b] = math.NaN(), math.NaN()
			continue
		}
		slices.Sort(lat[b])
		p50[b], pmax[b] = lat[b][len(lat[b])/2], lat[b][len(lat[b])-1]
	}
	return plotsView{
		Throughput: plotSVG(h, end, "acquires / s", []series{{"ok", "#1e7e34", okAcq, false}, {"failed (lock held)", "#8c959f", failAcq, true}}),
		Latency:    plotSVG(h, end, "latency ms", []series{{"median", "#0969da", p50, false}, {"max", "#c5221f", pmax, true}}),
		Buckets:    n,
		Width:      dur(int64(width)),
	}
}

// plotSVG draws lines over [0, end] with the faults shaded.
func plotSVG(h *history.History, end int64, unit string, ss []series) template.HTML {
	const W, H, L, R, T, B = 1000.0, 170.0, 56.0, 10.0, 10.0, 24.0
	pw, ph := W-L-R, H-T-B
	top := 0.0
	for _, s := range ss {
		for _, y := range s.ys {
			if !math.IsNaN(y) && y > top {
				top = y
			}
		}
	}
	step := niceStep(top / 4)
	if top <= 0 {
		top = 1
	}
	top = math.Ceil(top/step) * step
	x := func(t float64) float64 { return L + pw*t/float64(end) }
	y := func(v float64) float64 { return T + ph*(1-v/top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s over time">`, W, H, html.EscapeString(unit))
	for _, f := range h.Faults {
		fe := f.End
		if fe == history.Never || fe > end {
			fe = end
		}
		fmt.Fprintf(&b, `<rect class="fband" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s (%s)</title></rect>`,
			x(float64(f.Start)), T, math.Max(1, x(float64(fe))-x(float64(f.Start))), ph,
			html.EscapeString(f.Name), html.EscapeString(f.Target), html.EscapeString(span(f.Start, fe, 2)))
	}
	for v := 0.0; v <= top+step/2; v += step {
		fmt.Fprintf(&b, `<line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/><text class="tk" x="%.0f" y="%.1f" text-anchor="end">%s</text>`,
			L, W-R, y(v), y(v), L-4, y(v)+4, trimFloat(v))
	}
	tstep := niceStep(float64(end) / 1e9 / 10)
	for t := 0.0; t <= float64(end)/1e9+1e-9; t += tstep {
		fmt.Fprintf(&b, `<text class="tk" x="%.1f" y="%.0f" text-anchor="middle">%ss</text>`, x(t*1e9), H-6, trimFloat(t))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/>`, L, W-R, T+ph, T+ph)
	fmt.Fprintf(&b, `<text class="tk" x="%.0f" y="%.0f">%s</text>`, L+6, T+10, html.EscapeString(unit))
	for _, s := range ss {
		n := len(s.ys)
		var d strings.Builder
		pen := false
		for i, v := range s.ys {
			if math.IsNaN(v) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, x((float64(i)+0.5)*float64(end)/float64(n)), y(v))
			pen = true
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6"%s><title>%s</title></path>`, d.String(), s.colour, dash, html.EscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	// The legend, below the plot.
	b.WriteString(`<div class="legend">`)
	for _, s := range ss {
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<span><svg width="22" height="10"><path d="M1 5H21" stroke="%s" stroke-width="2"%s/></svg>%s</span>`, s.colour, dash, html.EscapeString(s.name))
	}
	b.WriteString(`<span><svg width="22" height="12"><rect x="1" y="1" width="20" height="10" class="fband"/></svg>fault active</span></div>`)
	return template.HTML(b.String()) // every value above is a number or escaped
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
