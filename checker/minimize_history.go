package checker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/locktest/locktest/history"
)

// History-level witnesses: for an anomaly the checker reported, a
// sub-history of whole operations (invocation and completion together),
// whole faults (start and end, with a failover's promotion note), whole
// client processes (start and exit) and notes, the header and the run's
// end kept, in which the property that found the anomaly still finds one
// of the same kind, cause, severity and clients, with the anomaly's own
// operations kept, and from which no single operation, fault, process or
// note more can be removed without losing it (1-minimal; minimize.go). It
// is itself a history: `locktest check` reads it and fails the same
// property.

// WitnessNote starts the Detail of the note a witness history carries right
// after its header: what it is a witness of. A history with it is a
// witness, and is not minimised again.
const WitnessNote = "witness: "

// WitnessOptions bounds the minimisation of a result's anomalies.
type WitnessOptions struct {
	// Budget bounds the time spent on all the anomalies together (default
	// 10s), PerAnomaly on each one (default 3s). An anomaly whose time ran
	// out keeps what was removed by then: a witness, maybe not 1-minimal
	// (HistoryWitness.Minimal false).
	Budget, PerAnomaly time.Duration
	// Max is the most anomalies minimised (default 16), in the order of
	// Prioritized: every kind of violation there is before a second one of
	// any kind.
	Max int
	// Check tunes the property checks run on each candidate; their search
	// budgets are capped by the time left.
	Check Options
}

func (o WitnessOptions) withDefaults() WitnessOptions {
	if o.Budget <= 0 {
		o.Budget = 10 * time.Second
	}
	if o.PerAnomaly <= 0 {
		o.PerAnomaly = 3 * time.Second
	}
	if o.Max <= 0 {
		o.Max = 16
	}
	o.Check = o.Check.withDefaults()
	return o
}

// HistoryWitness is the sub-history that shows one anomaly.
type HistoryWitness struct {
	Anomaly int             // index in Result.Anomalies
	Events  []history.Event // header first, then the witness note; Seq from 0
	// Ops and Faults count the operations and faults kept; Processes the
	// client processes.
	Ops, Faults, Processes int
	// Minimal: removing any one more operation, fault, process or note was
	// tried and loses the anomaly. False when the time bound stopped the
	// search.
	Minimal bool
	Tests   int           // candidate sub-histories checked
	Took    time.Duration // time spent
}

// Witnesses minimises the anomalies of r (the result of checking h), at
// most o.Max of them within o.Budget. An anomaly whose minimisation could
// not start (its property did not find it again) has no witness.
func Witnesses(ctx context.Context, h *history.History, r *Result, o WitnessOptions) []HistoryWitness {
	o = o.withDefaults()
	if IsWitness(h) || len(r.Anomalies) == 0 {
		return nil
	}
	h, err := h.Whole() // a witness is cut from events, which a lean history left in its file
	if err != nil {
		return nil
	}
	end := time.Now().Add(o.Budget)
	us := unitsOf(h)
	var out []HistoryWitness
	for _, i := range Prioritized(r.Anomalies) {
		if len(out) == o.Max || ctx.Err() != nil || time.Now().After(end) {
			break
		}
		deadline := time.Now().Add(o.PerAnomaly)
		if deadline.After(end) {
			deadline = end
		}
		if w, ok := us.witness(ctx, r.Anomalies[i], o.Check, deadline); ok {
			w.Anomaly = i
			out = append(out, w)
		}
	}
	return out
}

// MinimizeAnomaly returns the witness of anomaly a of h, minimised until
// deadline; ok false when the property that found a does not find it in h.
func MinimizeAnomaly(ctx context.Context, h *history.History, a Anomaly, opts Options, deadline time.Time) (HistoryWitness, bool) {
	h, err := h.Whole()
	if err != nil {
		return HistoryWitness{}, false
	}
	return unitsOf(h).witness(ctx, a, opts.withDefaults(), deadline)
}

// witness minimises anomaly a over the units of us.
func (us *histUnits) witness(ctx context.Context, a Anomaly, opts Options, deadline time.Time) (HistoryWitness, bool) {
	t0 := time.Now()
	pinned := us.pinned(a.Ops)
	var free []int32
	for i := range us.units {
		if !pinned[int32(i)] {
			free = append(free, int32(i))
		}
	}
	check := gradedCheck(a.Kind)
	shows := func(kept []int32) bool {
		sub, err := history.FromEvents(us.events(kept, pinned))
		if err != nil {
			return false // cannot happen: whole units only
		}
		o := opts
		o.SearchBudget = max(min(o.SearchBudget, time.Until(deadline)), time.Millisecond)
		o.PorcupineTimeout = max(min(o.PorcupineTimeout, time.Until(deadline)), time.Millisecond)
		// The sweep's budget counts CPU time (budget.go); the deadline
		// is wall time and stops it too (no anomaly: not shown).
		dctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		return slices.ContainsFunc(check(dctx, newFacts(sub), o), func(b Anomaly) bool { return sameAnomaly(a, b) })
	}
	// Every sub-history kept was checked; the whole history is checked
	// only when nothing could be removed (the check that reported a is
	// usually the costliest step, and a smaller candidate that shows a
	// needs no more proof).
	all := len(free)
	over := func() bool { return ctx.Err() != nil || time.Now().After(deadline) }
	tried := 0
	if !over() { // the anomaly's own operations alone, then a window around it
		if tried++; shows(nil) {
			free = nil
		} else {
			var n int
			free, n = us.localize(free, a, shows, over)
			tried += n
		}
	}
	r := minimize(free, shows, deadline, over)
	r.tests += tried
	if len(r.kept) == all {
		r.tests++
		if !shows(free) {
			return HistoryWitness{}, false // the property does not find it again
		}
	}
	w := us.witnessOf(a, slices.Concat(r.kept, slices.Collect(maps.Keys(pinned))), r.minimal)
	w.Tests, w.Took = r.tests, time.Since(t0)
	return w, true
}

// witnessOf is the witness of a made of the units kept: their events,
// with the note that says what it is right after the header.
func (us *histUnits) witnessOf(a Anomaly, kept []int32, minimal bool) HistoryWitness {
	w := HistoryWitness{Minimal: minimal}
	for _, u := range kept {
		switch us.units[u].kind {
		case unitOp:
			w.Ops++
		case unitFault:
			w.Faults++
		case unitProcess:
			w.Processes++
		}
	}
	how := "1-minimal"
	if !minimal {
		how = "not proven 1-minimal (time bound reached)"
	}
	what := string(a.Kind)
	if a.Cause != "" {
		what += " (" + string(a.Cause) + ")"
	}
	note := history.Event{Type: history.Note, Detail: fmt.Sprintf("%s%s of clients %v: %d of %d operations, %d of %d faults, %s",
		WitnessNote, what, a.Clients, w.Ops, us.ops, w.Faults, us.faults, how)}
	evs := us.events(kept, nil)
	w.Events = slices.Concat(evs[:1], []history.Event{note}, evs[1:])
	for i := range w.Events {
		w.Events[i].Seq = int64(i)
	}
	return w
}

// sameAnomaly reports whether b, found in a sub-history, is anomaly a: the
// same kind, cause, severity and clients (the main one first), and the
// same operations: for a non-linearizable history the same first
// operation that cannot be placed (the rest is a witness the sweep shrinks
// anew), otherwise at least a's.
func sameAnomaly(a, b Anomaly) bool {
	if a.Kind != b.Kind || a.Cause != b.Cause || a.Severity != b.Severity || !sameClients(a.Clients, b.Clients) {
		return false
	}
	if a.Kind == KindNonLinearizable {
		return len(a.Ops) == 0 || (len(b.Ops) > 0 && a.Ops[0] == b.Ops[0])
	}
	for _, id := range a.Ops {
		if !slices.Contains(b.Ops, id) {
			return false
		}
	}
	return true
}

func sameClients(a, b []int) bool {
	if len(a) != len(b) || (len(a) > 0 && a[0] != b[0]) {
		return false
	}
	for _, c := range a {
		if !slices.Contains(b, c) {
			return false
		}
	}
	return true
}
