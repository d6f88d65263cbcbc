package reports

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// LinearizationFile is the name of the porcupine view written next to a
// run's report.html.
const LinearizationFile = "linearization.html"

// LinearizationLimits bound the porcupine view of a run: the most lock
// operations it searches and draws (a window of the history beyond that,
// see checker.PorcupineWindow), the time its search may take, and how many
// faults and anomalies it annotates.
type LinearizationLimits struct {
	MaxOps       int
	Timeout      time.Duration
	MaxFaults    int
	MaxAnomalies int
	MaxBytes     int // the largest page; a larger one is redrawn with a smaller window
}

// DefaultLinearizationLimits: 1000 operations, 2 s, a page of 8 MiB. The
// view illustrates; the verdict is the checker's. Porcupine decides a
// window of 1000 lock operations in milliseconds unless many lost answers
// are open at once, and then it does not decide in 5 s either (a 10k
// history with 5% of its answers lost spent 5 of its 5.4 s of `locktest
// check` on an undecided view): 2 s keeps a check's time in the checker.
var DefaultLinearizationLimits = LinearizationLimits{MaxOps: 1000, Timeout: 2 * time.Second, MaxFaults: 200, MaxAnomalies: 50, MaxBytes: 8 << 20}

// linView is what the run page says about the porcupine view, and what
// the view's own banner says.
type linView struct {
	Link        string // LinearizationFile when it was written
	Result      string // porcupine's result in plain words
	ResultClass string // pass | fail | unknown
	// Shown and ShownClass are what the pages say of the result: on a
	// run whose verdict is unsafe a linearizable history is "linearizable
	// against a lease lock" (class "consistent", not a green pass), with
	// Explain saying why that is no contradiction.
	Shown, ShownClass, Explain string
	// AnomalyList are the anomalies annotated in the view, listed above it.
	AnomalyList []linAnomaly
	Scope       string // which operations are shown
	Partial     bool   // not the whole history
	Notes       []string
	Skipped     string // why there is no view
	Ops         int
	Faults      int // fault annotations
	Anomalies   int // anomaly annotations
	Millis      float64
}

// linAnomaly is an anomaly annotated in the view, as the banner lists it.
type linAnomaly struct {
	N                          int // #N on the run page
	Kind, Severity, Cause      string
	Clients, When, Explanation string
}

// linModel names the model porcupine checks the run against.
func linModel(h *history.History) string {
	model := "mutex"
	if h.Info.Lease && h.Info.TTLMillis > 0 {
		model = "lease mutex (TTL " + dur(h.Info.TTLMillis*1e6) + ")"
		if h.Info.Renews {
			model = "renewed-lease mutex"
		}
	}
	if h.Info.Reentrant {
		model = "reentrant " + model
	}
	return model
}

// explainConsistent says why a run can be unsafe while its lock
// operations are linearizable: the lock answered consistently, and the
// violations come from what its clients did with the answers (a lease
// that ran out under a paused holder, a crashed holder, ...).
func explainConsistent(h *history.History, r *checker.Result) string {
	expired, doubles := 0, 0
	for _, a := range r.Anomalies {
		if a.Severity != checker.SeverityViolation {
			continue
		}
		if a.Kind == checker.KindDoubleHolder {
			doubles++
			if a.Cause == checker.CauseLeaseExpired || a.Cause == checker.CauseSessionExpired {
				expired++
			}
		}
	}
	s := "The lock answered consistently: every acquire and release can be placed at one point between its call and its return so that a " + linModel(h) + " gives exactly the answers seen. The run is still UNSAFE (" + r.Why + "): "
	switch {
	case doubles > 0 && expired == doubles:
		s += "the double holders on the run page come from leases that ran out. A lease lock may grant the lock to another client once a lease expires; the earlier holder (paused, slow or cut off) went on believing it held the lock. Only fencing tokens protect against that."
	case expired > 0:
		s += "some double holders come from leases that ran out (a lease lock may grant the lock again once a lease expires); the others are on the run page, with their causes."
	default:
		s += "its violations are not wrong answers in the order of the lock's operations, but what the clients did with the answers (see the run page)."
	}
	return s
}

// focusAnomaly picks the anomaly the view should cover: the first
// non-linearizable one, else the earliest violation, else the earliest
// contained one; -1 when none.
func focusAnomaly(as []checker.Anomaly) int {
	best := -1
	rank := func(a *checker.Anomaly) int {
		switch {
		case a.Kind == checker.KindNonLinearizable:
			return 0
		case a.Severity == checker.SeverityViolation:
			return 1
		case a.Severity == checker.SeverityContained:
			return 2
		}
		return 3
	}
	for i := range as {
		a := &as[i]
		if rank(a) == 3 {
			continue
		}
		if best < 0 || rank(a) < rank(&as[best]) || (rank(a) == rank(&as[best]) && a.Start < as[best].Start) {
			best = i
		}
	}
	return best
}

// WriteLinearization writes porcupine's visualization of the run's lock
// operations (a window of at most lim.MaxOps of them, searched for at most
// lim.Timeout) with the faults and the checker's anomalies as annotations
// and a banner saying what is shown. It writes nothing when there is no
// view (read-write lock, no lock operations) and says why in the result.
func WriteLinearization(w io.Writer, h *history.History, r *checker.Result, lim LinearizationLimits) (linView, error) {
	d := DefaultLinearizationLimits
	if lim.MaxOps <= 0 {
		lim.MaxOps = d.MaxOps
	}
	if lim.Timeout <= 0 {
		lim.Timeout = d.Timeout
	}
	if lim.MaxFaults <= 0 {
		lim.MaxFaults = d.MaxFaults
	}
	if lim.MaxAnomalies <= 0 {
		lim.MaxAnomalies = d.MaxAnomalies
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = d.MaxBytes
	}
	// The page holds the longest partial linearizations porcupine found,
	// which for an illegal history with much concurrency can be many: when
	// it comes out too large, a smaller window.
	var shrunk []string
	for {
		page, lv, err := renderLinearization(h, r, lim)
		if err != nil || lv.Link == "" {
			return lv, err
		}
		if len(page) > lim.MaxBytes && lim.MaxOps > 50 && lv.Ops > 50 {
			shrunk = append(shrunk, fmt.Sprintf("The view of %d operations came to %.1f MB; it was redrawn with fewer.", lv.Ops, float64(len(page))/1e6))
			lim.MaxOps = max(50, min(lim.MaxOps, lv.Ops)/4)
			continue
		}
		if len(shrunk) > 0 {
			lv.Partial = true
			lv.Notes = append(lv.Notes, shrunk...)
			// The banner is already drawn: say it there too.
			page = strings.Replace(page, `<p class="muted">How to read it:`, "<p class=\"partial\">"+html.EscapeString(strings.Join(shrunk, " "))+"</p>\n"+`<p class="muted">How to read it:`, 1)
		}
		if _, err := io.WriteString(w, page); err != nil {
			return lv, fmt.Errorf("write linearization: %w", err)
		}
		return lv, nil
	}
}

// renderLinearization draws the view within lim; lv.Link is empty when
// there is none.
func renderLinearization(h *history.History, r *checker.Result, lim LinearizationLimits) (page string, lv linView, err error) {
	defer func() {
		if p := recover(); p != nil { // porcupine panics on a model it cannot replay
			page, lv, err = "", linView{}, fmt.Errorf("write linearization: %v", p)
		}
	}()
	opts := checker.ViewOptions{MaxOps: lim.MaxOps, FocusTo: -1}
	focus := focusAnomaly(r.Anomalies)
	if focus >= 0 {
		a := &r.Anomalies[focus]
		opts.FocusFrom, opts.FocusTo = a.Start, a.End
		for _, id := range a.Ops {
			for i := range h.Ops {
				if h.Ops[i].OpID == id && h.Ops[i].Call < opts.FocusFrom {
					opts.FocusFrom = h.Ops[i].Call
				}
			}
		}
	}
	pv := checker.PorcupineWindow(h, opts)
	if pv.Skipped != "" {
		lv.Skipped = pv.Skipped
		return "", lv, nil
	}
	lv.Ops = len(pv.Ops)
	lv.Scope, lv.Partial = scopeWords(h, r, pv, focus)
	if pv.Dropped > 0 {
		lv.Notes = append(lv.Notes, fmt.Sprintf("%d failed acquires made while the lock was surely held are left out: they fit anywhere in a linearization.", pv.Dropped))
	}
	if pv.Cut > 0 {
		lv.Notes = append(lv.Notes, fmt.Sprintf("%s still running at the window's end %s drawn as indeterminate (it may or may not have taken effect).",
			plural(pv.Cut, "operation", "operations"), map[bool]string{true: "is", false: "are"}[pv.Cut == 1]))
	}

	t0 := time.Now()
	res, info := checkVerbose(pv.Model, pv.Ops, lim.Timeout)
	lv.Millis = float64(time.Since(t0).Microseconds()) / 1000
	switch res {
	case porcupine.Ok:
		lv.Result, lv.ResultClass = "linearizable", "pass"
	case porcupine.Illegal:
		lv.Result, lv.ResultClass = "not linearizable", "fail"
	default:
		lv.Result, lv.ResultClass = fmt.Sprintf("undecided: the search ran out of its %s", lim.Timeout), "unknown"
		lv.Partial = true
		lv.Notes = append(lv.Notes, "The search timed out: the orders drawn are the longest it had found by then, not a verdict.")
	}
	lv.Shown, lv.ShownClass = lv.Result, lv.ResultClass
	if res == porcupine.Ok && r.Verdict == checker.Unsafe {
		// Not a green pass on an unsafe run: say what it means.
		kind := "mutex"
		if h.Info.Lease && h.Info.TTLMillis > 0 {
			kind = "lease lock"
		}
		lv.Shown, lv.ShownClass = "linearizable against a "+kind, "consistent"
		lv.Explain = explainConsistent(h, r)
	}
	if p := linearizableProperty(r); p != nil && lv.ResultClass != "unknown" {
		switch {
		case p.Status == checker.Fail && res == porcupine.Ok && pv.Whole:
			lv.Notes = append(lv.Notes, "The checker ("+p.Engine+") found the history not linearizable, porcupine finds it linearizable: the engines disagree; please report it.")
		case p.Status == checker.Fail && res == porcupine.Ok:
			lv.Notes = append(lv.Notes, "The checker found the whole history not linearizable; the part that fails is outside this window.")
		case p.Status == checker.Pass && res == porcupine.Illegal:
			lv.Notes = append(lv.Notes, "The checker found the whole history linearizable, but this window is not: please report it (the window should start where the lock was surely free).")
		}
		// A headline never contradicts the property: a window that passes
		// says it is only the window.
		switch {
		case p.Status == checker.Fail && res == porcupine.Ok && pv.Whole:
			lv.Shown, lv.ShownClass, lv.Explain = "linearizable to porcupine, not to the checker", "unknown", ""
		case p.Status == checker.Fail && res == porcupine.Ok:
			lv.Shown, lv.ShownClass = "this window is linearizable; the whole history is not", "fail"
			lv.Explain = fmt.Sprintf("The %s shown can be placed each at one point between its call and its return so that a %s gives the answers seen, but the checker's linearizable property FAILED on the whole history: the operations that cannot be ordered are outside this window (the run page lists them).",
				plural(lv.Ops, "operation", "operations"), linModel(h))
		}
	}

	lo, hi := windowSpan(pv, h)
	anns := faultAnnotations(h, lo, hi, lim.MaxFaults, &lv)
	anns = append(anns, anomalyAnnotations(r, lo, hi, lim.MaxAnomalies, &lv)...)
	info.AddAnnotations(anns)

	model := pv.Model
	describeOp := model.DescribeOperation
	model.DescribeOperation = func(in, out interface{}) string { return shortOp(describeOp(in, out)) }
	describeState := model.DescribeState
	model.DescribeState = func(s interface{}) string { return html.EscapeString(describeState(s)) }
	model.DescribeOperationMetadata = func(m interface{}) string {
		op, ok := m.(*history.Operation)
		if !ok {
			return ""
		}
		return html.EscapeString(opMetadata(op, pv.To))
	}
	var buf bytes.Buffer
	if err = porcupine.Visualize(model, info, &buf); err != nil {
		return "", lv, fmt.Errorf("write linearization: %w", err)
	}
	page, err = dressLinearization(buf.String(), h, r, lv)
	if err != nil {
		return "", lv, err
	}
	lv.Link = LinearizationFile
	return page, lv, nil
}

func linearizableProperty(r *checker.Result) *checker.Property {
	for i := range r.Properties {
		if r.Properties[i].Name == "linearizable" {
			return &r.Properties[i]
		}
	}
	return nil
}

// scopeWords says which operations the view shows.
func scopeWords(h *history.History, r *checker.Result, pv checker.PorcupineView, focus int) (string, bool) {
	all := plural(pv.LockOps, "lock operation", "lock operations")
	if pv.Whole {
		return fmt.Sprintf("the whole run: all %s", all), false
	}
	to := "the end"
	if pv.To != history.Never {
		to = secs(pv.To, 2)
	}
	if pv.Focused && focus >= 0 {
		a := &r.Anomalies[focus]
		from := "the start"
		if pv.From > 0 {
			from = secs(pv.From, 2) + ", where the lock was surely free,"
		}
		return fmt.Sprintf("a window of %d of the %s, from %s to %s, around anomaly #%d (%s at %s); the rest of the run is not shown",
			len(pv.Ops), all, from, to, focus+1, a.Kind, secs(a.Start, 2)), true
	}
	s := fmt.Sprintf("the first %d of the %s, up to %s; the rest of the run is not shown", len(pv.Ops), all, to)
	if focus >= 0 {
		s += fmt.Sprintf(" - anomaly #%d (%s at %s) is not in it: no window of at most %d operations around it starts where the lock was surely free",
			focus+1, r.Anomalies[focus].Kind, secs(r.Anomalies[focus].Start, 2), len(pv.Ops))
	}
	return s, true
}

// windowSpan is the time the view covers: from the window's first call to
// its end (or its last return, or the history's end).
func windowSpan(pv checker.PorcupineView, h *history.History) (int64, int64) {
	lo, hi := int64(history.Never), int64(0)
	for _, o := range pv.Ops {
		lo = min(lo, o.Call)
		if o.Return != history.Never {
			hi = max(hi, o.Return)
		}
		hi = max(hi, o.Call)
	}
	if pv.To != history.Never {
		hi = max(hi, pv.To)
	} else {
		hi = max(hi, h.End)
	}
	return lo, hi
}

// faultAnnotations: one row per fault and target, each fault window
// clipped to [lo, hi].
func faultAnnotations(h *history.History, lo, hi int64, limit int, lv *linView) []porcupine.Annotation {
	var out []porcupine.Annotation
	skipped := 0
	for _, f := range h.Faults {
		end := f.End
		if end == history.Never || end > hi {
			end = hi
		}
		if f.Start > hi || end < lo {
			continue
		}
		if len(out) == limit {
			skipped++
			continue
		}
		tag := "fault: " + f.Name
		if f.Target != "" {
			tag += " " + f.Target
		}
		details := fmt.Sprintf("%s on %s from %s to %s", f.Name, orDash(f.Target), secs(f.Start, 3), secs(f.End, 3))
		if f.End == history.Never {
			details = fmt.Sprintf("%s on %s from %s, never healed", f.Name, orDash(f.Target), secs(f.Start, 3))
		}
		if f.Detail != "" {
			details += ": " + f.Detail
		}
		out = append(out, porcupine.Annotation{
			Tag: tag, Start: max(f.Start, lo), End: end,
			Description: f.Name + " " + secs(f.Start, 2) + "-" + secsOrOpen(f.End),
			Details:     details, BackgroundColor: "#e9ddf9", TextColor: "#4b2a85",
		})
	}
	lv.Faults = len(out)
	if skipped > 0 {
		lv.Notes = append(lv.Notes, fmt.Sprintf("%d more faults in the window are not annotated.", skipped))
	}
	return out
}

// anomalyAnnotations: one row per anomaly kind, the anomaly's span
// clipped to [lo, hi], its explanation and cause as the tooltip.
func anomalyAnnotations(r *checker.Result, lo, hi int64, limit int, lv *linView) []porcupine.Annotation {
	var out []porcupine.Annotation
	skipped := 0
	for i, a := range r.Anomalies {
		if a.Start > hi || a.End < lo {
			continue
		}
		if len(out) == limit {
			skipped++
			continue
		}
		details := fmt.Sprintf("#%d %s (%s), clients %s, %s. %s", i+1, a.Kind, a.Severity, intList(a.Clients), when(a.Start, a.End), a.Explanation)
		if a.Cause != "" {
			details += " Cause: " + causeShort(string(a.Cause)) + ": " + causeWords(string(a.Cause))
		}
		bg, fg := "#ffd8d3", "#a40e26"
		if a.Severity != checker.SeverityViolation {
			bg, fg = "#fff1e5", "#8a4600"
		}
		desc := fmt.Sprintf("#%d %s", i+1, a.Kind)
		if a.Cause != "" {
			desc += " (" + string(a.Cause) + ")"
		}
		out = append(out, porcupine.Annotation{
			Tag: "checker: " + string(a.Kind), Start: max(a.Start, lo), End: min(a.End, hi),
			Description: desc, Details: details, BackgroundColor: bg, TextColor: fg,
		})
		lv.AnomalyList = append(lv.AnomalyList, linAnomaly{N: i + 1, Kind: string(a.Kind), Severity: string(a.Severity), Cause: string(a.Cause),
			Clients: intList(a.Clients), When: when(a.Start, a.End), Explanation: a.Explanation})
	}
	lv.Anomalies = len(out)
	if skipped > 0 {
		lv.Notes = append(lv.Notes, fmt.Sprintf("%d more anomalies in the window are not annotated.", skipped))
	}
	return out
}

func secsOrOpen(ns int64) string {
	if ns == history.Never {
		return "..."
	}
	return secs(ns, 2)
}

// linOpRe matches the checker's description of a lock operation.
var linOpRe = regexp.MustCompile(`^client \d+ (acquire|release)(?:\(.*\))? -> (\S+)$`)

// shortOp shortens "client 3 acquire(c3-17-ab12) -> ok" to "acquire: ok":
// the row names the client, the tooltip the owner; narrow boxes keep the
// view readable.
func shortOp(d string) string {
	if m := linOpRe.FindStringSubmatch(d); m != nil {
		return m[1] + ": " + m[2]
	}
	return d
}

// opMetadata is an operation's tooltip line.
func opMetadata(op *history.Operation, to int64) string {
	s := fmt.Sprintf("op %d, client %d: %s", op.OpID, op.Client, op.Op)
	if op.Owner != "" {
		s += " (owner " + op.Owner + ")"
	}
	switch {
	case op.Return == history.Never || op.Type == history.Info:
		s += fmt.Sprintf(", called at %s, indeterminate", secs(op.Call, 3))
	default:
		s += fmt.Sprintf(", called at %s, returned %s at %s", secs(op.Call, 3), op.Type, secs(op.Return, 3))
		if op.Reason != "" {
			s += " (" + op.Reason + ")"
		}
		if to != history.Never && op.Return >= to {
			s += ", after the window's end: drawn as indeterminate"
		}
	}
	return s
}

// JavaScript patches to porcupine's page: client rows are labelled
// "client N" (porcupine numbers them from 0: client N is row N-1), and
// call and return times show as seconds since the run's start. Each is
// applied only if porcupine's code still reads the same (tests check that
// they apply).
var linPatches = []struct{ old, new string }{
	{"const tag = i < realClients ? i.toString() : sortedTags[i - realClients]",
		"const tag = i < realClients ? 'client ' + (i + 1) : sortedTags[i - realClients]"},
	{"text.textContent = i < realClients ? i : sortedTags[i - realClients]",
		"text.textContent = i < realClients ? 'client ' + (i + 1) : sortedTags[i - realClients]"},
	{`width="660" height="20" viewBox="0 0 660 20"`, `width="700" height="20" viewBox="0 0 700 20"`},
	{"return '<br><br>Call: ' + callTime + '<br><br>Return: ' + returnTime",
		"const s = (t) => (Number(t) >= 9e18 ? 'never (indeterminate)' : (Number(t) / 1e9).toFixed(6) + ' s'); return '<br><br>Call: ' + s(callTime) + '<br><br>Return: ' + s(returnTime)"},
}

// checkVerbose is porcupine's search; tests make it time out.
var checkVerbose = porcupine.CheckOperationsVerbose

// jumpAnchor is where the page starts drawing; jumpOnLoad, inserted after
// it, scrolls to the first operation that cannot be placed and selects it.
// showAnomalyJS defines ltShow(n): scroll the drawing (#canvas, which
// scrolls by itself so the banner stays in view) to the annotation of
// anomaly #n and outline it (the banner's links call it), and keeps the
// row labels in view; firstAnomalyOnLoad opens the view on the earliest
// anomaly annotated.
const (
	jumpAnchor = "render(data)\n"
	jumpOnLoad = "      document.querySelector('#jump-link').dispatchEvent(new MouseEvent('click'))\n" +
		"      document.querySelector('.selected')?.scrollIntoView({inline: 'center', block: 'nearest'})\n"
	showAnomalyJS = "      window.ltShow = function (n) {\n" +
		"        let hit = null\n" +
		"        for (const t of document.querySelectorAll('#canvas text.history-text')) {\n" +
		"          const m = /^#(\\d+) /.exec(t.textContent)\n" +
		"          if (m && (n === 0 ? hit === null || Number(t.getAttribute('x')) < Number(hit.getAttribute('x')) : Number(m[1]) === n)) hit = t\n" +
		"        }\n" +
		"        if (hit === null) return false\n" +
		"        for (const r of document.querySelectorAll('#canvas rect.lt-focus')) r.classList.remove('lt-focus')\n" +
		"        hit.parentNode.querySelector('rect')?.classList.add('lt-focus')\n" +
		"        const c = document.querySelector('#canvas'), box = hit.getBoundingClientRect(), cb = c.getBoundingClientRect()\n" +
		"        c.scrollLeft += box.left - cb.left - c.clientWidth / 3\n" +
		"        return false\n" +
		"      }\n" +
		// The row labels (clients, annotation tags) stay at the left
		// while the drawing scrolls.
		"      ;(function () {\n" +
		"        const c = document.querySelector('#canvas'), svg = c.querySelector('svg'), bg = svg && svg.querySelector('g')\n" +
		"        const labels = bg ? [...bg.querySelectorAll('text')] : []\n" +
		"        if (labels.length === 0) return\n" +
		"        const ns = 'http://www.w3.org/2000/svg', g = document.createElementNS(ns, 'g'), r = document.createElementNS(ns, 'rect')\n" +
		"        g.setAttribute('class', 'lt-labels')\n" +
		"        g.style.pointerEvents = 'none'\n" +
		"        r.setAttribute('width', Math.max(...labels.map((t) => Number(t.getAttribute('x')))) + 6)\n" +
		"        r.setAttribute('height', svg.getAttribute('height'))\n" +
		"        r.setAttribute('fill', '#fff')\n" +
		"        g.append(r, ...labels)\n" +
		"        svg.append(g)\n" +
		"        c.addEventListener('scroll', () => g.setAttribute('transform', 'translate(' + c.scrollLeft + ',0)'))\n" +
		"      })()\n"
	firstAnomalyOnLoad = "      window.ltShow(0)\n"
)

var linBannerTmpl = template.Must(template.New("banner").Funcs(funcs).Parse(`<div id="locktest">
<style>
#locktest { margin: 48px 10px 6px; padding: 10px 14px; border: 1px solid #d0d7de; border-left: 8px solid #8c959f; border-radius: 6px; background: #f6f8fa; font-size: 14px; line-height: 1.45; max-width: 1100px; }
#locktest h1 { font-size: 18px; margin: 0 0 4px; }
#locktest .res { font-weight: 700; }
{{if eq .V.ShownClass "pass"}}#locktest { border-left-color: #1a7f37; } #locktest .res { color: #1a7f37; }
{{else if eq .V.ShownClass "fail"}}#locktest { border-left-color: #cf222e; } #locktest .res { color: #cf222e; }
{{else if eq .V.ShownClass "unknown"}}#locktest { border-left-color: #bc4c00; } #locktest .res { color: #bc4c00; }
{{else if eq .V.ShownClass "consistent"}}#locktest { border-left-color: #0969da; } #locktest .res { color: #0550ae; }
{{end}}#locktest .run { font-weight: 800; } #locktest .run.unsafe { color: #cf222e; } #locktest .run.safe { color: #1a7f37; } #locktest .run.inconclusive { color: #bc4c00; }
#locktest #lin-anomalies ul { columns: 2; column-gap: 24px; font-size: 13px; }
#canvas { overflow-x: auto; padding-bottom: 8px; }
#canvas rect.lt-focus { stroke: #1f2328; stroke-width: 3; }
#locktest .partial { color: #9a6700; font-weight: 700; }
#locktest p { margin: 4px 0; } #locktest ul { margin: 4px 0; padding-left: 20px; }
#locktest .muted { color: #57606a; }
#canvas { margin-top: 8px; border-top: 1px solid #d0d7de; }
</style>
<h1>Linearization of {{.Lock}} under {{.Nemeses}} (seed {{.Seed}}) <a href="report.html" style="font-size:13px;font-weight:400">back to the run report</a></h1>
<p>The run: <span class="run {{.VerdictClass}}">{{.Verdict}}</span> - {{.Why}}</p>
<p>porcupine: <span class="res" id="lin-result">{{.V.Shown}}</span>{{if eq .V.ShownClass "pass"}} - every acquire and release can be placed at one point between its call and its return so that a {{.Model}} gives exactly the answers seen.{{else if eq .V.ResultClass "fail"}} - no order of these operations is consistent with a {{.Model}}. Use "jump to first error": red marks where the longest orders the search found cannot go on.{{end}} ({{.Time}})</p>
{{if .V.Explain}}<p id="lin-explain">{{.V.Explain}}</p>{{end}}
<p{{if .V.Partial}} class="partial"{{end}} id="lin-scope">Shown: {{.V.Scope}}.</p>
{{if .Checker}}<p class="muted">The checker's linearizable property: {{.Checker}}.</p>{{end}}
{{if .V.Notes}}<ul>{{range .V.Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .V.AnomalyList}}<div id="lin-anomalies"><b>The checker's anomalies in this view</b> (red rows below the clients; click to show one):<ul>{{range .V.AnomalyList}}<li><a href="#" onclick="return ltShow({{.N}})">#{{.N}} {{.Kind}}</a>{{if .Cause}} ({{.Cause}}){{end}}, clients {{.Clients}}, {{.When}}{{if ne .Severity "violation"}} [{{.Severity}}]{{end}}</li>{{end}}</ul></div>{{end}}
<p class="muted">How to read it: each row is one client; a blue box is one lock operation, from its call to its return (hover for its times and outcome). Time runs left to right in order of events, not to scale. Click a box to see the order (the linearization) through it and the lock's state after each step. The rows below the line are annotations over the same time: {{.V.Faults}} fault window(s) (purple) and {{.V.Anomalies}} of the checker's anomalies (red), with their explanation on hover.</p>
</div>
`))

// dressLinearization adds the banner, the title and the patches to
// porcupine's page.
func dressLinearization(page string, h *history.History, r *checker.Result, lv linView) (string, error) {
	for _, p := range linPatches {
		if strings.Count(page, p.old) == 1 {
			page = strings.Replace(page, p.old, p.new, 1)
		}
	}
	hv := buildHeader(h, r)
	data := struct {
		Lock, Nemeses, Model, Time, Checker string
		Seed                                int64
		V                                   linView
		Verdict, VerdictClass, Why          string
	}{hv.Lock, hv.Nemeses, linModel(h), "search " + millis(lv.Millis), "", hv.Seed, lv, hv.Verdict, hv.VerdictClass, hv.Why}
	if p := linearizableProperty(r); p != nil {
		data.Checker = string(p.Status) + " (" + p.Engine + ")"
	}
	var b strings.Builder
	if err := linBannerTmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("write linearization: %w", err)
	}
	if strings.Count(page, jumpAnchor) == 1 {
		if lv.ResultClass == "fail" {
			// Open on the failing part: what "jump to first error" does.
			page = strings.Replace(page, jumpAnchor, jumpAnchor+jumpOnLoad+showAnomalyJS, 1)
		} else {
			// Open on the first anomaly's annotation.
			page = strings.Replace(page, jumpAnchor, jumpAnchor+showAnomalyJS+firstAnomalyOnLoad, 1)
		}
	}
	const canvas = `<div id="canvas">`
	if strings.Count(page, canvas) != 1 {
		return "", fmt.Errorf("write linearization: porcupine's page has no single %s", canvas)
	}
	page = strings.Replace(page, canvas, b.String()+canvas, 1)
	title := fmt.Sprintf("<title>locktest linearization: %s under %s (seed %d)</title>", html.EscapeString(hv.Lock), html.EscapeString(hv.Nemeses), hv.Seed)
	page = strings.Replace(page, "<title>Porcupine</title>", title, 1)
	return page, nil
}

// writeLinearizationFile writes dir/LinearizationFile, or removes a stale
// one when there is no view.
func writeLinearizationFile(dir string, h *history.History, r *checker.Result, lim LinearizationLimits) (linView, error) {
	path := filepath.Join(dir, LinearizationFile)
	var buf bytes.Buffer
	lv, err := WriteLinearization(&buf, h, r, lim)
	if err != nil {
		return lv, err
	}
	if lv.Link == "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return lv, err
		}
		return lv, nil
	}
	return lv, writeAtomic(path, buf.Bytes())
}

// WriteRunDir writes a run directory's pages: LinearizationFile (the
// porcupine view, when there is one) and report.html linking it and the
// run's files (RunFiles). A view that cannot be written is said so on the
// run page; it does not fail the report.
func WriteRunDir(dir string, h *history.History, r *checker.Result) error {
	lv, err := writeLinearizationFile(dir, h, r, DefaultLinearizationLimits)
	if err != nil {
		lv = linView{Skipped: err.Error()}
	}
	var buf bytes.Buffer
	if err := writeRunPage(&buf, h, r, RunFiles(dir), &lv, dir); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "report.html"), buf.Bytes())
}
