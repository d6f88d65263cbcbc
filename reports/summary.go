package reports

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// maxSummaryAnomalies is how many anomalies the terminal summary explains.
const maxSummaryAnomalies = 5

// ANSI escape sequences, used only when colour is asked for.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

// WriteVerdict writes the first lines of WriteSummary only: the verdict
// and why, the run's lock, faults and seed, and its warnings (what a
// `locktest run --quiet` prints).
func WriteVerdict(w io.Writer, h *history.History, r *checker.Result, color bool) {
	p := &painter{w: w, color: color}
	if r == nil {
		p.line("no result: the history was not checked")
		return
	}
	writeVerdict(p, h, r)
}

// runDuration is how long the run's history lasts.
func runDuration(h *history.History, r *checker.Result) int64 {
	duration := r.Counts.DurationNs
	if duration == 0 && h != nil {
		duration = h.End
	}
	return duration
}

func writeVerdict(p *painter, h *history.History, r *checker.Result) {
	verdict := strings.ToUpper(string(r.Verdict))
	if verdict == "" {
		verdict = "NO VERDICT"
	}
	vc := ansiYellow
	gloss := "the run could not show whether the lock is safe"
	switch r.Verdict {
	case checker.Safe:
		vc, gloss = ansiGreen, safeGloss(r)
	case checker.Unsafe:
		vc, gloss = ansiRed, unsafeGloss(r)
	}
	lock, nem, seed := r.Lock, r.Nemeses, r.Seed
	if h != nil {
		if lock == "" {
			lock = h.Info.Lock
		}
		if len(nem) == 0 {
			nem = h.Info.Nemeses
		}
		if seed == 0 {
			seed = h.Info.Seed
		}
	}
	fence := r.Fence || (h != nil && h.Info.Fence)
	duration := runDuration(h, r)

	p.printf("%s: %s\n", p.paint(ansiBold+vc, verdict), gloss)
	p.printf("  lock %s, nemeses %s, seed %d, fencing %s, %s", lock, nemesesStr(nem), seed, onOff(fence), dur(duration))
	if h != nil && h.Info.Clients > 0 {
		p.printf(", %d clients", h.Info.Clients)
	}
	p.printf("\n")
	if h != nil && h.Info.Mirrors != nil {
		p.printf("  mirrors %s\n", h.Info.Mirrors)
	}
	if h != nil && h.Info.ReplayedFrom != "" {
		p.printf("  %s\n", replayedLine(h.Info.ReplayedFrom))
	}
	for i, l := range wrap(r.Why, 100) {
		if i == 0 {
			p.printf("  why: %s\n", l)
		} else {
			p.printf("       %s\n", l)
		}
	}
	if r.Truncated || (h != nil && h.Truncated) {
		p.printf("  %s\n", p.paint(ansiYellow, "warning: the history is truncated (the run did not end cleanly)"))
	}
	if r.Interrupted {
		p.printf("  %s\n", p.paint(ansiYellow, "warning: the run was interrupted before its time limit: it proves nothing either way"))
	}
}

// WriteSummary writes the short summary printed at the end of a run: the
// verdict and why (WriteVerdict), the key counts, one line per property
// and the first few anomalies (violations first) with their explanations.
// It is plain ASCII text; with color set it adds ANSI colours. h may be nil
// (the hold count is then left out). Write errors are ignored: this is for
// a terminal.
func WriteSummary(w io.Writer, h *history.History, r *checker.Result, color bool) {
	p := &painter{w: w, color: color}
	if r == nil {
		p.line("no result: the history was not checked")
		return
	}
	writeVerdict(p, h, r)
	if r.StoppedEarly {
		p.printf("  %s\n", p.paint(ansiDim, "the run stopped at its first certain violation (--stop-early): the counts below are lower bounds"))
	}
	c := r.Counts
	duration := runDuration(h, r)
	p.printf("\n")
	holds := ""
	if h != nil {
		holds = fmt.Sprintf("; %d holds, lock held %s of the time", len(checker.Holds(h)), orDash(pct(c.HeldNs, duration)))
	}
	p.printf("  acquires  %d ok, %d failed, %d indeterminate%s\n", c.AcquiresOK, c.AcquiresFail, c.AcquiresInfo, holds)
	p.printf("  releases  %d ok, %d failed, %d indeterminate\n", c.ReleasesOK, c.ReleasesFail, c.ReleasesInfo)
	if c.Writes > 0 {
		p.printf("  writes    %d accepted, %d rejected for a stale token\n", c.WritesAccepted, c.WritesRejected)
	}
	p.printf("  faults    %d injected, %d struck while the lock was held\n", c.Faults, c.FaultsOnHolder)
	if c.ShortGrants > 0 {
		p.printf("  votes     %d of %d grants short of a vote: %s\n", c.ShortGrants, c.AcquiresOK, missingVotes(c.MissingVotes))
	}

	if len(r.Properties) > 0 {
		p.printf("\nproperties:\n")
		nameW := 0
		for _, pr := range r.Properties {
			nameW = max(nameW, len(pr.Name))
		}
		for _, pr := range r.Properties {
			st := strings.ToUpper(string(pr.Status))
			if pr.Status == checker.Pass || pr.Status == checker.Skipped {
				st = string(pr.Status)
			}
			col := ""
			switch pr.Status {
			case checker.Pass:
				col = ansiGreen
			case checker.Fail:
				col = ansiRed + ansiBold
			case checker.Unknown:
				col = ansiYellow
			case checker.Skipped:
				col = ansiDim
			}
			var rest []string
			if pr.Count > 0 {
				rest = append(rest, plural(pr.Count, "anomaly", "anomalies"))
			}
			if pr.Detail != "" {
				rest = append(rest, pr.Detail)
			}
			if pr.Engine != "" {
				rest = append(rest, "by "+pr.Engine)
			}
			p.printf("  %s %-*s  %s\n", p.paint(col, fmt.Sprintf("%-7s", st)), nameW, pr.Name, strings.Join(rest, "; "))
		}
	}

	if n := len(r.Anomalies); n > 0 {
		shown := min(n, maxSummaryAnomalies)
		pick := append([]int(nil), checker.Prioritized(r.Anomalies)[:shown]...)
		sort.Ints(pick)
		if shown < n {
			p.printf("\nanomalies (%d of %d: the most severe, one of each kind first):\n", shown, n)
		} else {
			p.printf("\nanomalies (%d):\n", n)
		}
		for _, i := range pick {
			a := r.Anomalies[i]
			col := ansiDim
			switch a.Severity {
			case "violation":
				col = ansiRed
			case "contained":
				col = ansiYellow
			}
			who := "clients"
			if len(a.Clients) == 1 {
				who = "client"
			}
			label := string(a.Severity)
			if a.Cause != "" {
				label += ", " + causeShort(string(a.Cause))
			}
			p.printf("  %s: %s %s, %s\n",
				p.paint(col+ansiBold, fmt.Sprintf("#%d %s (%s)", i+1, a.Kind, label)),
				who, intList(a.Clients), when(a.Start, a.End))
			if len(a.Faults) > 0 {
				p.printf("     during: %s\n", strings.Join(a.Faults, "; "))
			}
			for _, l := range wrap(a.Explanation, 92) {
				p.printf("     %s\n", l)
			}
			if a.Witness != "" {
				p.printf("     witness: %s\n", a.Witness)
			}
		}
		if n > shown {
			p.printf("  %d more in results.json / report.html\n", n-shown)
		}
	}
}

// painter writes text and colours it only when asked to.
type painter struct {
	w     io.Writer
	color bool
}

// printf formats and writes, with typographic characters turned to ASCII.
func (p *painter) printf(format string, args ...any) {
	_, _ = io.WriteString(p.w, asciiReplacer.Replace(fmt.Sprintf(format, args...)))
}

func (p *painter) line(s string) { p.printf("%s\n", s) }

func (p *painter) paint(code, s string) string {
	if !p.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

// units that stay on the line of the number before them.
var units = map[string]bool{"s": true, "s,": true, "s.": true, "s;": true, "s)": true, "ms": true, "ms,": true, "ms.": true, "ms;": true, "ms)": true, "us": true, "ns": true, "%": true}

func glueUnits(words []string) []string {
	var out []string
	for _, w := range words {
		if n := len(out); n > 0 && units[w] && strings.ContainsAny(out[n-1][len(out[n-1])-1:], "0123456789") {
			out[n-1] += " " + w
			continue
		}
		out = append(out, w)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// wrap breaks text into lines of at most width bytes at spaces (a longer
// word gets a line of its own). A unit stays with its number: "2.00 s" is
// never broken.
func wrap(text string, width int) []string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range glueUnits(strings.Fields(para)) {
			switch {
			case line == "":
				line = word
			case len(line)+1+len(word) <= width:
				line += " " + word
			default:
				out = append(out, line)
				line = word
			}
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// safeGloss says what a safe verdict means: nothing went wrong, or the lock
// failed and fencing tokens kept the resource safe.
func safeGloss(r *checker.Result) string {
	for _, a := range r.Anomalies {
		if a.Severity == checker.SeverityContained {
			return "the guarded resource stayed safe: fencing tokens contained the lock's failures (below)"
		}
	}
	return "no property of the lock was violated"
}

// unsafeGloss says who is to blame for an unsafe verdict: the lock service
// (it broke its own terms: a grant under a live lease, a foreign release, an
// order no lock could give, a deadlock), or nobody's promise but mutual
// exclusion itself (holders outlived their leases or sessions, by design),
// or a client that used the lock past its own validity.
func unsafeGloss(r *checker.Result) string {
	byDesign, clientBug, broken := false, false, false
	for _, a := range r.Anomalies {
		if a.Severity != checker.SeverityViolation {
			continue
		}
		switch {
		case a.Kind == checker.KindUsedAfterValidity:
			clientBug = true
		case a.Kind == checker.KindDoubleHolder && (a.Cause == checker.CauseLeaseExpired || a.Cause == checker.CauseSessionExpired):
			byDesign = true
		case a.Kind == checker.KindLostUpdate || a.Kind == checker.KindStaleWriteAccepted:
			// Damage: it follows from the double holders.
		default:
			broken = true
		}
	}
	switch {
	case broken || !byDesign && !clientBug:
		return "the lock broke its promise"
	case clientBug:
		return "a client used the lock after its own validity ran out (a client bug), and holders outlived their leases"
	}
	return "lost by design: a holder outlived its lease or session and went on, so two clients held the lock; only fencing tokens protect the resource"
}

// missingVotes says how often each server's vote was missing, most often
// first ("redis-2 missing from 26, redis-4 from 3").
func missingVotes(m map[string]int) string {
	names := byCount(m)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s from %d", n, m[n])
		if i == 0 {
			parts[i] = fmt.Sprintf("%s missing from %d", n, m[n])
		}
	}
	return strings.Join(parts, ", ")
}
