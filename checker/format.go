package checker

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/locktest/locktest/history"
)

// at renders a time of the run for explanations: "3.05 s", or "12.3 ms"
// in the first second, where two decimals of a second would say nothing.
func at(ns int64) string {
	if ns == history.Never {
		return "never"
	}
	if ns < 1e9 && ns > -1e9 {
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2f s", float64(ns)/1e9)
}

// decimalsFor is how many decimals of a second tell the times ns apart
// (2, as at writes them, up to 9): an explanation that says one time came
// before another must not print both as "1.47 s".
func decimalsFor(ns ...int64) int {
	for d := 2; d < 9; d++ {
		seen := make(map[string]int64, len(ns))
		distinct := true
		for _, x := range ns {
			s := atD(x, d)
			if y, ok := seen[s]; ok && y != x {
				distinct = false
				break
			}
			seen[s] = x
		}
		if distinct {
			return d
		}
	}
	return 9
}

// atD is at with d decimals of a second (at itself for d <= 2; in the
// first second, milliseconds with d-3 decimals, at least one).
func atD(ns int64, d int) string {
	if d <= 2 || ns == history.Never {
		return at(ns)
	}
	if ns < 1e9 && ns > -1e9 {
		return fmt.Sprintf("%.*f ms", max(1, d-3), float64(ns)/1e6)
	}
	return fmt.Sprintf("%.*f s", d, float64(ns)/1e9)
}

// span renders a duration for explanations: "2.00 s", or "45.0 ms" below a
// tenth of a second, where two decimals of a second would say nothing.
func span(ns int64) string {
	if ns < 100_000_000 && ns > -100_000_000 {
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2f s", float64(ns)/1e9)
}

// faultString renders a fault for Anomaly.Faults: "pause client 3 (1.20s–4.80s)".
func faultString(f history.Fault) string {
	name := f.Name
	if f.Target != "" {
		name += " " + f.Target
	}
	if gap(f) {
		name += " at " + f.Point
	}
	if f.End == history.Never {
		return fmt.Sprintf("%s (from %.2fs, never healed)", name, float64(f.Start)/1e9)
	}
	return fmt.Sprintf("%s (%.2fs–%.2fs)", name, float64(f.Start)/1e9, float64(f.End)/1e9)
}

// faultsDuring renders the faults active at some point of [from, to].
func faultsDuring(h *history.History, from, to int64) []string {
	var out []string
	for _, f := range h.FaultsDuring(from, to) {
		s := faultString(f)
		if p, ok := h.Promotion(f); ok && history.Late(p) {
			s += fmt.Sprintf(", replica promoted by %.2fs (seen late)", float64(p.Time)/1e9)
		} else if ok {
			s += fmt.Sprintf(", replica promoted at %.2fs", float64(p.Time)/1e9)
		}
		out = append(out, s)
	}
	return out
}

// clientTarget returns N for a fault target "client N".
func clientTarget(target string) (int, bool) {
	rest, ok := strings.CutPrefix(target, "client ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return 0, false
	}
	return n, true
}

// clientFaultSentence says what the faults that targeted client c during
// [from, to] did to it, e.g. "client 1 was paused 1.01 s–5.20 s", or "" when
// none did.
func clientFaultSentence(h *history.History, c int, from, to int64) string {
	var parts []string
	for _, f := range h.FaultsDuring(from, to) {
		if n, ok := clientTarget(f.Target); !ok || n != c {
			continue
		}
		parts = append(parts, faultVerb(f))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("client %d %s", c, strings.Join(parts, " and "))
}

func faultVerb(f history.Fault) string {
	when := fmt.Sprintf("%.2f s–%.2f s", float64(f.Start)/1e9, float64(f.End)/1e9)
	if f.End == history.Never {
		when = fmt.Sprintf("from %.2f s on", float64(f.Start)/1e9)
	}
	switch {
	case f.Name == "pause" && gap(f):
		return fmt.Sprintf("was paused %s (the %s gap) %s", gapPhrase(f.Point), f.Point, when)
	case f.Name == "pause":
		return "was paused " + when
	case f.Name == "crash-client" && gap(f):
		return fmt.Sprintf("crashed %s (the %s gap) at %s", gapPhrase(f.Point), f.Point, at(f.Start))
	case f.Name == "crash-client":
		return "was killed at " + at(f.Start)
	default:
		return fmt.Sprintf("was hit by %s %s", f.Name, when)
	}
}

// gap reports whether the client fault f struck inside the client's own
// steps (a fault point other than right after the grant).
func gap(f history.Fault) bool { return f.Point != "" && f.Point != "after-grant" }

// gapPhrase says where a fault point lies, for explanations.
func gapPhrase(point string) string {
	switch point {
	case "after-check":
		return "between its check that it still held the lock and its write"
	case "after-get":
		return "between its GET, which found the key its own, and its delete"
	case "after-setnx":
		return "between SETNX and EXPIRE"
	case "waiting":
		return "while it waited in a blocking acquire"
	}
	return "inside its own steps"
}

// plural renders "1 double holder" / "2 double holders".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// satAdd adds without overflowing past history.Never (or below -Never).
func satAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return history.Never
	}
	if b < 0 && s > a {
		return -history.Never
	}
	return s
}
