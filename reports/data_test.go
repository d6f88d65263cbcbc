package reports

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

func TestLanes(t *testing.T) {
	info := defaultInfo()
	info.Clients = 3
	b := newBuilder(t, info)
	b.start(1, 11, 0)
	b.start(2, 12, 0)
	b.start(3, 13, 0)
	b.exit(2, 3, "killed by nemesis")
	b.start(2, 22, 3.5)
	b.op(2, history.Acquire, 1, 1.1, history.OK, withToken(1))
	b.op(2, history.Acquire, 4, 4.1, history.OK, withToken(2))
	b.op(4, history.Acquire, 5, 5.1, history.Fail, withReason(history.ReasonHeld)) // no process record
	h := b.build(10)

	s := scale{x0: labelW, w: plotW, end: timeEnd(h)}
	l := buildLanes(h, s)
	var got []string
	for _, lv := range l.views {
		got = append(got, lv.Label+"/"+lv.Sub)
	}
	require.Equal(t, []string{"client 1/pid 11", "client 2/pid 12", "client 2/pid 22, restart 1", "client 3/pid 13", "client 4/"}, got)
	require.True(t, l.views[1].Ended, "the crashed process's lane ends")
	require.InDelta(t, labelW+plotW*0.3, l.views[1].X2, 0.01)
	require.InDelta(t, labelW+plotW*0.35, l.views[2].X1, 0.01)
	require.Contains(t, l.views[1].Title, "killed by nemesis")

	tests := []struct {
		name   string
		client int
		at     float64
		lane   int
	}{
		{"first process", 2, 1, 1},
		{"replacement", 2, 4, 2},
		{"before any start", 2, -1, 1},
		{"client without record", 4, 5, 4},
		{"unknown client", 9, 5, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.lane, l.at(tc.client, ns(tc.at)))
		})
	}
}

func TestTimelineSample(t *testing.T) {
	h := sampleHistory(t)
	r := sampleResult(t, h)
	shown, omitted := selectAnomalies(r.Anomalies, maxAnomalies)
	require.Empty(t, omitted)
	tl := buildTimeline(h, r.Anomalies, shown, checker.Holds(h))
	s := scale{x0: labelW, w: plotW, end: timeEnd(h)}

	require.Len(t, tl.Lanes, 2)
	c1, c2 := tl.Lanes[0], tl.Lanes[1]
	require.Equal(t, 1, c1.Client)
	require.Equal(t, 2, c2.Client)

	// Client 1's first hold: from its acquire's return to its release call.
	require.NotEmpty(t, c1.Holds)
	require.InDelta(t, s.x(ns(0.50)), c1.Holds[0].X, 0.01)
	require.InDelta(t, s.x(ns(4.10))-s.x(ns(0.50)), c1.Holds[0].W, 0.01)
	require.True(t, c1.Holds[0].Hot, "the double holder's hold is marked")
	require.Contains(t, c1.Holds[0].Title, "token 1")
	require.Equal(t, "1", c1.Holds[0].Label)

	// Failed acquires of client 2 are bucketed into ticks; its timeout is
	// an indeterminate mark from its call to when it was given up.
	fails := 0
	for _, o := range h.Ops {
		if o.Op == history.Acquire && o.Type == history.Fail {
			fails++
		}
	}
	require.Greater(t, fails, 40)
	require.Equal(t, fails, c2.Ticks.Count)
	require.Contains(t, c2.Ticks.Title, "held "+itoa(int64(fails)))
	require.Len(t, c2.Indet, 1)
	require.InDelta(t, s.x(ns(1.30)), c2.Indet[0].X, 0.01)
	require.InDelta(t, s.x(ns(1.90))-s.x(ns(1.30)), c2.Indet[0].W, 0.01)
	require.Len(t, c2.Writes, 1)
	require.Len(t, c1.Writes, 1)
	require.Len(t, c1.RelFail, 1)
	require.Contains(t, c1.RelFail[0].Title, "not-owner")

	// The pause is a band over all lanes and a mark on client 1's lane.
	require.Len(t, tl.Bands, 1)
	require.Equal(t, "pause client 1", tl.Bands[0].Label)
	require.Equal(t, 0, tl.Bands[0].LabelRow)
	require.InDelta(t, s.x(ns(0.60)), tl.Bands[0].X, 0.01)
	require.Len(t, c1.Faults, 1)
	require.Empty(t, c2.Faults)

	// The double holder's region covers both lanes and links to its entry.
	require.Len(t, tl.Marks, 3)
	m := tl.Marks[0]
	require.Equal(t, "anomaly-1", m.Anchor)
	require.Equal(t, "violation", m.Class)
	require.InDelta(t, c1.Y-2, m.Y, 0.01)
	require.InDelta(t, c2.Y+laneH+2, m.Y+m.H, 0.01)
	info := tl.Marks[2]
	require.InDelta(t, c1.Y-2, info.Y, 0.01)
	require.InDelta(t, c1.Y+laneH+2, info.Y+info.H, 0.01, "a one-client anomaly covers its lane only")
	require.GreaterOrEqual(t, info.W, minAnomPx)

	require.Equal(t, "0.0s", tl.Ticks[0].Label)
	require.Equal(t, "5.0s", tl.Ticks[len(tl.Ticks)-1].Label)
}

func TestHoldMerging(t *testing.T) {
	b := newBuilder(t, defaultInfo())
	b.start(1, 1, 0)
	b.start(2, 2, 0)
	// 200 holds of 5 ms back to back (60 s run: 50 ms per pixel).
	for i := 0; i < 200; i++ {
		at := 10 + float64(i)*0.01
		b.op(1, history.Acquire, at, at+0.001, history.OK, withToken(int64(i+1)))
		b.op(1, history.Release, at+0.006, at+0.007, history.OK, nil)
	}
	// A hold of the same kind inside an anomaly stays on its own.
	b.op(2, history.Acquire, 11, 11.001, history.OK, withToken(500))
	b.op(2, history.Release, 11.006, 11.007, history.OK, nil)
	b.op(2, history.Acquire, 11.01, 11.011, history.OK, withToken(501))
	b.op(2, history.Release, 11.016, 11.017, history.OK, nil)
	h := b.build(60)
	hot := opAt(t, h, 2, history.Acquire, 11)
	as := []checker.Anomaly{{Kind: checker.KindDoubleHolder, Severity: "violation", Clients: []int{2}, Start: ns(11.001), End: ns(11.006), Ops: []int64{hot}}}
	tl := buildTimeline(h, as, []int{0}, checker.Holds(h))

	n := 0
	for _, bar := range tl.Lanes[0].Holds {
		n += bar.N
	}
	require.Equal(t, 200, n, "merged bars account for every hold")
	require.Less(t, len(tl.Lanes[0].Holds), 5)
	require.Contains(t, tl.Lanes[0].Holds[0].Title, "holds merged")
	require.Contains(t, tl.Lanes[0].Holds[0].Title, "tokens 1-200")

	require.Len(t, tl.Lanes[1].Holds, 2, "the hot hold does not merge")
	require.True(t, tl.Lanes[1].Holds[0].Hot)
	require.Equal(t, 1, tl.Lanes[1].Holds[0].N)
}

func TestTickBuckets(t *testing.T) {
	b := newBuilder(t, defaultInfo())
	b.start(1, 1, 0)
	for i := 0; i < 1000; i++ { // 1000 failures within 10 ms: one pixel
		at := 30 + float64(i)*1e-5
		b.op(1, history.Acquire, at, at+1e-6, history.Fail, withReason(history.ReasonHeld))
	}
	for i := 0; i < 10; i++ { // 10 failures 1 s apart: ten pixels
		at := 1 + float64(i)
		b.op(1, history.Acquire, at, at+1e-6, history.Fail, withReason(history.ReasonError))
	}
	h := b.build(60)
	tl := buildTimeline(h, nil, nil, checker.Holds(h))
	ticks := tl.Lanes[0].Ticks
	require.Equal(t, 1010, ticks.Count)
	require.Equal(t, 11, strings.Count(ticks.D, "v-"))
	require.Equal(t, 1, strings.Count(ticks.D, "M"), "one absolute move, then relative ones")
	require.Contains(t, ticks.Title, "held 1000, error 10")
	require.Contains(t, ticks.D, "v-7.5", "a crowded pixel gets the longest tick")
	require.Contains(t, ticks.D, "v-3m", "a single failure gets the shortest")
}

func TestPackRows(t *testing.T) {
	tests := []struct {
		name  string
		spans [][2]float64
		max   int
		want  []int
	}{
		{"apart", [][2]float64{{0, 10}, {20, 30}}, 2, []int{0, 0}},
		{"overlap", [][2]float64{{0, 10}, {5, 15}, {12, 20}}, 2, []int{0, 1, 0}},
		{"full", [][2]float64{{0, 10}, {1, 10}, {2, 10}}, 2, []int{0, 1, -1}},
		{"unsorted", [][2]float64{{20, 30}, {0, 25}}, 2, []int{1, 0}},
		{"none", nil, 2, []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, packRows(tc.spans, tc.max))
		})
	}
}

func TestAxisTicks(t *testing.T) {
	tests := []struct {
		name        string
		end         float64
		n           int
		first, last string
	}{
		{"60s", 60, 13, "0s", "60s"},
		{"61s", 61, 13, "0s", "60s"},
		{"0.8s", 0.8, 9, "0.0s", "0.8s"},
		{"5s", 5, 11, "0.0s", "5.0s"},
		{"600s", 600, 13, "0s", "600s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := axisTicks(scale{x0: labelW, w: plotW, end: ns(tc.end)})
			require.Len(t, ts, tc.n)
			require.Equal(t, tc.first, ts[0].Label)
			require.Equal(t, tc.last, ts[len(ts)-1].Label)
			require.InDelta(t, labelW, ts[0].X, 0.01)
			require.LessOrEqual(t, ts[len(ts)-1].X, labelW+plotW+0.01)
		})
	}
}

func TestClientTargets(t *testing.T) {
	tests := []struct {
		target string
		want   []int
	}{
		{"client 3", []int{3}},
		{"client 3, client 12", []int{3, 12}},
		{"redis-1", nil},
		{"clients", nil},
		{"client x", nil},
		{"", nil},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			require.Equal(t, tc.want, clientTargets(tc.target))
		})
	}
}

func TestSelectAnomalies(t *testing.T) {
	as := []checker.Anomaly{
		{Kind: "a", Severity: "info"},
		{Kind: "b", Severity: "violation"},
		{Kind: "c", Severity: "contained"},
		{Kind: "d", Severity: "info"},
		{Kind: "e", Severity: "violation"},
	}
	tests := []struct {
		name          string
		limit         int
		shown, omited []int
	}{
		{"all", 10, []int{0, 1, 2, 3, 4}, nil},
		{"violations first", 2, []int{1, 4}, []int{0, 2, 3}},
		{"then contained", 3, []int{1, 2, 4}, []int{0, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shown, omitted := selectAnomalies(as, tc.limit)
			require.Equal(t, tc.shown, shown)
			require.Equal(t, tc.omited, omitted)
		})
	}
	// Within a severity, one of each kind comes first.
	rep := []checker.Anomaly{
		{Kind: "dh", Severity: "violation"}, {Kind: "dh", Severity: "violation"}, {Kind: "dh", Severity: "violation"},
		{Kind: "lu", Severity: "violation"}, {Kind: "sw", Severity: "info"}, {Kind: "dh", Severity: "violation"},
	}
	require.Equal(t, []int{0, 3, 1, 2, 5, 4}, checker.Prioritized(rep))
	shown, omitted := selectAnomalies(rep, 2)
	require.Equal(t, []int{0, 3}, shown)
	require.Equal(t, []int{1, 2, 4, 5}, omitted)

	require.Equal(t, "1 a (info), 1 d (info)", kindTally(as, []int{0, 3}))
	require.Equal(t, "2 violation-kind (violation), 1 c (contained)", kindTally(
		[]checker.Anomaly{{Kind: "c", Severity: "contained"}, {Kind: "violation-kind", Severity: "violation"}, {Kind: "violation-kind", Severity: "violation"}},
		[]int{0, 1, 2}))
}

func TestExcerpt(t *testing.T) {
	b := newBuilder(t, defaultInfo())
	b.start(1, 1, 0)
	b.start(2, 2, 0)
	for i := 0; i < 1000; i++ { // 2000 events of client 2 between 9 and 11 s
		at := 9 + float64(i)*0.002
		b.op(2, history.Acquire, at, at+0.0005, history.Fail, withReason(history.ReasonHeld))
	}
	id := b.op(1, history.Acquire, 9.99, 10.0, history.OK, withToken(7))
	b.op(1, history.Acquire, 20, 20.1, history.OK, nil)
	h := b.build(30)

	tests := []struct {
		name     string
		a        checker.Anomaly
		minTotal int
		rows     int
		hasOp    bool
	}{
		{
			name:     "capped, the anomaly's client kept",
			a:        checker.Anomaly{Clients: []int{1}, Start: ns(10), End: ns(10), Ops: []int64{id}},
			minTotal: 900, rows: maxExcerptRows, hasOp: true,
		},
		{
			name:     "small window",
			a:        checker.Anomaly{Clients: []int{1}, Start: ns(20.05), End: ns(20.05)},
			minTotal: 2, rows: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newExcerptPicker(tc.a)
			require.NoError(t, h.EachEventWithin([]history.Span{excerptSpan(tc.a)}, func(_ int, e *history.Event) { p.add(e) }))
			ev := p.view(map[int64]bool{id: true})
			require.GreaterOrEqual(t, ev.Total, tc.minTotal)
			require.Len(t, ev.Rows, tc.rows)
			found := false
			for i, row := range ev.Rows {
				if i > 0 {
					require.Greater(t, row.Seq, ev.Rows[i-1].Seq, "rows stay in history order")
				}
				if row.OpID == id {
					found = true
					require.True(t, row.Hot)
					require.Equal(t, "#op-"+itoa(id), row.OpLink)
				}
			}
			require.Equal(t, tc.hasOp, found)
		})
	}
}

// TestCauseWords: every cause the checker gives has its plain words.
func TestCauseWords(t *testing.T) {
	for _, cause := range []checker.Cause{checker.CauseLeaseExpired, checker.CauseLeaseBroken, checker.CauseUnknown, checker.CauseSessionExpired, checker.CauseSessionAlive} {
		c := string(cause)
		require.NotEqual(t, c, causeWords(c), c)
		require.NotEqual(t, c, causeShort(c), c)
		require.Regexp(t, `\((by design|service at fault|renewed lease)\)$`, causeShort(c))
	}
	require.Equal(t, "", causeWords(""))
}
