package campaigns

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
)

// RowName names a lock variant, a row of the matrix: the scheme, then what
// differs from its default run ("redis-lua +fence", "mysql-get-lock
// @mysql-replicated", "redis-lua {pause=0.1..0.3}").
func RowName(lock, topology string, fence, wait bool, params map[string]string) string {
	name := lock
	if fence {
		name += " +fence"
	}
	if wait {
		name += " +wait"
	}
	if s, ok := locks.Lookup(lock); ok && topology != "" && topology != s.Topology {
		name += " @" + topology
	}
	if len(params) > 0 {
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+params[k])
		}
		name += " {" + strings.Join(kv, ",") + "}"
	}
	return name
}

// ColumnName names a fault combination, a column: "pause", "pause+kill".
func ColumnName(nemeses string) string {
	parts := strings.FieldsFunc(nemeses, func(r rune) bool { return r == ',' || r == '+' })
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return strings.Join(parts, "+")
}

// Environment is what this machine can do and the backend every run
// starts its servers on ("" or "local", or "docker"): a matrix.Machine.
// Probe fills it in, ForCluster sets the backend. Tests set it by hand.
type Environment matrix.Machine

// Cluster backends a campaign runs on.
const (
	ClusterLocal  = string(clusters.Local)
	ClusterDocker = string(clusters.Docker)
)

// Probe looks at this machine: root and netns for partitions, libfaketime
// for clock jumps, server binaries for each topology.
func Probe() Environment { return Environment(matrix.Probe()) }

// ForCluster sets the backend and, for docker, looks whether it can run
// here (it never pulls an image). A campaign starts the servers of its
// runs: it runs on local or docker, not on a compose stack.
func (e *Environment) ForCluster(ctx context.Context, cluster string) error {
	switch cluster {
	case "", ClusterLocal:
		e.Cluster = ClusterLocal
	case ClusterDocker:
		e.Cluster = ClusterDocker
		e.DockerErr = matrix.DockerProbe(ctx)
	default:
		return fmt.Errorf("unknown cluster backend %q (a campaign runs on: %s, %s)", cluster, ClusterLocal, ClusterDocker)
	}
	return nil
}

// Applicable says whether the faults of column can hit scheme s on
// topology, by matrix.Applicable (the rule `locktest run` follows too). It
// returns reports.CellNA with the reason when a fault does not apply,
// reports.CellSkipped when it applies but this machine cannot inject it
// (or lacks the servers), and "" when the cell can run.
func Applicable(s locks.Scheme, topology, column string, env Environment) (status, reason string) {
	return ApplicableWith(s, topology, column, nil, env)
}

// ApplicableWith is Applicable for a cell with --param settings params,
// some of which change what a fault needs: failover=isolate needs the
// network layer and a topology that can cut its primary off it.
func ApplicableWith(s locks.Scheme, topology, column string, params map[string]string, env Environment) (status, reason string) {
	if env.Cluster != ClusterDocker {
		env.Cluster = ClusterLocal // a campaign runs on these two
	}
	a := matrix.Applicable(matrix.Cell{Scheme: s, Topology: topology, Faults: strings.Split(ColumnName(column), "+"), Params: params}, matrix.Machine(env))
	return CellStatus(a), a.Reason()
}

// CellStatus is the status of a campaign's cell with answer a.
func CellStatus(a matrix.Answer) string {
	switch a.Status {
	case matrix.Applies:
		return ""
	case matrix.NotApplicable:
		return reports.CellNA
	case matrix.Skipped:
		return reports.CellSkipped
	}
	return reports.CellError
}

// AutoTopology picks, for a cell of scheme s on its own topology under
// the faults of column, another topology the scheme runs on
// (locks.Scheme.Topologies) when a fault needs what its own topology lacks
// and the other has it: failover -> mysql-replicated for the MySQL
// schemes. It returns "" when the scheme's own topology takes the faults,
// or when no other does; why says what the own topology lacks.
func AutoTopology(s locks.Scheme, column string) (topology, why string) {
	st, reason := Applicable(s, "", column, Environment{})
	if st != reports.CellNA {
		return "", ""
	}
	for _, t := range s.Topologies {
		if st, _ := Applicable(s, t, column, Environment{}); st == "" {
			return t, reason
		}
	}
	return "", ""
}

// Lists are the --locks/--nemeses form of a campaign.
type Lists struct {
	Locks    string // comma separated, or "all"
	Nemeses  string // comma separated ("a+b" combines), or "all"
	Settings Settings
	Fence    bool
	Wait     bool
}

// PlanLists builds the cells of --locks x --nemeses, with no expectations.
func PlanLists(l Lists, env Environment) (*reports.Campaign, error) {
	lockNames := splitList(l.Locks)
	if l.Locks == "all" {
		lockNames = locks.Names()
	}
	nemNames := splitList(l.Nemeses)
	if l.Nemeses == "all" {
		nemNames = nemesis.Names()
	}
	if len(lockNames) == 0 || len(nemNames) == 0 {
		return nil, fmt.Errorf("--locks and --nemeses must each name at least one (or all)")
	}
	cfg := &Config{Defaults: l.Settings}
	for _, lk := range lockNames {
		if s, ok := locks.Lookup(lk); ok && l.Fence && !s.Fencing && l.Locks == "all" {
			continue // --fence --locks all: the schemes that have tokens
		}
		cc := CellConfig{Lock: lk, Fence: l.Fence, Wait: l.Wait, Expect: map[string]string{}}
		for _, n := range nemNames {
			cc.Expect[n] = ""
		}
		cfg.Cells = append(cfg.Cells, cc)
	}
	return plan(cfg, nemNames, env)
}

// PlanConfig builds the cells of a config file.
func PlanConfig(c *Config, env Environment) (*reports.Campaign, error) {
	return plan(c, nil, env)
}

// plan turns a config into the campaign's cells; columns orders the
// columns (nil: in the order of nemesis.All, combinations last).
func plan(c *Config, columns []string, env Environment) (*reports.Campaign, error) {
	stop := c.StopEarly == nil || *c.StopEarly
	camp := &reports.Campaign{Schema: reports.CampaignSchema, Name: c.Name, Runs: c.Runs, Seed: 1, Cluster: env.Cluster, StopEarly: &stop}
	if camp.Cluster == "" {
		camp.Cluster = ClusterLocal
	}
	if c.Seed != nil {
		camp.Seed = *c.Seed
	}
	if camp.Runs == 0 {
		camp.Runs = 1
	}
	defaults := c.Defaults.Merge(BuiltinDefaults)
	seenCol := map[string]bool{}
	seenRow := map[string]bool{}
	for i, cc := range c.Cells {
		s, ok := locks.Lookup(cc.Lock)
		if !ok {
			return nil, fmt.Errorf("cell %d: unknown lock %q (known: %s)", i+1, cc.Lock, strings.Join(locks.Names(), ", "))
		}
		if cc.Fence && !s.Fencing {
			return nil, fmt.Errorf("cell %d: lock %s cannot hand out fencing tokens", i+1, s.Name)
		}
		set := cc.Settings.Merge(defaults)
		if err := checkRange(set.Hold); err != nil {
			return nil, fmt.Errorf("cell %d (%s): hold: %w", i+1, cc.Lock, err)
		}
		if err := checkRange(set.Think); err != nil {
			return nil, fmt.Errorf("cell %d (%s): think: %w", i+1, cc.Lock, err)
		}
		row := RowName(cc.Lock, cc.Topology, cc.Fence, cc.Wait, cc.Params)
		if !seenRow[row] {
			seenRow[row] = true
			camp.Rows = append(camp.Rows, row)
		}
		nems := make([]string, 0, len(cc.Expect))
		for n := range cc.Expect {
			nems = append(nems, n)
		}
		sort.Slice(nems, func(a, b int) bool {
			return columnRank(nems[a]) < columnRank(nems[b]) || (columnRank(nems[a]) == columnRank(nems[b]) && nems[a] < nems[b])
		})
		for _, n := range nems {
			col := ColumnName(n)
			if _, _, err := nemesis.Parse(strings.ReplaceAll(col, "+", ",")); err != nil {
				return nil, fmt.Errorf("cell %d (%s): %w", i+1, cc.Lock, err)
			}
			seenCol[col] = true
			cell := reports.Cell{
				ID: row + "/" + col, Row: row, Column: col, Lock: cc.Lock, Nemesis: strings.ReplaceAll(col, "+", ","),
				Topology: cc.Topology, Fence: cc.Fence, Wait: cc.Wait, Params: set.Params,
				TimeLimitNs: int64(set.TimeLimit), Clients: set.Clients, TTLNs: int64(set.TTL),
				Hold: set.Hold, Think: set.Think, OpTimeoutNs: int64(set.OpTimeout), WaitTimeoutNs: int64(set.WaitTimeout),
				Expect: cc.Expect[n], Status: reports.CellPending, FirstViolationNs: -1,
			}
			if camp.Cell(cell.ID) != nil {
				return nil, fmt.Errorf("cell %s given twice", cell.ID)
			}
			if cc.Topology == "" {
				// A fault the scheme's own topology cannot take, on
				// another topology it runs on that can.
				if t, why := AutoTopology(s, col); t != "" {
					cell.Topology = t
					cell.Note = fmt.Sprintf("runs on %s: %s", t, why)
				}
			}
			if cc.TTL == 0 && cc.Hold == "" {
				// A fault that needs longer leases and holds than the
				// campaign's defaults to matter gets them, unless the
				// cell chose its own.
				topology := cell.Topology
				if topology == "" {
					topology = s.Topology
				}
				if sz, ok := harness.FaultSizing(clusters.BackendName(camp.Cluster), topology, strings.Split(cell.Nemesis, ","), s.Traits); ok {
					cell.Hold = fmt.Sprintf("%s..%s", sz.Hold.Min, sz.Hold.Max)
					cell.TimeLimitNs = max(cell.TimeLimitNs, int64(sz.TimeLimit))
					cell.Sizing = fmt.Sprintf("hold %s, at least %s (%s)", cell.Hold, sz.TimeLimit, sz.Why)
					if sz.TTL > 0 {
						cell.TTLNs = int64(sz.TTL)
						cell.Sizing = fmt.Sprintf("ttl %s, %s", sz.TTL, cell.Sizing)
					}
				}
			}
			if cell.Expect != "" {
				// An expectation on a cell that can never run is a
				// mistake in the config, not a cell to skip quietly.
				if st, why := ApplicableWith(s, cell.Topology, col, set.Params, Environment{}); st == reports.CellNA {
					return nil, fmt.Errorf("cell %s (cell %d of the config) expects %s, but %s does not apply: %s", cell.ID, i+1, cell.Expect, col, why)
				}
			}
			if st, why := ApplicableWith(s, cell.Topology, col, set.Params, env); st != "" {
				cell.Status, cell.Reason = st, why
			}
			cell.Summarize()
			camp.Cells = append(camp.Cells, cell)
		}
	}
	if columns == nil {
		for col := range seenCol {
			columns = append(columns, col)
		}
		sort.Slice(columns, func(a, b int) bool {
			ra, rb := columnRank(columns[a]), columnRank(columns[b])
			if ra != rb {
				return ra < rb
			}
			return columns[a] < columns[b]
		})
	} else {
		for i := range columns {
			columns[i] = ColumnName(columns[i])
		}
	}
	camp.Columns = columns
	return camp, nil
}

// columnRank orders faults as nemesis.All does; combinations come after
// single faults.
func columnRank(col string) int {
	col = ColumnName(col)
	for i, n := range nemesis.Names() {
		if n == col {
			return i
		}
	}
	return 1000 + strings.Count(col, "+")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseRange reads "100ms..500ms" or a single duration.
func ParseRange(s string) (lo, hi time.Duration, err error) {
	a, b, found := strings.Cut(s, "..")
	if !found {
		b = a
	}
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, fmt.Errorf("bad duration %q (want e.g. 100ms..500ms)", a)
	}
	if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
		return 0, 0, fmt.Errorf("bad duration %q (want e.g. 100ms..500ms)", b)
	}
	if lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("%q: want 0 <= MIN <= MAX", s)
	}
	return lo, hi, nil
}

func checkRange(s string) error {
	_, _, err := ParseRange(s)
	return err
}
