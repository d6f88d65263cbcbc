package shrink

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// Property is what a candidate must still break to count as a
// reproduction: the same anomaly kind, and the same cause where the
// checker names one (lease-expired, lease-broken...).
type Property struct {
	Kind  checker.Kind  `json:"kind"`
	Cause checker.Cause `json:"cause,omitempty"`
}

func (p Property) String() string {
	if p.Cause == "" {
		return string(p.Kind)
	}
	return fmt.Sprintf("%s (%s)", p.Kind, p.Cause)
}

// ParseProperty reads KIND or KIND:CAUSE ("double-holder:lease-expired").
func ParseProperty(s string) (Property, error) {
	kind, cause, _ := strings.Cut(strings.TrimSpace(s), ":")
	if kind == "" {
		return Property{}, fmt.Errorf("property %q: want KIND or KIND:CAUSE, e.g. double-holder:lease-expired", s)
	}
	return Property{Kind: checker.Kind(kind), Cause: checker.Cause(cause)}, nil
}

// Flag is p as --property takes it: KIND or KIND:CAUSE.
func (p Property) Flag() string {
	if p.Cause == "" {
		return string(p.Kind)
	}
	return string(p.Kind) + ":" + string(p.Cause)
}

// Violations lists the properties r's violations break, in the order of
// their first violation.
func Violations(r *checker.Result) []Property {
	var out []Property
	as := slices.Clone(r.Anomalies)
	slices.SortStableFunc(as, func(a, b checker.Anomaly) int { return cmp.Compare(a.Start, b.Start) })
	for _, a := range as {
		if a.Severity == checker.SeverityViolation {
			out = appendOnce(out, Property{a.Kind, a.Cause})
		}
	}
	return out
}

// Target is the property of a result's first violation (the earliest
// anomaly whose severity is a violation); ok false when it has none.
func Target(r *checker.Result) (Property, checker.Anomaly, bool) {
	a, ok := firstViolation(r, func(checker.Anomaly) bool { return true })
	return Property{Kind: a.Kind, Cause: a.Cause}, a, ok
}

// Match is the earliest violation of r with property p; ok false when r
// has none (then the candidate did not reproduce).
func (p Property) Match(r *checker.Result) (checker.Anomaly, bool) {
	return firstViolation(r, func(a checker.Anomaly) bool { return a.Kind == p.Kind && a.Cause == p.Cause })
}

func firstViolation(r *checker.Result, keep func(checker.Anomaly) bool) (checker.Anomaly, bool) {
	var best checker.Anomaly
	found := false
	if r == nil || r.Verdict != checker.Unsafe {
		return best, false
	}
	for _, a := range r.Anomalies {
		if a.Severity != checker.SeverityViolation || !keep(a) {
			continue
		}
		if !found || a.Start < best.Start {
			best, found = a, true
		}
	}
	return best, found
}

// faultBefore is the last fault that took effect and began no later than
// t (ns since the run's start); ok false when none did.
func faultBefore(faults []history.Fault, t int64) (history.Fault, bool) {
	var last history.Fault
	found := false
	for _, f := range faults {
		if f.Failed || f.Start > t {
			continue
		}
		if !found || f.Start >= last.Start {
			last, found = f, true
		}
	}
	return last, found
}

// TryOf is what one run of a candidate says about property p: its
// verdict, whether it broke p, when, and how long after the fault that
// came last before it (or within it). faults are the run's faults (history.Faults).
func TryOf(p Property, dir string, r *checker.Result, faults []history.Fault, wall time.Duration) Try {
	t := Try{Dir: dir, Verdict: r.Verdict, FirstViolationNs: -1, AfterFaultNs: -1, DurationNs: r.Counts.DurationNs, WallNs: int64(wall),
		Interrupted: r.Interrupted || r.CheckInterrupted}
	for _, a := range r.Anomalies {
		if a.Severity == checker.SeverityViolation {
			t.Found = appendOnce(t.Found, Property{a.Kind, a.Cause}.String())
		}
	}
	a, ok := p.Match(r)
	if !ok {
		return t
	}
	t.Reproduced = true
	t.FirstViolationNs = a.Start
	// The fault that led to it may begin inside the anomaly's window (a
	// kill right after the grant that opens a non-linearizable window):
	// the last fault begun by the anomaly's end, at 0 when it began after
	// the anomaly's start.
	if f, ok := faultBefore(faults, max(a.End, a.Start)); ok {
		t.AfterFaultNs = max(a.Start-f.Start, 0)
		t.Fault = f.Name
	}
	return t
}

func appendOnce[T comparable](s []T, v T) []T {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
