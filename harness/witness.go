package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// witnessDir names the directory of anomaly n's witness (n from 1, its
// place in results.json and the report): witness-<n>/history.jsonl is a
// run directory's history, so `locktest check DIR/witness-<n>` checks it.
func witnessDir(n int) string { return fmt.Sprintf("witness-%d", n) }

// witnessDirName matches the directories witnessDir makes.
var witnessDirName = regexp.MustCompile(`^witness-[0-9]+$`)

// IsWitnessDir reports whether dir is the directory of a witness inside a
// run directory: it holds a history.jsonl, but it is no run of its own
// (a store's runs are listed without it).
func IsWitnessDir(dir string) bool {
	if !witnessDirName.MatchString(filepath.Base(dir)) {
		return false
	}
	_, err := os.Stat(filepath.Join(filepath.Dir(dir), "history.jsonl"))
	return err == nil
}

// writeWitnesses minimises the anomalies of res, the check of h
// (checker.Witnesses: bounded in time), writes each witness in its
// directory under dir, replacing those of an earlier check, and points
// the anomaly at it. It returns one line saying what it wrote ("" for
// nothing). A witness is not minimised again.
func writeWitnesses(ctx context.Context, dir string, h *history.History, res *checker.Result) (string, error) {
	if checker.IsWitness(h) {
		return "", nil
	}
	if err := removeWitnesses(dir); err != nil {
		return "", err
	}
	if res.CheckInterrupted {
		return "", nil
	}
	if len(res.Anomalies) == 0 {
		return "", nil
	}
	from, err := witnessSource(h, res)
	if err != nil {
		return "", err
	}
	ws := checker.Witnesses(ctx, from, res, checker.WitnessOptions{})
	partial := 0
	for _, w := range ws {
		sub := witnessDir(w.Anomaly + 1)
		if err := writeHistory(filepath.Join(dir, sub), w.Events); err != nil {
			return "", err
		}
		a := &res.Anomalies[w.Anomaly]
		a.Witness, a.WitnessPartial = filepath.ToSlash(filepath.Join(sub, "history.jsonl")), !w.Minimal
		if !w.Minimal {
			partial++
		}
	}
	if len(ws) == 0 {
		return "", nil
	}
	line := fmt.Sprintf("witnesses: %d of %d anomalies minimised, each in witness-<n>/history.jsonl (#n in the report); e.g. locktest check %s",
		len(ws), len(res.Anomalies), filepath.Join(dir, witnessDir(ws[0].Anomaly+1)))
	if partial > 0 {
		line += fmt.Sprintf("; %d not proven 1-minimal (time bound)", partial)
	}
	return line, nil
}

// removeWitnesses removes the witness directories of an earlier check.
func removeWitnesses(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() && IsWitnessDir(filepath.Join(dir, e.Name())) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove old witness: %w", err)
			}
		}
	}
	return nil
}

// writeHistory writes events (header first, Seq set) as dir/history.jsonl.
func writeHistory(dir string, events []history.Event) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create witness directory: %w", err)
	}
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"), 0, false)
	if err != nil {
		return err
	}
	for _, e := range events {
		rec.RecordAt(e, e.Time)
	}
	return rec.Close()
}

// witnessMaxOps bounds the operations a witness is cut from, so that
// minimising the anomalies of a long history costs the memory of a window
// of it, not of every event (which Load leaves in the file).
var witnessMaxOps = 200_000

// witnessSource is the history the witnesses are cut from: h itself when
// it is short or already whole (checker.Witnesses reads a short lean one
// again whole); else a window of it around
// the anomalies a witness is made for (checker.Prioritized; each with a
// margin of four times its length and at least a second on either side,
// the widest the minimiser's own search around an anomaly goes before it
// takes the whole history), the widest anomalies left out until the
// window holds at most witnessMaxOps operations. A witness is checked on
// its own whatever it was cut from.
func witnessSource(h *history.History, res *checker.Result) (*history.History, error) {
	if !h.Lean || len(h.Ops) <= witnessMaxOps {
		return h, nil // checker.Witnesses reads a lean one again whole
	}
	var spans []history.Span
	total := 0 // an upper bound: spans may overlap
	opsWithin := h.OpsCounter()
	for _, i := range checker.Prioritized(res.Anomalies) {
		a := res.Anomalies[i]
		end := min(a.End, h.End)
		pad := max(4*(end-a.Start), int64(time.Second))
		s := history.Span{From: a.Start - pad, To: end + pad}
		if s.To >= h.End { // to the end, operations never completed included
			s.To = history.Never
		}
		n := opsWithin([]history.Span{s})
		if total+n > witnessMaxOps {
			continue
		}
		total += n
		spans = append(spans, s)
	}
	return h.Window(spans)
}
