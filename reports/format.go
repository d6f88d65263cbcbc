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

// secs formats a time in ns since the run's start as seconds with the given
// number of decimals, e.g. "12.34s"; history.Never is "never".
func secs(ns int64, decimals int) string {
	if ns == history.Never {
		return "never"
	}
	return strconv.FormatFloat(float64(ns)/1e9, 'f', decimals, 64) + "s"
}

// span formats an interval as "1.20s-4.80s (3.60s)", with an open end for
// history.Never.
func span(from, to int64, decimals int) string {
	if to == history.Never {
		return secs(from, decimals) + "-(never ended)"
	}
	return secs(from, decimals) + "-" + secs(to, decimals) + " (" + dur(to-from) + ")"
}

// when formats an anomaly's time: "at 4.00s" for an instant, else
// "2.60s-3.50s".
func when(from, to int64) string {
	if secs(from, 2) == secs(to, 2) {
		return "at " + secs(from, 2)
	}
	return secs(from, 2) + "-" + secs(to, 2)
}

// dur formats a duration in ns for people: "850us", "12.3ms", "3.60s".
func dur(ns int64) string {
	switch {
	case ns == history.Never:
		return "forever"
	case ns < 0:
		return "-" + dur(-ns)
	case ns < 1e6:
		return strconv.FormatInt(ns/1e3, 10) + "us"
	case ns < 1e9:
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(float64(ns)/1e9, 'f', 2, 64) + "s"
	}
}

// millis formats a check's duration in milliseconds.
func millis(ms float64) string {
	switch {
	case ms <= 0:
		return "-"
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	case ms < 10000:
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	default:
		return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
	}
}

// tokenStr renders an optional fencing token or value; "-" when absent.
func tokenStr(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

// intList renders client ids as "3, 5".
func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}

// pct renders part/whole as a percentage, "" when whole is 0.
func pct(part, whole int64) string {
	if whole <= 0 {
		return ""
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

// nemesesStr renders the nemesis list, "none" when empty.
func nemesesStr(ns []string) string {
	if len(ns) == 0 {
		return "none"
	}
	return strings.Join(ns, ",")
}

// onOff renders a flag.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// outcome describes how an operation completed: "ok", "fail: held",
// "indeterminate: timeout", "no completion".
func outcome(o *history.Operation) string {
	switch o.Type {
	case history.OK:
		return "ok"
	case history.Fail:
		if o.Reason != "" {
			return "fail: " + o.Reason
		}
		return "fail"
	default:
		if o.Completed == history.Never {
			return "indeterminate (never completed)"
		}
		return "indeterminate"
	}
}

// asciiReplacer turns the typographic characters explanations may carry
// into plain ASCII for terminals.
var asciiReplacer = strings.NewReplacer(
	"\u2013", "-", "\u2014", "-", "\u2212", "-", "\u2026", "...", "\u2192", "->", "\u2190", "<-",
	"\u2264", "<=", "\u2265", ">=", "\u00d7", "x", "\u00b5", "u", "\u03bc", "u", "\u2018", "'", "\u2019", "'",
	"\u201c", `"`, "\u201d", `"`, "\u00a0", " ", "\u2248", "~", "\u2260", "!=",
)

// kindTally renders how many anomalies of each kind and severity the
// indices name, e.g. "300 stale-write-rejected (info), 2 double-holder
// (violation)", most frequent first.
func kindTally(as []checker.Anomaly, idx []int) string {
	type key struct{ kind, sev string }
	n := map[key]int{}
	var order []key
	for _, i := range idx {
		k := key{string(as[i].Kind), string(as[i].Severity)}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	sort.SliceStable(order, func(a, b int) bool { return n[order[a]] > n[order[b]] })
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s (%s)", n[k], k.kind, k.sev)
	}
	return strings.Join(parts, ", ")
}

// niceStep returns a step of 1, 2 or 5 times a power of ten near raw.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// replayedLine says that a run's faults were replayed from a schedule
// file (locktest run --schedule), and from which.
func replayedLine(file string) string {
	return "faults replayed from " + file + " (not drawn from the seed)"
}
