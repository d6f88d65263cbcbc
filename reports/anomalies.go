package reports

import (
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

type anomalyView struct {
	N           int
	Anchor      string
	Kind        string
	Severity    string
	Clients     string
	ClientsWord string // "client" or "clients"
	Start, End  string
	Instant     bool // Start and End are the same to the hundredth
	Duration    string
	Faults      []string
	Explanation string
	Cause       string // checker's cause of a lease double holder, e.g. "lease-expired"
	CauseShort  string // "lease expired (by design)"
	CauseWords  string // what the cause means, in plain words
	Ops         []opRow
	OpsOmitted  int
	MissingOps  []int64 // named by the anomaly but absent from the history
	Excerpt     *excerptView
	// Witness links the anomaly's 1-minimal sub-history (relative to the
	// run directory); WitnessDir is its directory, WitnessPartial says the
	// time bound stopped its minimisation.
	Witness, WitnessDir string
	WitnessPartial      bool
}

type opRow struct {
	ID           string // element id, "" when this op already has a row above
	OpID         int64
	Client       int
	Op           string
	Call, Return string
	Outcome      string
	OutcomeClass string
	Owner        string
	Token, Value string
	Error        string
}

type excerptView struct {
	From, To string
	Total    int // events in the window
	Rows     []eventRow
}

type eventRow struct {
	Seq    int64
	Time   string
	Client string
	Type   string
	Op     string
	OpID   int64
	OpLink string // "#op-N" when that op has a row on the page
	Text   string
	Hot    bool // one of the anomaly's operations, or a fault event
	Class  string
}

// selectAnomalies picks at most limit anomalies to show in full: violations
// first, then contained ones, then the rest, each group in time order. It
// returns the shown indices in their original order and the omitted ones.
func selectAnomalies(as []checker.Anomaly, limit int) (shown, omitted []int) {
	order := checker.Prioritized(as)
	if len(order) > limit {
		omitted = append(omitted, order[limit:]...)
		order = order[:limit]
	}
	shown = append(shown, order...)
	sort.Ints(shown)
	sort.Ints(omitted)
	return shown, omitted
}

// buildAnomalies renders the shown anomalies with their operations and, for
// the first maxExcerpts of them by severity, an excerpt of the history.
func buildAnomalies(h *history.History, as []checker.Anomaly, shown []int, ops map[int64]*history.Operation) []anomalyView {
	withExcerpt := map[int]bool{}
	for _, i := range checker.Prioritized(as) {
		if len(withExcerpt) == maxExcerpts {
			break
		}
		withExcerpt[i] = true
	}
	isShown := map[int]bool{}
	for _, i := range shown {
		isShown[i] = true
	}
	rowed := map[int64]bool{} // ops that already have a row with their id
	out := make([]anomalyView, 0, len(shown))
	for _, i := range shown {
		a := as[i]
		av := anomalyView{
			N: i + 1, Anchor: anchor(i), Kind: string(a.Kind), Severity: string(a.Severity),
			Clients: intList(a.Clients), Start: secs(a.Start, 2), End: secs(a.End, 2),
			Duration: dur(a.End - a.Start), Faults: a.Faults, Explanation: a.Explanation,
			Cause: string(a.Cause), CauseShort: causeShort(string(a.Cause)), CauseWords: causeWords(string(a.Cause)),
			Witness: a.Witness, WitnessDir: path.Dir(a.Witness), WitnessPartial: a.WitnessPartial,
		}
		av.Instant = av.Start == av.End
		av.ClientsWord = "clients"
		if len(a.Clients) == 1 {
			av.ClientsWord = "client"
		}
		for k, id := range a.Ops {
			if k == maxOpRows {
				av.OpsOmitted = len(a.Ops) - k
				break
			}
			o, ok := ops[id]
			if !ok {
				av.MissingOps = append(av.MissingOps, id)
				continue
			}
			row := opRowFor(o)
			if !rowed[id] {
				row.ID = "op-" + strconv.FormatInt(id, 10)
				rowed[id] = true
			}
			av.Ops = append(av.Ops, row)
		}
		out = append(out, av)
	}
	var excerpted []int // positions in out
	var spans []history.Span
	var pickers []*excerptPicker
	for k, i := range shown {
		if withExcerpt[i] && isShown[i] {
			excerpted = append(excerpted, k)
			spans = append(spans, excerptSpan(as[i]))
			pickers = append(pickers, newExcerptPicker(as[i]))
		}
	}
	// One read of the events for all excerpts (a loaded history keeps
	// only its operations, and reads the events back from its file),
	// each excerpt keeping only the events it may show.
	err := h.EachEventWithin(spans, func(n int, e *history.Event) { pickers[n].add(e) })
	if err != nil {
		return out // no excerpts: the rest of the page stands
	}
	for n, k := range excerpted {
		out[k].Excerpt = pickers[n].view(rowed)
	}
	return out
}

func opRowFor(o *history.Operation) opRow {
	row := opRow{
		OpID: o.OpID, Client: o.Client, Op: string(o.Op),
		Call: secs(o.Call, 3), Return: secs(o.Return, 3),
		Outcome: outcome(o), Owner: o.Owner, Token: tokenStr(o.Token), Value: tokenStr(o.Value), Error: o.Error,
	}
	switch o.Type {
	case history.OK:
		row.OutcomeClass = "ok"
	case history.Fail:
		row.OutcomeClass = "fail"
	default:
		row.OutcomeClass = "info"
		if o.Completed != history.Never {
			row.Return = "? (gave up " + secs(o.Completed, 3) + ")"
		} else {
			row.Return = "?"
		}
	}
	if o.Op == history.Write && o.Prev != nil {
		row.Value += " (was " + tokenStr(o.Prev) + ")"
	}
	return row
}

// excerptSpan is the time an anomaly's excerpt covers: from excerptPad
// before the anomaly to excerptPad after it.
func excerptSpan(a checker.Anomaly) history.Span {
	from, to := a.Start-excerptPad, a.End+excerptPad
	if a.End < a.Start {
		to = a.Start + excerptPad
	}
	return history.Span{From: from, To: to}
}

// eventText is the remaining content of an event in one line.
func eventText(e history.Event) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("owner", e.Owner)
	if e.Token != nil {
		add("token", tokenStr(e.Token))
	}
	if e.Value != nil {
		add("value", tokenStr(e.Value))
	}
	if e.Prev != nil {
		add("prev", tokenStr(e.Prev))
	}
	add("removed", e.Removed)
	add("reason", e.Reason)
	add("error", e.Error)
	add("fault", e.Fault)
	add("target", e.Target)
	add("point", e.Point)
	if e.PID != 0 {
		add("pid", strconv.Itoa(e.PID))
	}
	add("detail", e.Detail)
	if e.Latency != 0 {
		add("latency", dur(e.Latency))
	}
	return strings.Join(parts, " ")
}
