package reports

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// Layout of the time line, in SVG pixels. The plot is PlotW wide whatever
// the run's length: a 60 s run gets 50 ms per pixel.
const (
	labelW     = 150.0 // left column for lane labels
	plotW      = 1200.0
	rightPad   = 24.0
	topPad     = 6.0
	faultRowH  = 14.0 // one row of fault labels
	maxFRows   = 4    // fault label rows; further labels only as tooltips
	anomRowH   = 18.0 // one row of anomaly numbers
	maxARows   = 3
	laneH      = 28.0
	laneGap    = 4.0
	axisH      = 34.0
	tickBucket = 1.0 // px per bucket of failed-acquire ticks, up to 32 lanes
	dotBucket  = 3.0 // px per bucket of write and failed-release dots, up to 16 lanes
	mergeGap   = 1.0 // px: holds and indeterminate marks closer than this merge
	narrow     = 3.0 // px: a hold narrower than this may merge with its neighbour
)

// geometry is where things sit inside a lane, relative to its top: hold
// bars, indeterminate marks and write dots in the upper band, the
// failed-acquire density ticks in a strip along the lane's bottom edge.
type geometry struct {
	LaneH    float64
	BarY     float64 // top of hold bars
	BarH     float64
	Mid      float64 // centre line of the bars: life line and dots
	TickBase float64 // failed-acquire ticks grow upwards from here
	TickMax  float64 // longest tick
	LabelY   float64 // baseline of the lane label
	SubY     float64 // baseline of the pid line
}

var geo = geometry{LaneH: laneH, BarY: 3, BarH: 14, Mid: 10, TickBase: 26.5, TickMax: 7.5, LabelY: 12, SubY: 23}

// timelineView is the SVG time line. All coordinates are SVG pixels.
type timelineView struct {
	Width, Height float64
	PlotX, PlotW  float64
	LanesTop      float64 // y of the first lane
	LanesBottom   float64 // y below the last lane
	AnomRowY      float64 // y of the first row of anomaly numbers
	Ticks         []axisTick
	Lanes         []laneView
	Bands         []bandView
	Marks         []anomalyMark
	End           int64 // ns at the right edge
	Geo           geometry
}

type axisTick struct {
	X     float64
	Label string
}

// laneView is one client process's lane.
type laneView struct {
	Client  int
	PID     int
	Restart int // 0 for the client's first process, n for its n-th replacement
	Label   string
	Sub     string
	Title   string
	Y       float64 // top of the lane
	X1, X2  float64 // the process's life
	Ended   bool    // the process ended before the history did
	Odd     bool    // every other lane gets a shaded background
	Color   string
	Holds   []barView
	Indet   []barView // indeterminate operations, merged when close
	Faults  []barView // faults aimed at this client process
	Ticks   tickPath  // failed acquires
	Writes  []dotView // resource writes accepted
	Stale   []dotView // writes rejected for a stale token
	RelFail []dotView // failed releases
}

// barView is an interval on a lane; N > 1 when several merged.
type barView struct {
	X, W    float64
	N       int
	Opacity float64 // of merged holds: the share of their span they held the lock
	Title   string
	Label   string // drawn inside when wide enough (the fencing token)
	Hot     bool   // involved in a shown anomaly
}

// dotView is one bucket of point events on a lane.
type dotView struct {
	X     float64
	N     int
	Title string
}

// tickPath is a lane's failed acquires, bucketed per pixel into one SVG
// path of vertical ticks whose length grows with the bucket's count.
type tickPath struct {
	D     string
	Count int
	Title string
}

// bandView is one fault as a vertical band over all lanes.
type bandView struct {
	X, W     float64
	Color    string
	Label    string
	LabelRow int // -1: no room, the tooltip carries the label
	LabelY   float64
	Title    string
}

// anomalyMark is the red outline around an anomaly on the time line.
type anomalyMark struct {
	N          int
	X, W, Y, H float64
	NumX, NumY float64 // centre of the number's circle
	NumRow     int
	Title      string
	Class      string // severity
	Anchor     string
}

// clientColors are the lanes' colours by logical client (Tableau 10).
var clientColors = []string{
	"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
	"#edc948", "#9c755f", "#ff9da7", "#e15759", "#bab0ac",
}

func clientColor(id int) string {
	if id < 1 {
		id = 1
	}
	return clientColors[(id-1)%len(clientColors)]
}

// faultColors are the bands' colours by fault name.
var faultColors = map[string]string{
	"pause":     "#8e6cc4",
	"kill":      "#d9534f",
	"crash":     "#d9534f",
	"partition": "#e8a33d",
	"clock":     "#2a9d8f",
	"skew":      "#2a9d8f",
	"delay":     "#5b8def",
	"restart":   "#c0504d",
	"gc":        "#8e6cc4",
}

var spareFaultColors = []string{"#6c8ebf", "#b85450", "#82b366", "#d6b656", "#9673a6", "#6a9fb5"}

func faultColor(name string) string {
	if c, ok := faultColors[name]; ok {
		return c
	}
	for k, c := range faultColors {
		if strings.HasPrefix(name, k) {
			return c
		}
	}
	var h uint32
	for i := 0; i < len(name); i++ {
		h = h*31 + uint32(name[i])
	}
	return spareFaultColors[h%uint32(len(spareFaultColors))]
}

// scale maps history times onto the plot.
type scale struct {
	x0, w float64
	end   int64
}

func (s scale) x(t int64) float64 {
	if t < 0 {
		t = 0
	}
	if t > s.end {
		t = s.end
	}
	return s.x0 + float64(t)/float64(s.end)*s.w
}

// clip maps [from, to] (to may be Never) onto the plot, at least min wide.
func (s scale) clip(from, to int64, min float64) (x, w float64) {
	if to == history.Never || to > s.end {
		to = s.end
	}
	x = s.x(from)
	w = s.x(to) - x
	if w < min {
		w = min
	}
	if x+w > s.x0+s.w {
		x = math.Max(s.x0, s.x0+s.w-w)
	}
	return x, w
}

// timeEnd is the time at the right edge of the time line: the last event,
// at least 1 ms.
func timeEnd(h *history.History) int64 {
	return max(h.End, int64(1e6))
}

// lanes assigns each client process a lane. Client processes come from
// h.Clients; a client id that has operations but no process record gets a
// lane over the whole run. Lanes are ordered by client id, then start, so
// a replacement process sits just below the one it replaced.
type lanes struct {
	views    []laneView
	starts   []int64
	ends     []int64       // history.Never while the process outlived the history
	byClient map[int][]int // lane indices in order of start
}

func buildLanes(h *history.History, s scale) *lanes {
	type proc struct {
		id, pid    int
		start, end int64
		detail     string
	}
	var ps []proc
	known := map[int]bool{}
	for _, c := range h.Clients {
		ps = append(ps, proc{c.ID, c.PID, c.Start, c.End, c.Detail})
		known[c.ID] = true
	}
	for _, o := range h.Ops {
		if o.Client > 0 && !known[o.Client] {
			known[o.Client] = true
			ps = append(ps, proc{id: o.Client, start: 0, end: history.Never})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].id != ps[j].id {
			return ps[i].id < ps[j].id
		}
		return ps[i].start < ps[j].start
	})
	l := &lanes{byClient: map[int][]int{}}
	restarts := map[int]int{}
	for _, p := range ps {
		n := restarts[p.id]
		restarts[p.id]++
		lv := laneView{
			Client: p.id, PID: p.pid, Restart: n,
			Label: fmt.Sprintf("client %d", p.id), Color: clientColor(p.id),
		}
		var sub []string
		if p.pid != 0 {
			sub = append(sub, fmt.Sprintf("pid %d", p.pid))
		}
		if n > 0 {
			sub = append(sub, fmt.Sprintf("restart %d", n))
		}
		lv.Sub = strings.Join(sub, ", ")
		lv.X1 = s.x(p.start)
		lv.X2 = s.x(p.end)
		lv.Ended = p.end != history.Never && p.end < h.End
		title := fmt.Sprintf("client %d", p.id)
		if p.pid != 0 {
			title += fmt.Sprintf(" (pid %d)", p.pid)
		}
		title += ": process " + span(p.start, p.end, 3)
		if p.detail != "" {
			title += "; exit: " + p.detail
		}
		lv.Title = title
		l.byClient[p.id] = append(l.byClient[p.id], len(l.views))
		l.views = append(l.views, lv)
		l.starts = append(l.starts, p.start)
		l.ends = append(l.ends, p.end)
	}
	return l
}

// at returns the lane of client id's process at time t: the last one
// started at or before t, or its first one. -1 when the client has none.
func (l *lanes) at(id int, t int64) int {
	idx := l.byClient[id]
	if len(idx) == 0 {
		return -1
	}
	best := idx[0]
	for _, i := range idx {
		if l.starts[i] <= t {
			best = i
		}
	}
	return best
}

// buildTimeline lays out the SVG time line. shown are the indices of the
// anomalies drawn on it.
func buildTimeline(h *history.History, as []checker.Anomaly, shown []int, holds []checker.Hold) timelineView {
	s := scale{x0: labelW, w: plotW, end: timeEnd(h)}
	tl := timelineView{PlotX: labelW, PlotW: plotW, Width: labelW + plotW + rightPad, End: s.end, Geo: geo}
	l := buildLanes(h, s)

	// Fault bands and their labels, packed into rows.
	var spans [][2]float64
	for _, f := range h.Faults {
		x, w := s.clip(f.Start, f.End, minBandPx)
		label := f.Name
		if f.Target != "" {
			label += " " + f.Target
		}
		if f.Point != "" && f.Point != "after-grant" {
			label += " at " + f.Point // a gap inside the client's steps
		}
		title := label + ": " + span(f.Start, f.End, 2)
		if f.Detail != "" {
			title += "; " + f.Detail
		}
		tl.Bands = append(tl.Bands, bandView{X: x, W: w, Color: faultColor(f.Name), Label: label, Title: title})
		spans = append(spans, [2]float64{x, x + float64(len(label))*charPx + 4})
	}
	frows := packRows(spans, maxFRows)
	nf := usedRows(frows)
	for i := range tl.Bands {
		tl.Bands[i].LabelRow = frows[i]
		tl.Bands[i].LabelY = topPad + float64(frows[i])*faultRowH + 10
	}

	// Anomaly regions: x now, y once the lanes are placed.
	hot := map[int64]bool{} // OpIDs named by shown anomalies
	var aspans [][2]float64
	for _, i := range shown {
		a := as[i]
		x, w := s.clip(a.Start, a.End, minAnomPx)
		m := anomalyMark{
			N: i + 1, X: x, W: w, Class: sevClass(a.Severity), Anchor: anchor(i),
			Title: fmt.Sprintf("#%d %s (%s), clients %s, %s", i+1, a.Kind, a.Severity, intList(a.Clients), span(a.Start, a.End, 3)),
		}
		if a.Cause != "" {
			m.Title += "; cause: " + causeShort(string(a.Cause))
		}
		m.NumX = x + w/2
		tl.Marks = append(tl.Marks, m)
		aspans = append(aspans, [2]float64{m.NumX - 9, m.NumX + 9})
		if a.Severity != "info" {
			for _, id := range a.Ops {
				hot[id] = true
			}
		}
	}
	arows := packRows(aspans, maxARows)
	na := usedRows(arows)
	tl.AnomRowY = topPad + float64(nf)*faultRowH
	tl.LanesTop = tl.AnomRowY + float64(na)*anomRowH + 4
	for i := range l.views {
		l.views[i].Y = tl.LanesTop + float64(i)*(laneH+laneGap)
		l.views[i].Odd = i%2 == 1
	}
	tl.LanesBottom = tl.LanesTop + float64(len(l.views))*(laneH+laneGap) - laneGap
	if len(l.views) == 0 {
		tl.LanesBottom = tl.LanesTop + laneH
	}
	for k, i := range shown {
		a := as[i]
		m := &tl.Marks[k]
		m.NumRow = arows[k]
		m.NumY = tl.AnomRowY + float64(arows[k])*anomRowH + anomRowH/2
		top, bottom := math.Inf(1), math.Inf(-1)
		for _, c := range a.Clients {
			for _, li := range l.byClient[c] {
				lv := l.views[li]
				if li != l.at(c, a.Start) && li != l.at(c, a.End) {
					continue
				}
				top = math.Min(top, lv.Y)
				bottom = math.Max(bottom, lv.Y+laneH)
			}
		}
		if math.IsInf(top, 1) { // no lane for its clients: span them all
			top, bottom = tl.LanesTop, tl.LanesBottom
		}
		m.Y, m.H = top-2, bottom-top+4
	}

	addHolds(l, s, holds, hot, as, shown)
	addOps(l, s, h)
	addClientFaults(l, s, h)

	tl.Lanes = l.views
	tl.Ticks = axisTicks(s)
	tl.Height = tl.LanesBottom + axisH
	return tl
}

func anchor(i int) string { return "anomaly-" + strconv.Itoa(i+1) }

func sevClass(s checker.Severity) string {
	switch s {
	case "violation", "contained", "info":
		return string(s)
	default:
		return "other"
	}
}

// packRows assigns each span [x1, x2] the lowest row in which it overlaps
// no earlier span, or -1 when all maxRows rows are taken there.
func packRows(spans [][2]float64, maxRows int) []int {
	out := make([]int, len(spans))
	ends := make([]float64, maxRows)
	for i := range ends {
		ends[i] = math.Inf(-1)
	}
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]][0] < spans[order[b]][0] })
	for _, i := range order {
		out[i] = -1
		for r := range ends {
			if spans[i][0] >= ends[r] {
				out[i] = r
				ends[r] = spans[i][1]
				break
			}
		}
	}
	return out
}

func usedRows(rows []int) int {
	n := 0
	for _, r := range rows {
		if r+1 > n {
			n = r + 1
		}
	}
	return n
}

// addHolds draws the hold intervals. Holds of one lane that lie within a
// pixel of each other merge into one bar when either is narrower than a few
// pixels, so a long run stays legible and small; holds involved in a shown
// anomaly never merge.
func addHolds(l *lanes, s scale, holds []checker.Hold, hot map[int64]bool, as []checker.Anomaly, shown []int) {
	type agg struct {
		bar        barView
		start, end int64
		held       int64 // sum of the merged holds' lengths
		tmin, tmax int64
		tokens     bool
	}
	pending := map[int]*agg{}
	flush := func(li int) {
		p := pending[li]
		if p == nil {
			return
		}
		if p.bar.N > 1 {
			share := 1.0
			if p.end > p.start {
				share = math.Min(1, float64(p.held)/float64(p.end-p.start))
			}
			p.bar.Opacity = 0.25 + 0.75*share
			p.bar.Title = fmt.Sprintf("client %d: %d holds merged, %s, holding %.0f%% of that time",
				l.views[li].Client, p.bar.N, span(p.start, p.end, 3), 100*share)
			if p.tokens {
				p.bar.Title += fmt.Sprintf("; tokens %d-%d", p.tmin, p.tmax)
			}
			p.bar.Label = ""
		}
		l.views[li].Holds = append(l.views[li].Holds, p.bar)
		delete(pending, li)
	}
	for _, hd := range holds {
		li := l.at(hd.Client, hd.Start)
		if li < 0 {
			continue
		}
		x, w := s.clip(hd.Start, hd.End, 1)
		isHot := hot[hd.AcquireOp] || (hd.ReleaseOp != 0 && hot[hd.ReleaseOp]) || holdInAnomaly(hd, as, shown)
		if p := pending[li]; p != nil && !isHot && !p.bar.Hot &&
			x-(p.bar.X+p.bar.W) < mergeGap && (w < narrow || p.bar.W < narrow) {
			p.bar.W = math.Max(p.bar.W, x+w-p.bar.X)
			p.bar.N++
			p.held += hd.End - hd.Start
			if hd.End > p.end {
				p.end = hd.End
			}
			if hd.Token != nil {
				if !p.tokens || *hd.Token < p.tmin {
					p.tmin = *hd.Token
				}
				if !p.tokens || *hd.Token > p.tmax {
					p.tmax = *hd.Token
				}
				p.tokens = true
			}
			continue
		}
		flush(li)
		b := barView{X: x, W: w, N: 1, Hot: isHot}
		b.Title = fmt.Sprintf("client %d held the lock %s; token %s", hd.Client, span(hd.Start, hd.End, 3), tokenStr(hd.Token))
		if hd.Owner != "" {
			b.Title += "; owner " + hd.Owner
		}
		b.Title += fmt.Sprintf("; acquire op %d (called %s)", hd.AcquireOp, secs(hd.AcquireCall, 3))
		switch hd.EndReason {
		case "release":
			b.Title += fmt.Sprintf("; ended by release op %d", hd.ReleaseOp)
		case "":
		default:
			b.Title += "; ended by " + hd.EndReason
		}
		if hd.Token != nil && w >= 8*float64(len(tokenStr(hd.Token)))+4 {
			b.Label = tokenStr(hd.Token)
		}
		b.Opacity = 1
		p := &agg{bar: b, start: hd.Start, end: hd.End, held: hd.End - hd.Start}
		if hd.Token != nil {
			p.tokens, p.tmin, p.tmax = true, *hd.Token, *hd.Token
		}
		pending[li] = p
	}
	for li := range l.views {
		flush(li)
	}
}

// holdInAnomaly reports whether a shown non-info anomaly names hd's client
// and overlaps hd.
func holdInAnomaly(hd checker.Hold, as []checker.Anomaly, shown []int) bool {
	for _, i := range shown {
		a := as[i]
		if a.Severity == "info" || a.Start > hd.End || a.End < hd.Start {
			continue
		}
		for _, c := range a.Clients {
			if c == hd.Client {
				return true
			}
		}
	}
	return false
}

// bucket accumulates point events of one kind on one lane.
type bucket struct {
	n           int
	x           float64 // of the first event
	first, last int64
	detail      string // of the first event
	tmin, tmax  int64
	tokens      bool
	reasons     map[string]int
}

type buckets map[int]*bucket

func (b buckets) add(key int, x float64, t int64, detail string, token *int64, reason string) {
	k := b[key]
	if k == nil {
		k = &bucket{x: x, first: t, last: t, detail: detail, reasons: map[string]int{}}
		b[key] = k
	}
	k.n++
	if t < k.first {
		k.first = t
	}
	if t > k.last {
		k.last = t
	}
	if token != nil {
		if !k.tokens || *token < k.tmin {
			k.tmin = *token
		}
		if !k.tokens || *token > k.tmax {
			k.tmax = *token
		}
		k.tokens = true
	}
	if reason != "" {
		k.reasons[reason]++
	}
}

func (b buckets) keys() []int {
	ks := make([]int, 0, len(b))
	for k := range b {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// dots turns buckets into dots; what names the events ("write accepted").
func (b buckets) dots(what string) []dotView {
	var out []dotView
	for _, k := range b.keys() {
		bk := b[k]
		d := dotView{X: bk.x, N: bk.n}
		if bk.n == 1 {
			d.Title = bk.detail
		} else {
			d.Title = fmt.Sprintf("%d %s, %s-%s", bk.n, what, secs(bk.first, 3), secs(bk.last, 3))
			if bk.tokens {
				d.Title += fmt.Sprintf("; tokens %d-%d", bk.tmin, bk.tmax)
			}
			if len(bk.reasons) > 0 {
				d.Title += "; " + reasonTally(bk.reasons)
			}
		}
		out = append(out, d)
	}
	return out
}

// byCount returns m's keys, the most counted first (ties by name).
func byCount(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if m[ks[i]] != m[ks[j]] {
			return m[ks[i]] > m[ks[j]]
		}
		return ks[i] < ks[j]
	})
	return ks
}

func reasonTally(m map[string]int) string {
	ks := byCount(m)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// addOps draws the per-operation marks: failed acquires as per-pixel tick
// buckets, resource writes and failed releases as per-3-pixel dot buckets,
// indeterminate operations as hatched intervals from their call to the time
// they were given up on (merged when within a pixel).
func addOps(l *lanes, s scale, h *history.History) {
	n := len(l.views)
	// With many lanes, wider dot buckets keep the page small.
	dotPx := dotBucket * math.Max(1, float64(n)/16)
	tickPx := tickBucket * math.Max(1, math.Floor(float64(n)/32))
	fails := make([]map[int]int, n)
	failReasons := make([]map[string]int, n)
	writes, stale, relFail := make([]buckets, n), make([]buckets, n), make([]buckets, n)
	for i := 0; i < n; i++ {
		fails[i] = map[int]int{}
		failReasons[i] = map[string]int{}
		writes[i], stale[i], relFail[i] = buckets{}, buckets{}, buckets{}
	}
	type indet struct {
		bar        barView
		start, end int64
		ops        map[history.Op]int
	}
	pend := make([]*indet, n)
	flushIndet := func(li int) {
		p := pend[li]
		if p == nil {
			return
		}
		if p.bar.N > 1 {
			parts := make(map[string]int, len(p.ops))
			for op, c := range p.ops {
				parts[string(op)] = c
			}
			p.bar.Title = fmt.Sprintf("%d indeterminate operations, %s-%s (%s)", p.bar.N, secs(p.start, 3), secs(p.end, 3), reasonTally(parts))
		}
		l.views[li].Indet = append(l.views[li].Indet, p.bar)
		pend[li] = nil
	}
	for i := range h.Ops {
		o := &h.Ops[i]
		li := l.at(o.Client, o.Call)
		if li < 0 {
			continue
		}
		at := o.Return
		if at == history.Never {
			at = o.Call
		}
		x := s.x(at)
		switch {
		case o.Type == history.Info:
			end := o.Completed
			if end == history.Never {
				end = l.ends[li] // it hangs until its process ends
			}
			if end == history.Never || end < o.Call {
				end = s.end
			}
			bx, bw := s.clip(o.Call, end, 2)
			if p := pend[li]; p != nil && bx-(p.bar.X+p.bar.W) < mergeGap {
				p.bar.W = math.Max(p.bar.W, bx+bw-p.bar.X)
				p.bar.N++
				p.ops[o.Op]++
				if end > p.end {
					p.end = end
				}
				continue
			}
			flushIndet(li)
			t := fmt.Sprintf("indeterminate %s (op %d) by client %d: called %s, ", o.Op, o.OpID, o.Client, secs(o.Call, 3))
			if o.Completed == history.Never {
				t += "never completed"
			} else {
				t += "given up at " + secs(o.Completed, 3)
			}
			if o.Error != "" {
				t += ": " + o.Error
			}
			pend[li] = &indet{bar: barView{X: bx, W: bw, N: 1, Title: t}, start: o.Call, end: end, ops: map[history.Op]int{o.Op: 1}}
		case o.Op == history.Acquire && o.Type == history.Fail:
			fails[li][int((x-s.x0)/tickPx)]++
			r := o.Reason
			if r == "" {
				r = "unknown"
			}
			failReasons[li][r]++
		case o.Op == history.Write && o.Type == history.OK:
			d := fmt.Sprintf("write accepted at %s by client %d (op %d): value %s (was %s), token %s",
				secs(at, 3), o.Client, o.OpID, tokenStr(o.Value), tokenStr(o.Prev), tokenStr(o.Token))
			writes[li].add(int((x-s.x0)/dotPx), x, at, d, o.Token, "")
		case o.Op == history.Write && o.Type == history.Fail && o.Reason == history.ReasonStaleToken:
			d := fmt.Sprintf("stale write REJECTED at %s, client %d (op %d): token %s", secs(at, 3), o.Client, o.OpID, tokenStr(o.Token))
			if o.Error != "" {
				d += ": " + o.Error
			}
			stale[li].add(int((x-s.x0)/dotPx), x, at, d, o.Token, "")
		case o.Op == history.Release && o.Type == history.Fail:
			d := fmt.Sprintf("release failed at %s, client %d (op %d): %s", secs(at, 3), o.Client, o.OpID, o.Reason)
			if o.Error != "" {
				d += ": " + o.Error
			}
			relFail[li].add(int((x-s.x0)/dotPx), x, at, d, nil, o.Reason)
		}
	}
	for li := range l.views {
		flushIndet(li)
		lv := &l.views[li]
		lv.Writes = writes[li].dots("writes accepted")
		lv.Stale = stale[li].dots("stale writes REJECTED")
		lv.RelFail = relFail[li].dots("failed releases")
		lv.Ticks = tickPathFor(fails[li], s, tickPx, lv.Y+geo.TickBase)
		if lv.Ticks.Count > 0 {
			lv.Ticks.Title = fmt.Sprintf("client %d: %d failed acquires (%s); a longer tick is more failures in that %.0f ms",
				lv.Client, lv.Ticks.Count, reasonTally(failReasons[li]), float64(s.end)/s.w*tickPx/1e6)
		}
	}
}

// tickPathFor renders buckets of failed acquires, px wide, as one path of
// vertical ticks rising from base: one failure is a 3 px tick, and each
// doubling adds 1.5 px, up to geo.TickMax. After the first tick the path
// moves relatively, which keeps it about 10 bytes per bucket.
func tickPathFor(counts map[int]int, s scale, px, base float64) tickPath {
	keys := make([]int, 0, len(counts))
	total := 0
	for k, c := range counts {
		keys = append(keys, k)
		total += c
	}
	sort.Ints(keys)
	var b strings.Builder
	prevK, prevN := 0, 0.0
	for i, k := range keys {
		n := math.Round(2*math.Min(3+1.5*math.Log2(float64(counts[k])), geo.TickMax)) / 2
		if i == 0 {
			b.WriteString("M" + f1(s.x0+(float64(k)+0.5)*px) + " " + f1(base))
		} else {
			// back down to the base line and px*(k-prevK) to the right
			b.WriteString("m" + f1(float64(k-prevK)*px) + " " + f1(prevN))
		}
		b.WriteString("v-" + f1(n))
		prevK, prevN = k, n
	}
	return tickPath{D: b.String(), Count: total}
}

// f1 formats a coordinate with one decimal, trimming ".0".
func f1(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// clientTargets parses a fault target naming client processes: "client 3",
// or several separated by commas ("client 3, client 5").
func clientTargets(target string) []int {
	var out []int
	for _, part := range strings.Split(target, ",") {
		part = strings.TrimSpace(part)
		rest, ok := strings.CutPrefix(part, "client ")
		if !ok {
			continue
		}
		if id, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// addClientFaults marks faults aimed at a client on that client's lane.
func addClientFaults(l *lanes, s scale, h *history.History) {
	for _, f := range h.Faults {
		for _, id := range clientTargets(f.Target) {
			li := l.at(id, f.Start)
			if li < 0 {
				continue
			}
			x, w := s.clip(f.Start, f.End, minBandPx)
			l.views[li].Faults = append(l.views[li].Faults, barView{
				X: x, W: w, N: 1,
				Title: fmt.Sprintf("%s %s: %s", f.Name, f.Target, span(f.Start, f.End, 3)),
			})
		}
	}
}

// axisTicks puts 7 to 15 ticks at round numbers of seconds.
func axisTicks(s scale) []axisTick {
	endSec := float64(s.end) / 1e9
	step := niceStep(endSec / 14)
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step)))
	}
	var out []axisTick
	for i := 0; ; i++ {
		t := float64(i) * step
		if t > endSec*1.0000001 {
			break
		}
		out = append(out, axisTick{X: s.x(int64(t * 1e9)), Label: strconv.FormatFloat(t, 'f', dec, 64) + "s"})
	}
	return out
}
