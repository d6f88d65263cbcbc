// Package reports turns a history and the checker's result into what people
// read: one self-contained HTML page per run (WriteRunHTML), the short
// terminal summary printed at the end of a run (WriteSummary) and
// results.json (WriteResultsJSON).
//
// The HTML page is built in two steps: buildRun computes everything that is
// drawn (lanes, hold bars, buckets of failed acquires, fault bands, anomaly
// regions, tables) in plain structs, and an embedded html/template renders
// them. The first step is where the decisions are and is unit-tested on its
// own; the second only prints.
//
// Every time shown is seconds since the run's base instant (the history's
// CLOCK_MONOTONIC time 0), never wall-clock time.
package reports
