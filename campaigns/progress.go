package campaigns

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/reports"
)

// progress tells what the campaign is doing: the current cells, elapsed
// and estimated remaining time, anomalies so far. Live, it redraws one
// status line every second below the lines of finished cells (a
// terminal); otherwise it prints a line when a run starts and when it ends.
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	live    bool
	c       *reports.Campaign
	total   int // runs planned in this session
	done    int
	start   time.Time
	current map[string]time.Time // "cell seed N" -> start
	limits  map[string]time.Duration
	nums    map[string]int // "cell seed N" -> its number, given when it starts
	next    int            // runs started
	pending time.Duration  // time limits of runs not started yet
	over    time.Duration  // observed overhead per run (start-up, check), summed
	summary string         // anomalies so far, computed when a run ends
	stop    chan struct{}
	stopped chan struct{}
}

func newProgress(out io.Writer, live bool, c *reports.Campaign, runs int) *progress {
	p := &progress{out: out, live: live, c: c, total: runs, start: time.Now(), current: map[string]time.Time{}, limits: map[string]time.Duration{}, nums: map[string]int{}}
	for i := range c.Cells {
		cell := &c.Cells[i]
		if cell.Status == reports.CellPending {
			p.pending += time.Duration(cell.TimeLimitNs) * time.Duration(c.Runs-len(cell.Runs))
		}
	}
	return p
}

func (p *progress) begin() {
	n, na, skipped := 0, 0, 0
	for _, cell := range p.c.Cells {
		switch cell.Status {
		case reports.CellNA:
			na++
		case reports.CellSkipped:
			skipped++
		case reports.CellPending:
			n++
		}
	}
	p.mu.Lock()
	p.summary = p.count()
	fmt.Fprintf(p.out, "campaign %s: %d cells to run (%d runs), %d n/a, %d skipped, %d already done\n",
		orName(p.c.Name), n, p.total, na, skipped, len(p.c.Cells)-n-na-skipped)
	for _, cell := range p.c.Cells {
		if cell.Status == reports.CellSkipped {
			fmt.Fprintf(p.out, "  skipped %s: %s\n", cell.ID, cell.Reason)
		}
	}
	p.mu.Unlock()
	if p.live {
		p.stop, p.stopped = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(p.stopped)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-t.C:
					p.mu.Lock()
					p.redraw()
					p.mu.Unlock()
				}
			}
		}()
	}
}

func (p *progress) end() {
	if p.live {
		close(p.stop)
		<-p.stopped
		p.mu.Lock()
		fmt.Fprint(p.out, "\r\033[K")
		p.mu.Unlock()
	}
}

func key(cell *reports.Cell, seed int64) string { return fmt.Sprintf("%s seed %d", cell.ID, seed) }

func (p *progress) started(cell *reports.Cell, seed int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(cell, seed)
	p.current[k] = time.Now()
	p.limits[k] = time.Duration(cell.TimeLimitNs)
	p.pending -= time.Duration(cell.TimeLimitNs)
	// Each run gets its number when it starts, and keeps it on all its
	// lines (with --parallel, runs end in another order).
	p.next++
	p.nums[k] = p.next
	if p.live {
		p.redraw()
		return
	}
	on := ""
	if cell.Note != "" {
		on = ", on " + cell.Topology
	}
	if cell.Sizing != "" {
		on += ", sized for the fault"
	}
	fmt.Fprintf(p.out, "[%d/%d] %s: running (%s%s) — elapsed %s, remaining ~%s, %s\n",
		p.nums[k], p.total, k, time.Duration(cell.TimeLimitNs), on, p.elapsed(), p.remaining(), p.anomalies())
}

// finished records the end of the run of cell with seed; run is nil when
// it was interrupted before it recorded anything.
func (p *progress) finished(cell *reports.Cell, seed int64, run *reports.CellRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(cell, seed)
	n := p.nums[k]
	if run == nil || run.Interrupted {
		delete(p.current, k)
		if run != nil {
			if p.live {
				fmt.Fprint(p.out, "\r\033[K")
			}
			fmt.Fprintf(p.out, "[%d/%d] %s: interrupted (kept in %s; a resume runs it again)\n", n, p.total, k, run.Dir)
		}
		return
	}
	if t, ok := p.current[k]; ok {
		if o := time.Since(t) - p.limits[k]; o > 0 {
			p.over += o
		}
		delete(p.current, k)
	}
	p.done++
	p.summary = p.count()
	line := fmt.Sprintf("[%d/%d] %s: %s", n, p.total, k, run.Verdict)
	if run.Error != "" {
		line += ": " + run.Error
	} else if run.Why != "" {
		line += " (" + run.Why + ")"
	}
	if run.StoppedEarly {
		line += ", stopped at its first violation"
	}
	if cell.Status != reports.CellPending && cell.Expect != "" {
		if cell.Outcome == reports.Differs {
			line += fmt.Sprintf("  DIFFERS: expected %s", cell.Expect)
		} else {
			line += "  as expected"
		}
	}
	if p.live {
		fmt.Fprint(p.out, "\r\033[K")
	}
	fmt.Fprintln(p.out, line)
	if p.live {
		p.redraw()
	}
}

// redraw rewrites the status line; p.mu is held.
func (p *progress) redraw() {
	var cur []string
	for k, t := range p.current {
		cur = append(cur, fmt.Sprintf("[%d] %s %s/%s", p.nums[k], k, time.Since(t).Round(time.Second), p.limits[k]))
	}
	sort.Strings(cur)
	line := fmt.Sprintf("%d of %d runs done | %s | elapsed %s, remaining ~%s | %s", p.done, p.total, strings.Join(cur, "; "), p.elapsed(), p.remaining(), p.anomalies())
	fmt.Fprint(p.out, "\r\033[K"+line)
}

func (p *progress) elapsed() time.Duration { return time.Since(p.start).Round(time.Second) }

// remaining estimates the time left: the time limits of the runs not yet
// started plus what is left of the current ones, each plus the mean
// overhead seen so far (2 s before the first run ends).
func (p *progress) remaining() time.Duration {
	per := 2 * time.Second
	if p.done > 0 {
		per = p.over / time.Duration(p.done)
	}
	left := p.pending + time.Duration(p.total-p.done)*per
	for k, t := range p.current {
		if l := p.limits[k] - time.Since(t); l > 0 {
			left += l
		}
	}
	par := len(p.current)
	if par < 1 {
		par = 1
	}
	return (left / time.Duration(par)).Round(time.Second)
}

func (p *progress) anomalies() string { return p.summary }

// count summarises the anomalies so far; the caller holds the campaign's
// lock (cells change under it).
func (p *progress) count() string {
	n, unsafe, differs := 0, 0, 0
	for _, cell := range p.c.Cells {
		for _, v := range cell.Anomalies {
			n += v
		}
		if cell.Verdict == "unsafe" {
			unsafe++
		}
		if cell.Outcome == reports.Differs {
			differs++
		}
	}
	return fmt.Sprintf("%d anomalies in %d unsafe cells, %d differ", n, unsafe, differs)
}

func orName(s string) string {
	if s == "" {
		return "(unnamed)"
	}
	return s
}
