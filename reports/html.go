package reports

import (
	"bufio"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

//go:embed templates
var templates embed.FS

var funcs = template.FuncMap{
	"f":  f1,
	"f2": func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"add": func(xs ...float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s
	},
	"add_i": func(a, b int) int { return a + b },
}

var runTmpl = template.Must(template.New("run.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/run.html.tmpl"))

// css is the page's style sheet, inlined into every report.
var css = func() template.CSS {
	b, err := templates.ReadFile("templates/report.css")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return template.CSS(b)
}()

// WriteRunHTML writes the report of one run as a single self-contained HTML
// page: the verdict, a time line of every client process with its holds,
// failed and indeterminate operations, resource writes, the faults and the
// anomalies, then the anomalies one by one with the operations they name
// and an excerpt of the history around them, the properties and the counts.
// The page loads nothing: its style sheet and drawings are inline.
//
// The time line's x axis is seconds since the run's start. Holds are the
// intervals checker.Holds computes. To keep long runs readable and the file
// small (about 1 MB for 100k operations), failed acquires are drawn as one
// tick per pixel whose length grows with their number, writes as one dot
// per three pixels, and short holds of one client that touch merge into one
// bar; at most 100 anomalies are drawn and detailed (violations first, one
// of each kind before repeats), 10 of them with a history excerpt.
func WriteRunHTML(w io.Writer, h *history.History, r *checker.Result) error {
	return WriteRunPage(w, h, r, nil)
}

// RunFiles lists the files of a run directory a run page links to (server
// logs, non-empty client stderr), relative to the directory.
func RunFiles(dir string) []string {
	var out []string
	for _, pat := range []string{"servers/*/*", "servers/*", "clients/*.stderr"} {
		ms, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, m := range ms {
			st, err := os.Stat(m)
			if err != nil || st.IsDir() || st.Size() == 0 {
				continue
			}
			if rel, err := filepath.Rel(dir, m); err == nil {
				out = append(out, filepath.ToSlash(rel))
			}
		}
	}
	return out
}

// WriteRunPage is WriteRunHTML with links to files of the run directory
// (RunFiles), shown under "Server logs".
func WriteRunPage(w io.Writer, h *history.History, r *checker.Result, files []string) error {
	return writeRunPage(w, h, r, files, nil, "")
}

// ShrinkCommand is the command that shrinks the unsafe run in dir to its
// smallest reproduction (locktest shrink): the hint of its report and of
// its terminal summary; "" when dir has no config.json (a history checked
// alone): without the run's settings shrink cannot run it again.
// The minimal run of a shrink (its own reproduction, already minimal)
// offers no shrink either: "" for it.
func ShrinkCommand(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return ""
	}
	if MinimalOf(dir) != "" {
		return ""
	}
	return "locktest shrink " + shellQuote(dir)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// The files of a shrink directory a run page looks for (shrink.MinimalLink
// and shrink.PageFile; package shrink imports this one).
const (
	shrinkMinimalLink = "minimal"
	shrinkPage        = "shrink.html"
)

// MinimalOf returns the shrink directory whose minimal run dir is (its
// link "minimal" leads to dir; a shrink keeps its runs a few levels below
// it, runs/LOCK/NEMESIS/TIME), "" when dir is no shrink's minimal run.
func MinimalOf(dir string) string {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	for p, i := filepath.Dir(real), 0; i < 4 && p != filepath.Dir(p); p, i = filepath.Dir(p), i+1 {
		if target, err := filepath.EvalSymlinks(filepath.Join(p, shrinkMinimalLink)); err == nil && target == real {
			return p
		}
	}
	return ""
}

// MarkMinimal rewrites the shrink hint of the report of dir, the minimal
// run of a shrink (MinimalOf), written before the shrink knew it: the
// page says it is already minimal instead of offering to shrink it. A
// page without the hint is left as it is.
func MarkMinimal(dir string) error {
	path := filepath.Join(dir, "report.html")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	page := string(b)
	start := strings.Index(page, `<div class="meta" id="shrink">`)
	if start < 0 {
		return nil
	}
	end := strings.Index(page[start:], "</div>")
	if end < 0 {
		return nil
	}
	var hint strings.Builder
	if err := runTmpl.ExecuteTemplate(&hint, "shrinkhint", headerView{MinimalOf: minimalPage(dir)}); err != nil {
		return err
	}
	page = page[:start] + hint.String() + page[start+end+len("</div>"):]
	return writeAtomic(path, []byte(page))
}

// minimalPage is the shrink page of the shrink whose minimal run is dir,
// relative to dir; "" when dir is none.
func minimalPage(dir string) string {
	sd := MinimalOf(dir)
	if sd == "" {
		return ""
	}
	real, _ := filepath.EvalSymlinks(dir)
	rel, err := filepath.Rel(real, filepath.Join(sd, shrinkPage))
	if err != nil {
		return ""
	}
	return filepath.ToSlash(rel)
}

// writeRunPage is WriteRunPage with what the page says about the porcupine
// view (nil: nothing, the page was written alone) and, for an unsafe run,
// the "Shrink this run" hint with its directory (dir "": no hint).
func writeRunPage(w io.Writer, h *history.History, r *checker.Result, files []string, lin *linView, dir string) error {
	if h == nil {
		return errors.New("write report: no history")
	}
	if r == nil {
		return errors.New("write report: no result")
	}
	data := struct {
		runView
		CSS template.CSS
	}{buildRun(h, r), css}
	data.Plots = buildPlots(h)
	data.Lin = lin
	if dir != "" && r.Verdict == checker.Unsafe {
		data.Header.Shrink = ShrinkCommand(dir)
		data.Header.MinimalOf = minimalPage(dir)
	}
	for _, f := range files {
		data.Files = append(data.Files, fileLink{Path: f})
	}
	bw := bufio.NewWriterSize(w, 64*1024)
	if err := runTmpl.Execute(bw, data); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
