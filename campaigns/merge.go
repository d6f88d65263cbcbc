package campaigns

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/reports"
)

// MergedFile, in a merged campaign's directory, lists the shards it was
// merged from (MergedShard).
const MergedFile = "shards.json"

// MergedShard is a shard of a merged campaign: its index, where it was
// read from, its machine and wall time, and the directory its runs were
// copied to (relative to the merged campaign's).
type MergedShard struct {
	Shard
	From   string `json:"from"`
	Dir    string `json:"dir"`
	WallNs int64  `json:"wall_ns"`
}

// RefusedError is a merge refused for its input: a missing or duplicated
// shard, shards of different campaigns or versions, a run in two shards,
// an unfinished shard.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

func refuse(format string, a ...any) error { return &RefusedError{fmt.Sprintf(format, a...)} }

type shardIn struct {
	dir string
	sh  *Shard
	c   *reports.Campaign
}

// Merge reads the shard directories dirs of one campaign and returns the
// campaign they make together, as one machine would have run it, and the
// shards it came from. It refuses (RefusedError) a directory that is not a
// finished shard, shards of different plans, versions or shard counts, a
// shard given twice, a missing shard, and a run (cell and seed) two shards
// claim. A cell one shard skipped on its machine stays skipped, its reason
// saying which shard. Run directories stay as they are: Dir of every run
// and of every MergedShard is relative to its shard's directory until
// CopyRuns moves them.
func Merge(dirs []string) (*reports.Campaign, []MergedShard, error) {
	if len(dirs) == 0 {
		return nil, nil, refuse("merge: no shard directories given")
	}
	var in []shardIn
	for _, d := range dirs {
		sh, err := LoadShard(d)
		if err != nil {
			return nil, nil, refuse("merge: %v", err)
		}
		c, err := Load(d)
		if err != nil {
			return nil, nil, refuse("merge: %s: %v", d, err)
		}
		if c.Interrupted || c.Finished == "" || sh.Finished == "" {
			return nil, nil, refuse("merge: shard %s in %s did not finish (go on with `locktest campaign --resume %s`)", sh.Name(), d, d)
		}
		in = append(in, shardIn{d, sh, c})
	}
	first := in[0]
	byK := map[int]shardIn{}
	for _, s := range in {
		switch {
		case s.sh.Plan != first.sh.Plan:
			return nil, nil, refuse("merge: %s is a shard of another campaign config (plan %s, %s has %s)", s.dir, s.sh.Plan, first.dir, first.sh.Plan)
		case s.sh.Version != first.sh.Version:
			return nil, nil, refuse("merge: %s ran locktest %s, %s ran %s: shards must run one version", s.dir, s.sh.Version, first.dir, first.sh.Version)
		case s.sh.N != first.sh.N:
			return nil, nil, refuse("merge: %s is shard %s, %s is shard %s: shards must split the campaign alike", s.dir, s.sh.Name(), first.dir, first.sh.Name())
		}
		if o, ok := byK[s.sh.K]; ok {
			return nil, nil, refuse("merge: shard %s given twice: %s and %s", s.sh.Name(), o.dir, s.dir)
		}
		byK[s.sh.K] = s
	}
	var missing []string
	for k := 1; k <= first.sh.N; k++ {
		if _, ok := byK[k]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", k, first.sh.N))
		}
	}
	if len(missing) > 0 {
		return nil, nil, refuse("merge: shard %s missing (given %d of %d shards)", strings.Join(missing, ", "), len(in), first.sh.N)
	}
	sort.Slice(in, func(a, b int) bool { return in[a].sh.K < in[b].sh.K })

	// Every run of the plan in exactly one shard.
	type runOf struct {
		id   string
		seed int64
	}
	claimed := map[runOf]string{}
	ordinal := map[string]int{}
	for _, s := range in {
		for _, sc := range s.sh.Cells {
			if o, ok := ordinal[sc.ID]; ok && o != sc.Ordinal {
				return nil, nil, refuse("merge: cell %s has place %d in one shard and %d in shard %s", sc.ID, o, sc.Ordinal, s.sh.Name())
			}
			ordinal[sc.ID] = sc.Ordinal
			for _, seed := range sc.Seeds {
				if o, ok := claimed[runOf{sc.ID, seed}]; ok {
					return nil, nil, refuse("merge: cell %s seed %d is in shard %s and shard %s: a run twice", sc.ID, seed, o, s.sh.Name())
				}
				claimed[runOf{sc.ID, seed}] = s.sh.Name()
			}
		}
		for _, cell := range s.c.Cells {
			for _, r := range cell.Runs {
				if who := claimed[runOf{cell.ID, r.Seed}]; who != s.sh.Name() {
					return nil, nil, refuse("merge: shard %s (%s) has a run of cell %s seed %d that is not its share", s.sh.Name(), s.dir, cell.ID, r.Seed)
				}
			}
		}
	}
	if len(claimed) != first.sh.PlanRuns || len(ordinal) != first.sh.PlanCells {
		return nil, nil, refuse("merge: the shards hold %d runs of %d cells, the campaign plans %d runs of %d cells", len(claimed), len(ordinal), first.sh.PlanRuns, first.sh.PlanCells)
	}

	m := *first.c
	m.Cells = make([]reports.Cell, first.sh.PlanCells)
	m.WallNs, m.StartupNs, m.WorkloadNs, m.ClusterStarts, m.ClusterReuses, m.Parallel = 0, 0, 0, 0, 0, 0
	m.Started, m.Finished, m.Command = "", "", ""
	seen := make([]bool, len(m.Cells))
	var shards []MergedShard
	for _, s := range in {
		c := s.c
		if m.Started == "" || c.Started < m.Started {
			m.Started = c.Started
		}
		if c.Finished > m.Finished {
			m.Finished = c.Finished
		}
		m.WallNs = max(m.WallNs, c.WallNs) // the shards ran side by side
		m.StartupNs += c.StartupNs
		m.WorkloadNs += c.WorkloadNs
		m.ClusterStarts += c.ClusterStarts
		m.ClusterReuses += c.ClusterReuses
		m.Parallel = max(m.Parallel, c.Parallel)
		shards = append(shards, MergedShard{Shard: *s.sh, From: s.dir, Dir: ".", WallNs: c.WallNs})
		for _, cell := range c.Cells {
			i, ok := ordinal[cell.ID]
			if !ok || i < 0 || i >= len(m.Cells) {
				return nil, nil, refuse("merge: shard %s: cell %s has no place in the campaign", s.sh.Name(), cell.ID)
			}
			if cell.Status == reports.CellSkipped || cell.Status == reports.CellError {
				cell.Reason = fmt.Sprintf("on shard %s (%s): %s", s.sh.Name(), orHost(s.sh.Host), cell.Reason)
			}
			if !seen[i] {
				seen[i] = true
				m.Cells[i] = cell
				continue
			}
			// A cell whose runs two shards share.
			into := &m.Cells[i]
			into.Runs = append(into.Runs, cell.Runs...)
			if statusRank(cell.Status) > statusRank(into.Status) {
				into.Status, into.Reason = cell.Status, cell.Reason
			}
		}
	}
	for i := range m.Cells {
		if !seen[i] {
			return nil, nil, refuse("merge: no shard holds cell %d of the campaign", i+1)
		}
		cell := &m.Cells[i]
		sort.SliceStable(cell.Runs, func(a, b int) bool { return cell.Runs[a].Seed < cell.Runs[b].Seed })
		cell.Summarize()
	}
	return &m, shards, nil
}

// statusRank orders the statuses of a cell's parts in two shards: the
// merged cell takes the worst.
func statusRank(status string) int {
	switch status {
	case reports.CellError:
		return 4
	case reports.CellPending:
		return 3
	case reports.CellSkipped:
		return 2
	case reports.CellNA:
		return 1
	}
	return 0
}

func orHost(h string) string {
	if h == "" {
		return "unknown host"
	}
	return h
}

// CopyRuns copies the runs of every shard into the merged campaign's
// directory out, each shard's into out/shard-K, and makes the runs' directories relative to out.
func CopyRuns(out string, c *reports.Campaign, shards []MergedShard) error {
	prefix := map[string]string{} // run dir (in its shard) -> shard-K
	for i := range shards {
		s := &shards[i]
		s.Dir = fmt.Sprintf("shard-%d", s.K)
		dst := filepath.Join(out, s.Dir)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		src := filepath.Join(s.From, RunsDir)
		if _, err := os.Stat(src); err == nil {
			if err := copyTree(src, filepath.Join(dst, RunsDir)); err != nil {
				return fmt.Errorf("copy the runs of shard %s: %w", s.Name(), err)
			}
		}
		if err := WriteShard(dst, &s.Shard); err != nil {
			return err
		}
		for _, sc := range s.Cells {
			for _, seed := range sc.Seeds {
				prefix[fmt.Sprintf("%s\x00%d", sc.ID, seed)] = s.Dir
			}
		}
	}
	for i := range c.Cells {
		cell := &c.Cells[i]
		for k := range cell.Runs {
			r := &cell.Runs[k]
			p := prefix[fmt.Sprintf("%s\x00%d", cell.ID, r.Seed)]
			if r.Dir != "" {
				r.Dir = p + "/" + r.Dir
			}
			if r.Cluster != "" {
				r.Cluster = p + "/" + r.Cluster // not copied: servers' data
			}
		}
	}
	return nil
}

// copyTree copies directory src to dst: regular files, and symbolic
// links as links.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case !d.Type().IsRegular():
			return nil // sockets, fifos of a server
		}
		// Copied, not hard-linked: `locktest report` rewrites a run's
		// results.json in place, which would rewrite the shard's too.
		return copyFile(p, to)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// WriteMerged writes the merged campaign's reports (WriteReports) and its
// shards.json into out.
func WriteMerged(out string, c *reports.Campaign, shards []MergedShard) error {
	if err := WriteReports(out, c); err != nil {
		return err
	}
	type doc struct {
		Schema string        `json:"schema"`
		Merged string        `json:"merged"`
		Shards []MergedShard `json:"shards"`
	}
	b, err := json.MarshalIndent(doc{ShardSchema, time.Now().UTC().Format(time.RFC3339), shards}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode shards: %w", err)
	}
	return os.WriteFile(filepath.Join(out, MergedFile), append(b, '\n'), 0o644)
}
