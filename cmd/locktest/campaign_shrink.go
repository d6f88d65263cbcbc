package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/shrink"
)

// campaignShrink shrinks one run; tests put a fake here.
var campaignShrink = shrinkRun

// ShrinkDir is where a campaign's shrinks go, one directory per cell.
const campaignShrinkDir = "shrink"

// unexpectedUnsafe is the first finished unsafe run of a cell that was not
// expected to be unsafe (expectation safe, or none), relative to the
// campaign directory; ok false for other cells.
func unexpectedUnsafe(cell *reports.Cell) (string, bool) {
	if cell.Verdict != string(reports.ExpectUnsafe) || cell.Expect == reports.ExpectUnsafe || cell.Expect == reports.ExpectEither {
		return "", false
	}
	for _, r := range cell.Runs {
		if r.Verdict == reports.ExpectUnsafe && !r.Interrupted && r.Dir != "" {
			return r.Dir, true
		}
	}
	return "", false
}

// shrinkCells shrinks, one after the other, every cell of the campaign in
// dir that is unsafe without being expected to be, each within
// o.Budget, into dir/shrink/<cell>; it stops at ctx's end. It says what
// each shrink found on out.
func shrinkCells(ctx context.Context, dir string, c *reports.Campaign, o ShrinkOptions, out io.Writer) {
	for i := range c.Cells {
		cell := &c.Cells[i]
		run, ok := unexpectedUnsafe(cell)
		if !ok {
			continue
		}
		if ctx.Err() != nil {
			fmt.Fprintf(out, "shrink %s: not started (interrupted)\n", cell.ID)
			continue
		}
		co := o
		co.Out = filepath.Join(dir, campaignShrinkDir, cellDirName(cell.ID))
		fmt.Fprintf(out, "shrink %s (%s):\n", cell.ID, run)
		rep, outDir, err := campaignShrink(ctx, filepath.Join(dir, run), &co, out)
		switch {
		case err != nil:
			fmt.Fprintf(out, "shrink %s: %v\n", cell.ID, err)
		default:
			fmt.Fprintf(out, "shrink %s: %s, reproduces %s (%s): %s\n", cell.ID, rep.Minimal.Summary(), rep.Rate, rep.Stopped, filepath.Join(outDir, shrink.PageFile))
		}
	}
}

// cellDirName makes a cell id ("redis-lua +fence/pause+kill") a directory
// name.
func cellDirName(id string) string {
	r := strings.NewReplacer("/", "_", " ", "", ",", "+")
	return r.Replace(id)
}
