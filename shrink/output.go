package shrink

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
)

//go:embed templates
var templates embed.FS

var pageTmpl = template.Must(template.New("shrink.html.tmpl").Funcs(template.FuncMap{
	"add": func(a, b int) int { return a + b },
	"sub": func(a, b int) int { return a - b },
}).ParseFS(templates, "templates/shrink.html.tmpl"))

// WriteOutputs writes what the user gets in the shrink directory dir:
// repro.sh (one `locktest run` line), repro-schedule.json when the
// minimal configuration replays a schedule, the link "minimal" to a run
// of it that reproduced, and shrink.html. It sets rep.Command and makes
// the run directories in rep relative to dir.
func WriteOutputs(dir string, rep *Report, base harness.Options) error {
	sched := ""
	if rep.Minimal.Schedule != nil {
		sched = ReproSched
		if err := rep.Minimal.Schedule.Write(filepath.Join(dir, ReproSched)); err != nil {
			return err
		}
	}
	o := rep.Minimal.Apply(base)
	rep.Command = ShellLine(CommandLine(o, sched))
	script := fmt.Sprintf("#!/bin/sh\n# %s: reproduces %s (locktest shrink of %s)\n%s%s\n",
		rep.Property, rep.Rate, rep.Source, reproPreamble(reproLocktest()), rep.Command)
	if err := os.WriteFile(filepath.Join(dir, ReproFile), []byte(script), 0o755); err != nil {
		return err
	}
	relativize(dir, rep)
	link := filepath.Join(dir, MinimalLink)
	_ = os.Remove(link)
	if rep.MinimalDir != "" {
		if err := os.Symlink(rep.MinimalDir, link); err != nil {
			return err
		}
		// Its report, written before the shrink knew, offered to shrink it.
		if err := reports.MarkMinimal(filepath.Join(dir, rep.MinimalDir)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := rep.Write(dir); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, buildPage(dir, rep)); err != nil {
		return fmt.Errorf("write %s: %w", PageFile, err)
	}
	return os.WriteFile(filepath.Join(dir, PageFile), buf.Bytes(), 0o644)
}

// reproLocktest is the locktest repro.sh runs when $LOCKTEST is not set
// and none is on PATH: this executable (tests put another here).
var reproLocktest = func() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return "locktest"
}

// reproPreamble is what repro.sh does before its `locktest run` line: go
// to the shrink directory (repro-schedule.json is there, and the run's
// store) and find locktest: $LOCKTEST if set, else the one on PATH, else
// self.
func reproPreamble(self string) string {
	return `# locktest: $LOCKTEST if set, else the one on PATH, else ` + self + "\n" +
		`cd "$(dirname "$0")" || exit 2` + "\n" +
		`if [ -z "$LOCKTEST" ] && ! command -v locktest >/dev/null 2>&1; then LOCKTEST=` + shellQuote(self) + "; fi\n" +
		`if [ -n "$LOCKTEST" ]; then locktest() { "$LOCKTEST" "$@"; }; fi` + "\n"
}

// relativize makes the run directories of rep relative to dir.
func relativize(dir string, rep *Report) {
	rel := func(p string) string {
		if p == "" {
			return p
		}
		ap, err1 := filepath.Abs(p)
		ad, err2 := filepath.Abs(dir)
		if err1 != nil || err2 != nil {
			return p
		}
		if r, err := filepath.Rel(ad, ap); err == nil {
			return r
		}
		return p
	}
	rep.MinimalDir = rel(rep.MinimalDir)
	for i := range rep.Candidates {
		for k := range rep.Candidates[i].Tries {
			rep.Candidates[i].Tries[k].Dir = rel(rep.Candidates[i].Tries[k].Dir)
		}
	}
}

type pageView struct {
	Property, Explanation, Stopped, Rate, Command, Note string
	Error                                               string
	Source, SourceReport, MinimalReport                 string
	Schedule                                            bool
	Rows                                                []compareRow
	Witness                                             *witnessView
	WitnessH                                            int
	WitnessNote                                         string
	Candidates                                          []candidateRow
}

type compareRow struct{ Setting, Original, Minimal string }

type candidateRow struct {
	N              int
	Step, Change   string
	Outcome, Tries string
	Kept           bool
}

// stoppedWords says why shrinking stopped, in words.
var stoppedWords = map[string]string{
	StoppedDone:          "every dimension was tried",
	StoppedBudget:        "the budget ran out; this is the best found by then",
	StoppedInterrupted:   "interrupted (Ctrl-C); this is the best found by then",
	StoppedNotReproduced: "the original never failed again in its tries: nothing was shrunk",
	StoppedError:         "the original could not be run again (see the error in shrink.json): nothing was shrunk",
}

func buildPage(dir string, rep *Report) pageView {
	src, _ := filepath.Abs(rep.Source)
	srcRel, err := filepath.Rel(dir, src)
	if err != nil {
		srcRel = src
	}
	v := pageView{Property: rep.Property.String(), Explanation: rep.Explanation, Rate: rep.Rate.String(), Command: rep.Command,
		Note: rep.Note, Source: rep.Source, SourceReport: filepath.ToSlash(filepath.Join(srcRel, "report.html")),
		Error: rep.Error, Schedule: rep.Minimal.Schedule != nil,
		Stopped: fmt.Sprintf("%s (%d runs in %s)", stoppedWords[rep.Stopped], rep.Runs, time.Duration(rep.ElapsedNs).Round(time.Second))}
	if rep.Stopped != StoppedDone {
		v.Stopped = fmt.Sprintf("%s (in step %s, after %d runs in %s)", stoppedWords[rep.Stopped], rep.StoppedAt, rep.Runs, time.Duration(rep.ElapsedNs).Round(time.Second))
	}
	if rep.MinimalDir != "" {
		v.MinimalReport = MinimalLink + "/report.html"
	}
	o, m := rep.Original, rep.Minimal
	v.Rows = []compareRow{
		{"--nemesis", o.NemesisFlag(), m.NemesisFlag()},
		{"faults", faultWords(o), faultWords(m)},
		{"--clients", fmt.Sprint(o.Clients), fmt.Sprint(m.Clients)},
		{"--time-limit", o.TimeLimit.String(), m.TimeLimit.String()},
		{"--stop-early", fmt.Sprint(o.StopEarly), fmt.Sprint(m.StopEarly)},
		{"--param", paramWords(o.Params), paramWords(m.Params)},
	}
	for _, c := range rep.Candidates {
		r := RateOf(c.Tries)
		v.Candidates = append(v.Candidates, candidateRow{N: c.N, Step: string(c.Step), Change: c.Change, Outcome: string(c.Outcome),
			Kept: c.Kept, Tries: triesWords(r, len(c.Tries))})
	}
	v.Witness, v.WitnessNote = minimalWitness(dir, rep)
	if v.Witness != nil {
		v.WitnessH = v.Witness.Height - 24
		if a, ok := minimalAnomaly(dir, rep); ok {
			v.Explanation = a.Explanation
		}
	}
	return v
}

// triesWords says how many of a candidate's runs reproduced, of those
// that ran to their end; the runs cut (budget, Ctrl-C) or failed are
// counted apart: they prove nothing.
func triesWords(r Rate, runs int) string {
	s := fmt.Sprintf("%d of %d", r.Reproduced, r.Tries)
	if n := runs - r.Tries; n > 0 {
		s += fmt.Sprintf(" (+%d cut or failed)", n)
	}
	return s
}

func faultWords(c Config) string {
	if c.Schedule == nil {
		return "drawn by the seed from --nemesis"
	}
	if len(c.Faults) == 0 {
		return "none"
	}
	return strings.Join(c.Faults, "; ")
}

func paramWords(p map[string]string) string {
	if len(p) == 0 {
		return "none"
	}
	var s []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		s = append(s, k+"="+p[k])
	}
	return strings.Join(s, " ")
}

// minimalAnomaly is the property's first violation in the minimal run's
// results.json.
func minimalAnomaly(dir string, rep *Report) (checker.Anomaly, bool) {
	var res checker.Result
	if rep.MinimalDir == "" || readJSON(filepath.Join(dir, rep.MinimalDir, "results.json"), &res) != nil {
		return checker.Anomaly{}, false
	}
	return rep.Property.Match(&res)
}

// minimalWitness lays out the minimal run's anomaly, or says why not.
func minimalWitness(dir string, rep *Report) (*witnessView, string) {
	a, ok := minimalAnomaly(dir, rep)
	if !ok {
		return nil, "No run of a smaller configuration reproduced the anomaly: nothing to draw."
	}
	h, err := history.Load(filepath.Join(dir, rep.MinimalDir, "history.jsonl"))
	if err != nil {
		return nil, "The minimal run's history cannot be read: " + err.Error()
	}
	w := witnessOf(h, a)
	return &w, ""
}
