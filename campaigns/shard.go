package campaigns

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/reports"
)

// ShardFile is the partial index of a shard's directory (Shard).
const ShardFile = "shard.json"

// ShardSchema names the format of shard.json.
const ShardSchema = "locktest-shard/1"

// Shard is one share of a campaign (locktest campaign --shard K/N) and what
// its directory's shard.json says: which campaign it belongs to (Plan, the
// identity of the planned cells, and Version), which runs of which cells
// are its share, and, once it ran, which cells it ran and which it skipped
// on its machine, and why. N shards of one plan together run every run of
// the campaign exactly once, with the seeds the whole campaign uses.
type Shard struct {
	Schema  string `json:"schema"`  // ShardSchema
	K       int    `json:"k"`       // 1..N
	N       int    `json:"n"`       // shards of the campaign
	Plan    string `json:"plan"`    // PlanHash of the whole campaign
	Version string `json:"version"` // locktest version that runs the shard
	// PlanCells and PlanRuns count the cells and runs (cell x seed) of the
	// whole campaign, so that a merge can tell whether its shards cover it.
	PlanCells int `json:"plan_cells"`
	PlanRuns  int `json:"plan_runs"`
	// Cells are this shard's share, in the campaign's order: a cell and
	// the seeds of it this shard runs (every run of a cell is in one
	// shard, unless its pool group was split to balance the shards).
	Cells []ShardCell `json:"cells"`
	Host  string      `json:"host,omitempty"`
	// Finished is when the shard's campaign ended ("" while it runs or
	// when it was interrupted).
	Finished string `json:"finished,omitempty"`
	// Ran lists the cells of the share whose runs all ran here (done or
	// error), Skipped those this machine could not run, with why, and NA
	// those whose fault does not apply.
	Ran     []string      `json:"ran"`
	Skipped []SkippedCell `json:"skipped"`
	NA      []string      `json:"na"`
}

// ShardCell is a cell of a shard's share: its place in the campaign
// (Ordinal, from 0), its id and the seeds of its runs in this shard.
type ShardCell struct {
	Ordinal int     `json:"ordinal"`
	ID      string  `json:"id"`
	Seeds   []int64 `json:"seeds"`
}

// SkippedCell is a cell a shard could not run on its machine.
type SkippedCell struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Name is "K/N".
func (s *Shard) Name() string { return fmt.Sprintf("%d/%d", s.K, s.N) }

// ParseShard reads --shard K/N: 1 <= K <= N <= 1000.
func ParseShard(v string) (k, n int, err error) {
	a, b, ok := strings.Cut(v, "/")
	if ok {
		k, err = strconv.Atoi(strings.TrimSpace(a))
		if err == nil {
			n, err = strconv.Atoi(strings.TrimSpace(b))
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("--shard %q: want K/N, e.g. 2/4 (shard K of N, from 1)", v)
	}
	if n < 1 || n > 1000 {
		return 0, 0, fmt.Errorf("--shard %s: N must be 1..1000", v)
	}
	if k < 1 || k > n {
		return 0, 0, fmt.Errorf("--shard %s: K must be 1..%d", v, n)
	}
	return k, n, nil
}

// planCell is what of a cell the plan's identity covers: everything the
// config and the command line decided, nothing this machine did (status,
// reasons, runs).
type planCell struct {
	ID, Row, Column, Lock, Nemesis, Topology, Note, Sizing string
	Fence, Wait                                            bool
	Params                                                 map[string]string
	TimeLimitNs, TTLNs, OpTimeoutNs, WaitTimeoutNs         int64
	Clients                                                int
	Hold, Think, Expect                                    string
}

// PlanHash is the identity of a planned campaign: its name, seeds, runs,
// backend, stop-early setting, matrix and every cell's settings and
// expectation, and nothing that depends on the machine that plans it. Two
// shards belong to one campaign when their plans hash alike.
func PlanHash(c *reports.Campaign) string {
	p := struct {
		Name, Cluster string
		Seed          int64
		Runs          int
		StopEarly     bool
		Rows, Columns []string
		Cells         []planCell
	}{Name: c.Name, Cluster: c.Cluster, Seed: c.Seed, Runs: c.Runs, StopEarly: c.StopsEarly(), Rows: c.Rows, Columns: c.Columns}
	if p.Cluster == "" {
		p.Cluster = ClusterLocal
	}
	for _, cl := range c.Cells {
		p.Cells = append(p.Cells, planCell{
			ID: cl.ID, Row: cl.Row, Column: cl.Column, Lock: cl.Lock, Nemesis: cl.Nemesis, Topology: cl.Topology,
			Note: cl.Note, Sizing: cl.Sizing, Fence: cl.Fence, Wait: cl.Wait, Params: cl.Params,
			TimeLimitNs: cl.TimeLimitNs, TTLNs: cl.TTLNs, OpTimeoutNs: cl.OpTimeoutNs, WaitTimeoutNs: cl.WaitTimeoutNs,
			Clients: cl.Clients, Hold: cl.Hold, Think: cl.Think, Expect: cl.Expect,
		})
	}
	b, _ := json.Marshal(p) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// startupWeight is what a cluster start adds to a share's estimated time.
const startupWeight = 3 * time.Second

// shardJob is one run of the plan: cell (its index) and seed.
type shardJob struct {
	cell int
	seed int64
}

// SplitShard returns shard k of n of the planned campaign c: a campaign of
// the cells (and seeds) that are its share, with c's matrix (rows and
// columns), and the shard's index. The share depends on the plan alone,
// never on the machine: runs whose servers can be shared (one pool key)
// stay together so that a shard starts few clusters, a group bigger than
// a fair share is cut into consecutive pieces, and the groups go, biggest
// first, to the shard with the least estimated time so far.
func SplitShard(c *reports.Campaign, k, n int) (*reports.Campaign, *Shard, error) {
	if n < 1 || k < 1 || k > n {
		return nil, nil, fmt.Errorf("shard %d/%d: want 1 <= K <= N", k, n)
	}
	owner := assignShards(c, n)
	sh := &Shard{Schema: ShardSchema, K: k, N: n, Plan: PlanHash(c), Version: harness.Version, PlanCells: len(c.Cells)}
	part := *c
	part.Cells = nil
	seeds := map[int][]int64{}
	for i := range c.Cells {
		for s := 0; s < c.Runs; s++ {
			sh.PlanRuns++
			if owner[shardJob{i, c.Seed + int64(s)}] == k-1 {
				seeds[i] = append(seeds[i], c.Seed+int64(s))
			}
		}
		if len(seeds[i]) > 0 {
			sh.Cells = append(sh.Cells, ShardCell{Ordinal: i, ID: c.Cells[i].ID, Seeds: seeds[i]})
			cell := c.Cells[i]
			cell.Runs = nil
			part.Cells = append(part.Cells, cell)
		}
	}
	if sh.Cells == nil {
		sh.Cells = []ShardCell{}
	}
	sh.Host, _ = os.Hostname()
	return &part, sh, nil
}

// assignShards maps every run of c to a shard, 0..n-1.
func assignShards(c *reports.Campaign, n int) map[shardJob]int {
	type group struct {
		first  int // order of its first run in the plan
		jobs   []shardJob
		weight time.Duration
		shared bool // its runs can share one cluster
	}
	var groups []*group
	byKey := map[string]*group{}
	var total time.Duration
	order := 0
	for i := range c.Cells {
		cell := &c.Cells[i]
		// What applies is fixed by the plan; what this machine can run
		// (skipped) is not, so it does not count here.
		weight := time.Duration(cell.TimeLimitNs)
		if s, ok := locks.Lookup(cell.Lock); ok {
			if st, _ := ApplicableWith(s, cell.Topology, cell.Column, cell.Params, Environment{Cluster: c.Cluster}); st == reports.CellNA {
				weight = 0
			}
		}
		for s := 0; s < c.Runs; s++ {
			j := shardJob{i, c.Seed + int64(s)}
			key := ""
			if o, err := Options2Harness(cell, j.seed, ""); err == nil && weight > 0 {
				key = harness.PoolKey(o)
			}
			g := byKey[key]
			if key == "" || g == nil {
				g = &group{first: order, shared: key != ""}
				groups = append(groups, g)
				if key != "" {
					byKey[key] = g
				}
			}
			order++
			g.jobs = append(g.jobs, j)
			g.weight += weight
			if !g.shared && weight > 0 {
				g.weight += startupWeight
			}
			total += weight
		}
	}
	// Cut groups bigger than a fair share into consecutive pieces, each
	// starting its own cluster.
	fair := total / time.Duration(n)
	var pieces []*group
	for _, g := range groups {
		if !g.shared || g.weight <= fair || fair <= 0 {
			if g.shared && g.weight > 0 {
				g.weight += startupWeight
			}
			pieces = append(pieces, g)
			continue
		}
		var cur *group
		for _, j := range g.jobs {
			w := time.Duration(c.Cells[j.cell].TimeLimitNs)
			if cur == nil || (cur.weight+w > fair && cur.weight > startupWeight) {
				cur = &group{first: g.first, shared: true, weight: startupWeight}
				pieces = append(pieces, cur)
			}
			cur.jobs = append(cur.jobs, j)
			cur.weight += w
		}
	}
	// Biggest first (then plan order) to the least loaded shard (then the
	// lowest).
	sort.SliceStable(pieces, func(a, b int) bool {
		if pieces[a].weight != pieces[b].weight {
			return pieces[a].weight > pieces[b].weight
		}
		return pieces[a].first < pieces[b].first
	})
	load := make([]time.Duration, n)
	owner := map[shardJob]int{}
	for _, p := range pieces {
		best := 0
		for s := 1; s < n; s++ {
			if load[s] < load[best] {
				best = s
			}
		}
		load[best] += p.weight
		for _, j := range p.jobs {
			owner[j] = best
		}
	}
	return owner
}

// seeds returns the seeds of cell id that this shard runs, nil when the
// cell is not in its share.
func (s *Shard) seeds(id string) []int64 {
	for _, c := range s.Cells {
		if c.ID == id {
			return c.Seeds
		}
	}
	return nil
}

// record notes, at the end of the shard's campaign c, which cells it ran,
// skipped or found n/a.
func (s *Shard) record(c *reports.Campaign) {
	s.Ran, s.Skipped, s.NA = []string{}, []SkippedCell{}, []string{}
	s.Finished = c.Finished
	for _, cell := range c.Cells {
		switch cell.Status {
		case reports.CellDone, reports.CellError:
			s.Ran = append(s.Ran, cell.ID)
		case reports.CellSkipped:
			s.Skipped = append(s.Skipped, SkippedCell{cell.ID, cell.Reason})
		case reports.CellNA:
			s.NA = append(s.NA, cell.ID)
		}
	}
}

// WriteShard writes dir/shard.json.
func WriteShard(dir string, s *Shard) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode shard: %w", err)
	}
	tmp := filepath.Join(dir, "."+ShardFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write shard: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ShardFile)); err != nil {
		return fmt.Errorf("write shard: %w", err)
	}
	return nil
}

// ErrNotShard says that a directory has no shard.json.
var ErrNotShard = errors.New("not a shard directory")

// LoadShard reads dir/shard.json; ErrNotShard when there is none.
func LoadShard(dir string) (*Shard, error) {
	b, err := os.ReadFile(filepath.Join(dir, ShardFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (no %s)", dir, ErrNotShard, ShardFile)
	}
	if err != nil {
		return nil, err
	}
	var s Shard
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ShardFile), err)
	}
	if s.Schema != ShardSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", filepath.Join(dir, ShardFile), s.Schema, ShardSchema)
	}
	if s.N < 1 || s.K < 1 || s.K > s.N {
		return nil, fmt.Errorf("%s: shard %d/%d is not K/N with 1 <= K <= N", filepath.Join(dir, ShardFile), s.K, s.N)
	}
	return &s, nil
}
