package reports

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

var campaignTmpl = template.Must(template.New("campaign.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/campaign.html.tmpl"))

// campaignView is what the campaign page draws.
type campaignView struct {
	C          *Campaign
	CSS        template.CSS
	Columns    []string
	Rows       []matrixRow
	Cells      []cellView // every cell that ran, in plan order, for the details table
	Servers    []string
	Wall       string
	Startup    string
	StartupPct string
	Differs    int
	Counts     map[string]int // cells per verdict class
	// Status is the header's line and StatusClass its colour: "good"
	// (every cell that ran is as expected), "bad" (some differ), "neutral"
	// (interrupted, or nothing ran).
	Status, StatusClass string
	// NotRun lists the cells that did not run (n/a, skipped), with why,
	// under the matrix: a tooltip alone is easy to miss.
	NotRun []cellView
	// Cut: some cell has a run cut at its first violation.
	Cut bool
}

// Ran counts the cells that ran to the end (done or error) and the cells
// the campaign meant to run (all but n/a).
func (c *Campaign) Ran() (ran, planned int) {
	for _, cell := range c.Cells {
		switch cell.Status {
		case CellNA:
			continue
		case CellDone, CellError:
			ran++
		}
		planned++
	}
	return ran, planned
}

// StatusLine says in a few words how the campaign went: how many cells
// differ from their expectation, whether it was interrupted (and how much
// of it ran); class is good, bad or neutral.
func (c *Campaign) StatusLine() (line, class string) {
	ran, planned := c.Ran()
	differs := c.Differs()
	switch {
	case c.Interrupted:
		line, class = fmt.Sprintf("interrupted: %d of %d cells ran", ran, planned), "neutral"
		if differs > 0 {
			line += fmt.Sprintf("; %d cell(s) differ from their expectation", differs)
			class = "bad"
		} else if ran > 0 {
			line += "; every cell that ran is as expected"
		}
	case differs > 0:
		line, class = fmt.Sprintf("%d cell(s) differ from their expectation", differs), "bad"
	case ran == 0:
		line, class = fmt.Sprintf("no cell ran (%d planned)", planned), "neutral"
	default:
		line, class = "every cell that ran is as expected", "good"
	}
	return line, class
}

type matrixRow struct {
	Name  string
	Cells []cellView
}

type cellView struct {
	*Cell
	Class     string // safe | unsafe | inconclusive | error | na | skipped | pending | interrupted
	Label     string // big text in the matrix
	Kinds     string // "3 double-holder, 1 lost-update"
	Contained string
	Causes    string // "9 lease expired (by design)"
	CauseTip  string // what those causes mean, for the tooltip
	First     string // time to first violation
	Held      string
	Link      string // the first run's page (the one that proves the verdict)
	Anchor    string
	Runs      []runView2
	Empty     bool // no cell at this row and column
	// Superseded counts the interrupted runs a finished run of the same
	// seed replaced: not shown, not counted.
	Superseded int
}

type runView2 struct {
	CellRun
	Link    string
	Startup string
	Wall    string
	First   string
}

// CellClass is the colour class of a cell.
func CellClass(c *Cell) string {
	if c.Verdict == VerdictInterrupted && c.Status != CellError {
		return "interrupted"
	}
	switch c.Status {
	case CellNA:
		return "na"
	case CellSkipped:
		return "skipped"
	case CellPending:
		return "pending"
	case CellError:
		return "error"
	}
	if c.Verdict == "" {
		return "pending"
	}
	return c.Verdict
}

func cellAnchor(id string) string {
	r := strings.NewReplacer("/", "--", " ", "", "+", "_", ",", "_", "@", "-at-", "=", "-")
	return "cell-" + r.Replace(id)
}

func buildCell(c *Cell) cellView {
	v := cellView{Cell: c, Class: CellClass(c), Kinds: kinds(c.Anomalies), Contained: kinds(c.Contained), Anchor: cellAnchor(c.ID)}
	v.Causes, v.CauseTip = causeCounts(c.Causes)
	switch v.Class {
	case "na":
		v.Label = "n/a"
	case "skipped":
		v.Label = "skipped"
	case "pending":
		v.Label = "not run"
	case "interrupted":
		v.Label = "interrupted"
	default:
		v.Label = c.Verdict
	}
	if c.FirstViolationNs >= 0 {
		v.First = dur(c.FirstViolationNs)
	}
	if c.Status == CellDone || c.Status == CellError {
		v.Held = fmt.Sprintf("%.0f%%", 100*c.Held)
	}
	// Link to the run that proves the verdict: the first unsafe run of an
	// unsafe cell, else the first run with a page (a finished one before
	// an interrupted one).
	rank := func(r *CellRun) int {
		switch {
		case c.Verdict == "unsafe" && r.Verdict == "unsafe":
			return 0
		case !r.Interrupted:
			return 1
		}
		return 2
	}
	best := -1
	for i := range c.Runs {
		r := &c.Runs[i]
		if r.Dir == "" || c.Superseded(i) {
			continue
		}
		if best < 0 || rank(r) < rank(&c.Runs[best]) {
			best = i
		}
	}
	if best >= 0 {
		v.Link = runLink(c.Runs[best].Dir)
	}
	for i, r := range c.Runs {
		if c.Superseded(i) {
			v.Superseded++
			continue
		}
		rv := runView2{CellRun: r, Startup: durOrDash(r.StartupNs), Wall: durOrDash(r.WallNs)}
		if r.Reused {
			rv.Startup = "reused" // a cluster an earlier run had started: no start-up
		}
		if r.Dir != "" {
			rv.Link = runLink(r.Dir)
		}
		if r.FirstViolationNs >= 0 && r.Verdict == "unsafe" {
			rv.First = dur(r.FirstViolationNs)
		}
		v.Runs = append(v.Runs, rv)
	}
	return v
}

// durOrDash is dur, or "-" for a time not recorded (runs rendered from a
// store).
func durOrDash(ns int64) string {
	if ns <= 0 {
		return "-"
	}
	return dur(ns)
}

// long formats a long duration: "7m44s", "850ms", "-" when not recorded.
func long(ns int64) string {
	switch {
	case ns <= 0:
		return "-"
	case ns < int64(time.Minute):
		return dur(ns)
	default:
		return time.Duration(ns).Round(time.Second).String()
	}
}

// runLink is the link from the campaign page to a run's report.
func runLink(dir string) string {
	return path.Join(strings.ReplaceAll(dir, "\\", "/"), "report.html")
}

func buildCampaign(c *Campaign) campaignView {
	v := campaignView{C: c, CSS: css, Columns: c.Columns, Servers: c.Servers(), Differs: c.Differs(), Counts: map[string]int{}}
	v.Status, v.StatusClass = c.StatusLine()
	byRC := map[string]*Cell{}
	for i := range c.Cells {
		cell := &c.Cells[i]
		byRC[cell.Row+"\x00"+cell.Column] = cell
		cv := buildCell(cell)
		v.Counts[cv.Class]++
		v.Cut = v.Cut || cell.StoppedEarly
		if (cv.Class == "na" || cv.Class == "skipped") && cell.Reason != "" {
			v.NotRun = append(v.NotRun, cv)
		}
		if cell.Status != CellNA {
			v.Cells = append(v.Cells, cv)
		}
	}
	for _, r := range c.Rows {
		row := matrixRow{Name: r}
		for _, col := range c.Columns {
			if cell, ok := byRC[r+"\x00"+col]; ok {
				row.Cells = append(row.Cells, buildCell(cell))
			} else {
				row.Cells = append(row.Cells, cellView{Empty: true, Class: "empty"})
			}
		}
		v.Rows = append(v.Rows, row)
	}
	v.Wall, v.Startup = long(c.WallNs), long(c.StartupNs)
	if c.WallNs > 0 {
		v.StartupPct = c.Share(c.StartupNs)
	}
	return v
}

// WriteCampaignHTML writes a campaign's page (index.html): the matrix of
// lock variants x faults, each cell coloured by its verdict with the kinds
// and counts of anomalies, the time to the first violation and how much of
// the time the lock was held, linked to the run page that proves it; then
// every cell's runs with their seeds, and the versions of every server used.
// Run pages are linked relative to the page, so the campaign directory can
// be moved or uploaded as it is. The page loads nothing.
func WriteCampaignHTML(w io.Writer, c *Campaign) error {
	bw := bufio.NewWriterSize(w, 64*1024)
	if err := campaignTmpl.Execute(bw, buildCampaign(c)); err != nil {
		return fmt.Errorf("write campaign page: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write campaign page: %w", err)
	}
	return nil
}

// JUnit XML, one test case per cell (classname: the lock variant, name:
// the faults). A cell that differs from its expectation is a failure, a
// cell with a harness error an error, a cell not run (n/a, skipped without
// an expectation, pending) is skipped.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Class   string     `xml:"classname,attr"`
	Name    string     `xml:"name,attr"`
	Time    string     `xml:"time,attr"`
	Failure *junitMsg  `xml:"failure,omitempty"`
	Error   *junitMsg  `xml:"error,omitempty"`
	Skipped *junitMsg  `xml:"skipped,omitempty"`
	Out     string     `xml:"system-out,omitempty"`
	Props   *junitProp `xml:"properties,omitempty"`
}

type junitMsg struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

type junitProp struct {
	P []junitKV `xml:"property"`
}

type junitKV struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

func secsAttr(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e9) }

// WriteCampaignJUnit writes the campaign as JUnit XML, one test case per
// cell.
func WriteCampaignJUnit(w io.Writer, c *Campaign) error {
	s := junitSuite{Name: "locktest campaign " + c.Name, Time: secsAttr(c.WallNs)}
	for i := range c.Cells {
		cell := &c.Cells[i]
		var wall int64
		for _, r := range cell.Runs {
			wall += r.WallNs
		}
		tc := junitCase{Class: "locktest." + cell.Row, Name: cell.Column, Time: secsAttr(wall)}
		what := fmt.Sprintf("verdict %s, expected %s", orDash(cell.Verdict), orDash(cell.Expect))
		if k := kinds(cell.Anomalies); k != "" {
			what += "; anomalies: " + k
		}
		var props []junitKV
		props = append(props, junitKV{"verdict", cell.Verdict}, junitKV{"expect", cell.Expect}, junitKV{"status", cell.Status})
		for _, r := range cell.Runs {
			if r.Dir != "" {
				props = append(props, junitKV{"run", r.Dir})
			}
		}
		tc.Props = &junitProp{props}
		switch {
		case cell.Status == CellError:
			tc.Error = &junitMsg{Message: "harness error", Text: cell.Reason}
			s.Errors++
		case cell.Outcome == Differs:
			msg := what
			if cell.Reason != "" {
				msg += " (" + cell.Status + ": " + cell.Reason + ")"
			}
			tc.Failure = &junitMsg{Message: "verdict differs from expectation", Text: msg}
			s.Failures++
		case cell.Outcome == NotRun && cell.Verdict == VerdictInterrupted:
			tc.Skipped = &junitMsg{Message: "interrupted: the run was interrupted before its time limit (locktest campaign --resume runs it again)"}
			s.Skipped++
		case cell.Outcome == NotRun:
			tc.Skipped = &junitMsg{Message: cell.Status + ": " + cell.Reason}
			s.Skipped++
		default:
			tc.Out = what
		}
		s.Cases = append(s.Cases, tc)
		s.Tests++
	}
	out := junitSuites{Name: "locktest", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Skipped: s.Skipped, Time: s.Time, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

var mdMark = map[string]string{
	"safe": "🟢 safe", "unsafe": "🔴 unsafe", "inconclusive": "🟠 inconclusive", "error": "⚠️ error",
	"na": "n/a", "skipped": "⏭ skipped", "pending": "… not run", "interrupted": "⏸ interrupted", "empty": "",
}

// WriteCampaignMarkdown writes a summary for a CI job summary: the
// matrix with one mark per cell, then every cell that differs from its
// expectation.
func WriteCampaignMarkdown(w io.Writer, c *Campaign, reportLink string) error {
	v := buildCampaign(c)
	b := &strings.Builder{}
	status, class := c.StatusLine()
	switch {
	case class == "bad":
		status = "**" + status + "**"
	case class == "good":
		status = "every cell as expected"
	}
	fmt.Fprintf(b, "## locktest campaign %s: %s\n\n", c.Name, status)
	on := ""
	if c.Cluster != "" {
		on = ", on --cluster " + c.Cluster
	}
	fmt.Fprintf(b, "locktest %s, seed %d, %d run(s) per cell%s, wall time %s (cluster start-up %s).\n\n",
		c.Version, c.Seed, c.Runs, on, time.Duration(c.WallNs).Round(time.Second), time.Duration(c.StartupNs).Round(100*time.Millisecond))
	fmt.Fprintf(b, "| lock |")
	for _, col := range v.Columns {
		fmt.Fprintf(b, " %s |", col)
	}
	fmt.Fprintf(b, "\n|---|")
	for range v.Columns {
		fmt.Fprintf(b, "---|")
	}
	fmt.Fprintln(b)
	for _, r := range v.Rows {
		fmt.Fprintf(b, "| `%s` |", r.Name)
		for _, cell := range r.Cells {
			fmt.Fprintf(b, " %s |", mdCell(cell))
		}
		fmt.Fprintln(b)
	}
	if c.Differs() > 0 {
		fmt.Fprintf(b, "\n### Cells that differ from their expectation\n\n| cell | expected | got | anomalies | run |\n|---|---|---|---|---|\n")
		for _, cell := range v.Cells {
			if cell.Outcome != Differs {
				continue
			}
			got := orDash(cell.Verdict)
			if cell.Reason != "" {
				got += " (" + cell.Status + ": " + strings.ReplaceAll(cell.Reason, "|", "/") + ")"
			}
			an := orDash(cell.Kinds)
			if cell.Causes != "" {
				an += " (double holders: " + cell.Causes + ")"
			}
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", cell.ID, cell.Expect, got, an, orDash(cell.Link))
		}
	}
	if hasCauses(v.Cells) {
		fmt.Fprintf(b, "\nDouble holders by cause: *lease-expired* and *session-expired* are lost by design (the holder outlived its lease or session; only fencing protects), *lease-broken* and *session-alive* are the lock service's fault, *unknown* cannot be told (renewals are not recorded).\n")
	}
	if s := c.Servers(); len(s) > 0 {
		fmt.Fprintf(b, "\nServers: %s.\n", strings.Join(s, "; "))
	}
	if reportLink != "" {
		fmt.Fprintf(b, "\nThe full report (`index.html`, a page per run) is in %s.\n", reportLink)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCell is a cell of the Markdown matrix: its mark, the violations by
// kind and count as the page's matrix shows them ("at least" for a run cut
// at its first violation), contained ones, the causes of double holders
// (by design, or the service at fault), the topology it ran on when not
// its row's, and ❗ when it differs from its expectation.
func mdCell(cell cellView) string {
	if cell.Empty {
		return ""
	}
	m := mdMark[cell.Class]
	var parts []string
	if cell.Kinds != "" {
		k := cell.Kinds
		if cell.StoppedEarly {
			k = "at least " + k
		}
		parts = append(parts, k)
	}
	if cell.Contained != "" {
		parts = append(parts, "contained: "+cell.Contained)
	}
	if len(cell.Cell.Causes) > 0 {
		parts = append(parts, "cause: "+kinds(cell.Cell.Causes)) // e.g. "8 lease-expired"
	}
	if len(parts) > 0 {
		m += ": " + strings.Join(parts, "; ")
	}
	if cell.Note != "" {
		m += " (on " + cell.Topology + ")"
	}
	if cell.Sizing != "" {
		m += " (sized for the fault)"
	}
	if cell.Outcome == Differs {
		m += " ❗"
	}
	return strings.ReplaceAll(m, "|", "/")
}

// causeCounts lists cause counts as "9 lease expired (by design), 1 lease
// broken (service at fault)", most first, and what each cause means.
func causeCounts(m map[string]int) (string, string) {
	if len(m) == 0 {
		return "", ""
	}
	short := map[string]int{}
	for k, v := range m {
		short[causeShort(k)] += v
	}
	var tips []string
	for _, k := range sortedKeys(m) {
		tips = append(tips, k+": "+causeWords(k))
	}
	return kinds(short), strings.Join(tips, " ")
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func hasCauses(cells []cellView) bool {
	for _, c := range cells {
		if c.Class == "unsafe" && len(c.Cell.Causes) > 0 {
			return true
		}
	}
	return false
}
