package shrink

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// The witness time line's geometry (SVG user units).
const (
	witnessWidth  = 760
	witnessLabelW = 80
	witnessRowH   = 34
	witnessTop    = 24
	maxWitnessOps = 12 // operations drawn per client besides the anomaly's own
)

// witnessView is the anomaly on a small time line: the operations of its
// clients around it (the anomaly's own marked) and the faults then.
type witnessView struct {
	Width, Height int
	From, To      string // the window, in seconds since the run's start
	Rows          []witnessRow
	Faults        []witnessBar
	Anomaly       witnessBar
	Ticks         []witnessTick
}

type witnessRow struct {
	Label string
	Y     int
	Bars  []witnessBar
	Holds []witnessBar // when the client believed it held the lock
}

type witnessBar struct {
	X, W  float64
	Y     int
	Label string
	Class string // ok | fail | info, own (the anomaly's), fault
}

type witnessTick struct {
	X     float64
	Label string
}

// witnessOf lays out anomaly a of history h: a window from the earliest
// call of its operations (or the start of the last fault before it) to
// its end, with each of its clients' operations in the window on a row.
func witnessOf(h *history.History, a checker.Anomaly) witnessView {
	from, to := a.Start, a.End
	own := map[int64]bool{}
	for _, op := range h.Ops {
		if slices.Contains(a.Ops, op.OpID) {
			own[op.OpID] = true
			from = min(from, op.Call)
			to = max(to, finite(op))
		}
	}
	var faults []history.Fault
	if f, ok := faultBefore(h.Faults, a.Start); ok {
		from = min(from, f.Start)
	}
	pad := max((to-from)/20, int64(10*time.Millisecond))
	from, to = max(from-pad, 0), to+pad
	for _, f := range h.Faults {
		if !f.Failed && f.Start < to && f.End > from {
			faults = append(faults, f)
		}
	}
	x := func(t int64) float64 {
		t = min(max(t, from), to)
		return math.Round(10*(witnessLabelW+float64(t-from)/float64(to-from)*(witnessWidth-witnessLabelW-10))) / 10
	}
	v := witnessView{Width: witnessWidth, From: secs(from), To: secs(to)}
	var mine []witnessBar
	for i, c := range a.Clients {
		row := witnessRow{Label: fmt.Sprintf("client %d", c), Y: witnessTop + i*witnessRowH}
		n := 0
		for _, op := range h.Ops {
			if op.Client != c || op.Call > to || finite(op) < from {
				continue
			}
			if !own[op.OpID] {
				if op.Op == history.Acquire && op.Type == history.Fail || n >= maxWitnessOps {
					// A failed try changes nothing: not part of the proof.
					continue
				}
				n++
			}
			cls := string(op.Type)
			if own[op.OpID] {
				cls = "own"
			}
			bar := witnessBar{X: x(op.Call), W: span(x(finite(op)), x(op.Call)), Y: row.Y, Class: cls,
				Label: fmt.Sprintf("%s %s, %s-%s s", op.Op, op.Type, secs(op.Call), secs(finite(op)))}
			if own[op.OpID] {
				bar.W = max(bar.W, 5)
				mine = append(mine, bar) // drawn last, on top
				continue
			}
			row.Bars = append(row.Bars, bar)
		}
		row.Bars = append(row.Bars, mine...)
		mine = nil
		for _, hd := range holdsOf(h, c, from, to) {
			row.Holds = append(row.Holds, witnessBar{X: x(hd[0]), W: span(x(hd[1]), x(hd[0])), Y: row.Y, Class: "hold",
				Label: fmt.Sprintf("client %d believed it held the lock, %s-%s s", c, secs(hd[0]), secs(hd[1]))})
		}
		v.Rows = append(v.Rows, row)
	}
	v.Height = witnessTop + len(v.Rows)*witnessRowH + 30
	for _, f := range faults {
		end := f.End
		if end == history.Never {
			end = to
		}
		v.Faults = append(v.Faults, witnessBar{X: x(f.Start), W: span(x(end), x(f.Start)), Class: "fault",
			Label: fmt.Sprintf("%s %s, %s-%s s", f.Name, f.Target, secs(f.Start), secs(end))})
	}
	v.Anomaly = witnessBar{X: x(a.Start), W: span(x(a.End), x(a.Start)), Class: "anomaly",
		Label: fmt.Sprintf("%s, %s-%s s", a.Kind, secs(a.Start), secs(a.End))}
	for i := range 5 {
		t := from + (to-from)*int64(i)/4
		v.Ticks = append(v.Ticks, witnessTick{X: x(t), Label: secs(t)})
	}
	return v
}

// finite is an operation's return, or its recorded completion when it
// never returned, or its call.
func finite(op history.Operation) int64 {
	switch {
	case op.Return != history.Never:
		return op.Return
	case op.Completed != history.Never && op.Completed > 0:
		return op.Completed
	}
	return op.Call
}

func secs(ns int64) string { return fmt.Sprintf("%.2f", time.Duration(ns).Seconds()) }

// span is the width of a bar from x0 to x1, at least 2 units to be seen.
func span(x1, x0 float64) float64 { return max(math.Round(10*(x1-x0))/10, 2) }

// holdsOf are the spans in [from, to] during which client c believed it
// held the lock: from a successful acquire's return to its next release's
// call (or its process's end, or to).
func holdsOf(h *history.History, c int, from, to int64) [][2]int64 {
	var out [][2]int64
	start := int64(-1)
	for _, op := range h.Ops {
		if op.Client != c {
			continue
		}
		switch {
		case op.Op == history.Acquire && op.Type == history.OK && start < 0:
			start = op.Return
		case op.Op == history.Release && start >= 0:
			out = appendSpan(out, start, op.Call, from, to)
			start = -1
		}
	}
	if start >= 0 {
		out = appendSpan(out, start, min(h.ClientEnd(c), to), from, to)
	}
	return out
}

func appendSpan(out [][2]int64, a, b, from, to int64) [][2]int64 {
	if b < from || a > to {
		return out
	}
	return append(out, [2]int64{max(a, from), min(b, to)})
}
