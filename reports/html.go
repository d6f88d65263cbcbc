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
func ShrinkCommand(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return ""
	}
	return "locktest shrink " + dir
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
