package reports

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// Limits that keep the page small for long runs.
const (
	maxAnomalies   = 100          // anomalies shown in full (region, ops table)
	maxExcerpts    = 10           // anomalies with a history excerpt
	maxExcerptRows = 200          // events per excerpt
	excerptPad     = int64(500e6) // ns of history shown before and after an anomaly
	maxOpRows      = 20           // operations per anomaly's ops table
	maxFaultRows   = 500          // rows of the fault table
	minBandPx      = 2.0          // narrowest fault band
	minAnomPx      = 4.0          // narrowest anomaly region
	charPx         = 6.2          // estimated width of a label character
)

// runView is everything the HTML template draws, computed from the history
// and the result by buildRun.
type runView struct {
	Header         headerView
	Timeline       timelineView
	Anomalies      []anomalyView
	AnomalyTotal   int
	AnomalyOmitted int
	OmittedTally   string // kinds of the omitted anomalies
	Properties     []propertyView
	Counts         []countView
	Faults         []faultRow
	FaultsOmitted  int
	Plots          plotsView
	Files          []fileLink // server logs and client stderr, relative to the page
	Lin            *linView   // the porcupine view; nil when none was attempted
}

// fileLink links a file of the run directory.
type fileLink struct {
	Path string
	Size string
}

type headerView struct {
	Lock, Nemeses, Fence, Fencing string
	Seed                          int64
	Verdict, VerdictClass, Why    string
	Servers                       []string
	Command                       string
	Cluster, Topology, Version    string
	Mirrors                       string // the library and version the scheme follows
	Replayed                      string // the faults were replayed from a schedule: the line that says so
	StartedAt, Duration           string
	Clients                       int
	TTL                           string
	Wait                          bool
	Truncated                     bool
	Ended                         string
	FirstViolation                string
	// Interrupted: the run was interrupted before its time limit (the
	// badge says INTERRUPTED, Checked what its recorded part checks as);
	// StoppedEarly: it stopped at its first certain violation.
	Interrupted, StoppedEarly bool
	Checked                   string
	TimeLimit                 string
	// Shrink is the command that shrinks an unsafe run (ShrinkCommand),
	// "" for other runs and pages written without their directory.
	Shrink string
	// MinimalOf, for the minimal run of a shrink (MinimalOf), is its
	// shrink page relative to the run directory: the page says the run is
	// already minimal instead of offering to shrink it.
	MinimalOf string
}

type propertyView struct {
	Name, Status, StatusClass, Engine string
	Count                             int
	Time                              string
	Detail                            string
	Search                            *searchView // how the lock sweep decided it; nil for the other properties
}

// searchView is checker.SearchStats for people.
type searchView struct {
	ForcedPct string // share of returns decided with one configuration open
	ForcedW   float64
	Facts     []string // plain sentences
	BoundHit  bool
	Exact     bool
}

type countView struct {
	Label, Value, Note string
}

type faultRow struct {
	Name, Target, Start, End, Duration, Detail string
}

// buildRun computes the whole page.
func buildRun(h *history.History, r *checker.Result) runView {
	holds := checker.Holds(h)
	ops := make(map[int64]*history.Operation, len(h.Ops))
	for i := range h.Ops {
		ops[h.Ops[i].OpID] = &h.Ops[i]
	}
	shown, omitted := selectAnomalies(r.Anomalies, maxAnomalies)
	v := runView{
		Header:         buildHeader(h, r),
		Timeline:       buildTimeline(h, r.Anomalies, shown, holds),
		AnomalyTotal:   len(r.Anomalies),
		AnomalyOmitted: len(omitted),
		OmittedTally:   kindTally(r.Anomalies, omitted),
		Properties:     buildProperties(r.Properties),
		Counts:         buildCounts(h, r, holds),
	}
	v.Anomalies = buildAnomalies(h, r.Anomalies, shown, ops)
	for i, f := range h.Faults {
		if i == maxFaultRows {
			v.FaultsOmitted = len(h.Faults) - i
			break
		}
		row := faultRow{
			Name: f.Name, Target: f.Target, Start: secs(f.Start, 2), End: secs(f.End, 2),
			Duration: durOrOpen(f.Start, f.End), Detail: f.Detail,
		}
		if p, ok := h.Promotion(f); ok && history.Late(p) {
			if n, ok := h.NoPromotion(f); ok {
				row.Detail += fmt.Sprintf("; at %s s, %s", secs(n.Time, 2), n.Detail)
			}
			row.Detail += fmt.Sprintf("; promoted by %s s (seen late): %s", secs(p.Time, 2), strings.TrimPrefix(p.Detail, history.FailoverNote+history.PromotedLate))
		} else if ok {
			row.Detail += fmt.Sprintf("; promoted at %s s: %s", secs(p.Time, 2), strings.TrimPrefix(p.Detail, history.FailoverNote))
		} else if n, ok := h.NoPromotion(f); ok {
			row.Detail += fmt.Sprintf("; at %s s, %s", secs(n.Time, 2), n.Detail)
		}
		v.Faults = append(v.Faults, row)
	}
	return v
}

func durOrOpen(from, to int64) string {
	if to == history.Never {
		return "not healed"
	}
	return dur(to - from)
}

func buildHeader(h *history.History, r *checker.Result) headerView {
	in := h.Info
	lock := r.Lock
	if lock == "" {
		lock = in.Lock
	}
	nem := r.Nemeses
	if len(nem) == 0 {
		nem = in.Nemeses
	}
	seed := r.Seed
	if seed == 0 {
		seed = in.Seed
	}
	hv := headerView{
		Lock: lock, Nemeses: nemesesStr(nem), Seed: seed,
		Fence: onOff(r.Fence || in.Fence), Fencing: onOff(in.Fencing),
		Verdict: strings.ToUpper(string(r.Verdict)), VerdictClass: verdictClass(r.Verdict),
		Why: r.Why, Servers: in.Servers, Command: in.Command,
		Cluster: in.Cluster, Topology: in.Topology, Version: in.Version,
		StartedAt: in.StartedAt, Duration: secs(h.End, 2), Clients: in.Clients,
		Wait: in.Wait, Truncated: h.Truncated || r.Truncated, Ended: h.Ended,
	}
	if in.Mirrors != nil {
		hv.Mirrors = in.Mirrors.String()
	}
	if in.ReplayedFrom != "" {
		hv.Replayed = replayedLine(in.ReplayedFrom)
	}
	if hv.Verdict == "" {
		hv.Verdict = "NO VERDICT"
	}
	if in.TimeLimitMs > 0 {
		hv.TimeLimit = dur(in.TimeLimitMs * 1e6)
	}
	hv.StoppedEarly = r.StoppedEarly || h.Ended == history.EndedEarly
	if r.Interrupted || h.Ended == history.EndedInterrupted {
		// Never shown as a verdict: the run did not run its course.
		hv.Interrupted = true
		hv.Checked = hv.Verdict
		hv.Verdict, hv.VerdictClass = "INTERRUPTED", "interrupted"
	}
	if in.Lease || in.TTLMillis > 0 {
		hv.TTL = dur(in.TTLMillis * 1e6)
	}
	if r.FirstViolation >= 0 && r.Verdict == checker.Unsafe {
		hv.FirstViolation = secs(r.FirstViolation, 2)
	}
	return hv
}

func verdictClass(v checker.Verdict) string {
	switch v {
	case checker.Safe:
		return "safe"
	case checker.Unsafe:
		return "unsafe"
	default:
		return "inconclusive"
	}
}

func statusClass(s checker.Status) string {
	switch s {
	case checker.Pass:
		return "pass"
	case checker.Fail:
		return "fail"
	case checker.Unknown:
		return "unknown"
	default:
		return "na"
	}
}

func buildProperties(ps []checker.Property) []propertyView {
	out := make([]propertyView, 0, len(ps))
	for _, p := range ps {
		out = append(out, propertyView{
			Name: p.Name, Status: string(p.Status), StatusClass: statusClass(p.Status),
			Engine: p.Engine, Count: p.Count, Time: millis(p.Millis), Detail: p.Detail,
			Search: buildSearch(p.Search),
		})
	}
	return out
}

func buildCounts(h *history.History, r *checker.Result, holds []checker.Hold) []countView {
	c := r.Counts
	duration := c.DurationNs
	if duration == 0 {
		duration = h.End
	}
	clients := h.Info.Clients
	cl := strconv.Itoa(c.ClientsAcquired)
	if clients > 0 {
		cl += " of " + strconv.Itoa(clients)
	}
	startup := countView{"cluster start-up", dur(h.Info.StartupMillis * 1e6), "until every server answered"}
	switch {
	case h.Info.ClusterReused:
		startup.Value, startup.Note = "reused", "started for an earlier run of the campaign"
	case h.Info.StartupMillis == 0:
		startup.Value, startup.Note = "-", "not recorded"
	}
	return []countView{
		startup,
		{"duration", dur(duration), ""},
		{"operations", strconv.Itoa(c.Ops), ""},
		{"acquires", strconv.Itoa(c.Acquires), fmt.Sprintf("%d ok, %d failed, %d indeterminate", c.AcquiresOK, c.AcquiresFail, c.AcquiresInfo)},
		{"holds", strconv.Itoa(len(holds)), "intervals in which a client surely believed it held the lock"},
		{"lock held", dur(c.HeldNs), pct(c.HeldNs, duration) + " of the run"},
		{"releases", strconv.Itoa(c.Releases), fmt.Sprintf("%d ok, %d failed, %d indeterminate", c.ReleasesOK, c.ReleasesFail, c.ReleasesInfo)},
		{"resource writes", strconv.Itoa(c.Writes), fmt.Sprintf("%d accepted, %d rejected (stale token)", c.WritesAccepted, c.WritesRejected)},
		{"resource value", strconv.FormatInt(c.ResourceFinal, 10), "final (started at " + strconv.FormatInt(h.Info.ResourceStart, 10) + ")"},
		{"faults", strconv.Itoa(c.Faults), fmt.Sprintf("%d struck while the lock was held", c.FaultsOnHolder)},
		{"clients that acquired", cl, ""},
	}
}

// buildSearch says how much of the history the lock sweep decided with one
// configuration open, how much it searched, and whether it hit its bound.
func buildSearch(st *checker.SearchStats) *searchView {
	if st == nil {
		return nil
	}
	v := &searchView{BoundHit: st.Exceeded, Exact: st.Exact}
	read := st.Forced + st.Searched
	if read > 0 {
		f := float64(st.Forced) / float64(read)
		v.ForcedPct = strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
		v.ForcedW = 100 * f
	}
	v.Facts = append(v.Facts, fmt.Sprintf("%s read%s.", plural(st.Ops, "lock operation", "lock operations"),
		map[bool]string{true: fmt.Sprintf(", and %s made while the lock was surely held left out (they fit anywhere)", plural(st.Dropped, "failed acquire", "failed acquires")), false: ""}[st.Dropped > 0]))
	if read > 0 {
		searched := fmt.Sprintf("searched among several configurations: %d", st.Searched)
		if st.Searched == 0 {
			searched = "none needed a search"
		}
		v.Facts = append(v.Facts, fmt.Sprintf("Decided exactly, with one way to place the operation: %d of %d returns (%s); %s.",
			st.Forced, read, v.ForcedPct, searched))
	}
	if st.Searched > 0 {
		v.Facts = append(v.Facts, fmt.Sprintf("The search kept at most %s open at once, in %s, and built %d in all.",
			plural(st.MaxFrontier, "configuration", "configurations"), plural(st.Windows, "stretch", "stretches"), st.Explored))
	}
	if st.Indeterminate > 0 {
		v.Facts = append(v.Facts, fmt.Sprintf("%s never answered: each may have taken effect at any later time, or never.", plural(st.Indeterminate, "operation", "operations")))
	}
	switch {
	case st.Exceeded:
		v.Facts = append(v.Facts, fmt.Sprintf("The search bound (%s) was hit at %s: the lock sweep gave up there and porcupine decided the property.",
			plural(st.Bound, "configuration", "configurations"), secs(st.ExceededAt, 2)))
	case st.Bound > 0:
		v.Facts = append(v.Facts, fmt.Sprintf("The search bound (%s) was not hit.", plural(st.Bound, "configuration", "configurations")))
	}
	switch {
	case st.Exact:
		v.Facts = append(v.Facts, "A first pass, which limits how late a lost operation may take effect, could not decide; the exact pass did.")
	case !st.Exceeded && (st.Approx > 0 || st.Restricted > 0):
		v.Facts = append(v.Facts, "A first pass, which limits how late a lost operation may take effect, placed every operation: that proves the history linearizable.")
	}
	return v
}
