package reports

import (
	"slices"
	"strconv"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// excerptPicker chooses, from the events of an anomaly's excerptSpan seen
// one at a time in file order, the rows of its excerpt: all of them when
// there are at most maxExcerptRows; else the events of the anomaly's
// clients, its operations and the harness (faults, notes) first, and then
// the others, the closest to the anomaly's start first (the earlier on a
// tie). It holds at most 2 * maxExcerptRows events of each kind, however
// long the span.
type excerptPicker struct {
	a          checker.Anomaly
	hotOp      map[int64]bool
	involved   map[int]bool
	total, pri int // events seen; those of the first kind
	first      []picked
	rest       []picked
}

// picked is an event kept, with its position in the span.
type picked struct {
	n int
	e history.Event
}

func newExcerptPicker(a checker.Anomaly) *excerptPicker {
	p := &excerptPicker{a: a, hotOp: map[int64]bool{}, involved: map[int]bool{0: true}}
	for _, id := range a.Ops {
		p.hotOp[id] = true
	}
	for _, c := range a.Clients {
		p.involved[c] = true
	}
	return p
}

func (p *excerptPicker) add(e *history.Event) {
	ev := picked{p.total, *e}
	p.total++
	if p.involved[e.Client] || p.hotOp[e.OpID] {
		p.pri++
		p.first = p.keep(append(p.first, ev))
	} else {
		p.rest = p.keep(append(p.rest, ev))
	}
}

// keep trims evs to the maxExcerptRows closest to the start once it holds
// twice as many.
func (p *excerptPicker) keep(evs []picked) []picked {
	if len(evs) < 2*maxExcerptRows {
		return evs
	}
	p.byCloseness(evs)
	return evs[:maxExcerptRows]
}

// byCloseness orders evs by distance to the anomaly's start, then position.
func (p *excerptPicker) byCloseness(evs []picked) {
	slices.SortFunc(evs, func(x, y picked) int {
		if dx, dy := absDiff(x.e.Time, p.a.Start), absDiff(y.e.Time, p.a.Start); dx != dy {
			if dx < dy {
				return -1
			}
			return 1
		}
		return x.n - y.n
	})
}

// closest returns the n of evs closest to the start (all when fewer).
func (p *excerptPicker) closest(evs []picked, n int) []picked {
	p.byCloseness(evs)
	return evs[:min(n, len(evs))]
}

// view renders the excerpt, its rows in file order.
func (p *excerptPicker) view(rowed map[int64]bool) *excerptView {
	span := excerptSpan(p.a)
	ev := &excerptView{From: secs(max(span.From, 0), 3), To: secs(span.To, 3), Total: p.total}
	var rows []picked
	switch {
	case p.total <= maxExcerptRows:
		rows = append(p.first, p.rest...)
	case p.pri >= maxExcerptRows:
		rows = p.closest(p.first, maxExcerptRows)
	default:
		rows = append(p.first, p.closest(p.rest, maxExcerptRows-p.pri)...)
	}
	slices.SortFunc(rows, func(x, y picked) int { return x.n - y.n })
	for _, r := range rows {
		e := &r.e
		row := eventRow{
			Seq: e.Seq, Time: secs(e.Time, 3), Type: string(e.Type), Op: string(e.Op), OpID: e.OpID,
			Text: eventText(*e), Class: string(e.Type),
		}
		if e.Client != 0 {
			row.Client = strconv.Itoa(e.Client)
		}
		if e.OpID != 0 && rowed[e.OpID] {
			row.OpLink = "#op-" + strconv.FormatInt(e.OpID, 10)
		}
		row.Hot = (e.OpID != 0 && p.hotOp[e.OpID]) || e.Type == history.FaultStart || e.Type == history.FaultEnd
		ev.Rows = append(ev.Rows, row)
	}
	return ev
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}
