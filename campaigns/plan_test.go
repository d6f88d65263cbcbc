package campaigns_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
	lmatrix "github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/reports"
)

func scheme(t *testing.T, name string) locks.Scheme {
	t.Helper()
	s, ok := locks.Lookup(name)
	require.True(t, ok, name)
	return s
}

func TestApplicable(t *testing.T) {
	all := campaigns.Environment{}
	noRoot := campaigns.Environment{NetErr: errors.New("partitions need root")}
	noMaria := campaigns.Environment{Missing: func(topology string) []clusters.Requirement {
		if topology == "mysql" {
			return []clusters.Requirement{{Binary: "mariadbd", Package: "mariadb-server"}}
		}
		return nil
	}}
	cases := []struct {
		name, lock, topology, column string
		env                          campaigns.Environment
		want                         string
	}{
		{"baseline", "redis-lua", "", "none", all, ""},
		{"pause anywhere", "mysql-get-lock", "", "pause", all, ""},
		{"failover needs a primary with a replica", "redis-lua", "", "failover", all, reports.CellNA},
		{"sentinel fails over", "redis-sentinel", "", "failover", all, ""},
		{"mysql-replicated fails over", "mysql-get-lock", "mysql-replicated", "failover", all, ""},
		{"no clock shim on zookeeper", "zk", "", "clock", all, reports.CellNA},
		{"clock on mysql", "mysql-unique-expiry", "", "clock", all, ""},
		{"clock on redis", "redis-lua", "", "clock", all, ""},
		{"client clock only matters to validity checks", "redis-lua", "", "clock-client", all, reports.CellNA},
		{"redlock checks validity", "redlock", "", "clock-client", all, ""},
		{"sentinel partitions", "redis-sentinel", "", "partition", all, ""},
		{"sentinel partitions without root are skipped", "redis-sentinel", "", "partition", noRoot, reports.CellSkipped},
		{"partition without root is skipped", "redis-lua", "", "partition", noRoot, reports.CellSkipped},
		{"missing server is skipped", "mysql-unique", "", "none", noMaria, reports.CellSkipped},
		{"combination: n/a if any part is", "redis-lua", "", "pause+failover", all, reports.CellNA},
		{"wrong topology", "redis-lua", "mysql", "none", all, reports.CellNA},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := campaigns.Applicable(scheme(t, tc.lock), tc.topology, tc.column, tc.env)
			require.Equal(t, tc.want, got, why)
			if got != "" {
				require.NotEmpty(t, why)
			}
		})
	}
}

// failover=isolate needs the network layer (skipped without root) and a
// topology that can cut its primary off it (n/a elsewhere).
func TestApplicableFailoverIsolate(t *testing.T) {
	isolate := map[string]string{"failover": "isolate"}
	noRoot := campaigns.Environment{NetErr: errors.New("partitions need root")}
	st, why := campaigns.ApplicableWith(scheme(t, "redis-sentinel"), "", "failover", isolate, campaigns.Environment{})
	require.Empty(t, st, why)
	st, why = campaigns.ApplicableWith(scheme(t, "redis-sentinel"), "", "failover", isolate, noRoot)
	require.Equal(t, reports.CellSkipped, st, why)
	st, why = campaigns.ApplicableWith(scheme(t, "redis-sentinel"), "", "failover", nil, noRoot)
	require.Empty(t, st, "the kill needs no root: %s", why)
	st, why = campaigns.ApplicableWith(scheme(t, "mysql-get-lock"), "mysql-replicated", "failover", isolate, campaigns.Environment{})
	require.Equal(t, reports.CellNA, st, why)
	st, why = campaigns.ApplicableWith(scheme(t, "redis-sentinel"), "", "failover", isolate, campaigns.Environment{Cluster: campaigns.ClusterDocker})
	require.Equal(t, reports.CellNA, st, why)
}

func TestParseConfig(t *testing.T) {
	good := `name: x
seed: 7
runs: 2
defaults: {time_limit: 3s, ttl: 500ms}
cells:
  - lock: redis-lua
    fence: true
    expect: {none: safe, pause: safe, "pause+kill": either}
  - lock: redis-lua
    time_limit: 9s
    expect: {kill: safe}
`
	c, err := campaigns.ParseConfig([]byte(good))
	require.NoError(t, err)
	camp, err := campaigns.PlanConfig(c, campaigns.Environment{})
	require.NoError(t, err)
	require.Equal(t, []string{"redis-lua +fence", "redis-lua"}, camp.Rows)
	require.Equal(t, []string{"none", "pause", "kill", "pause+kill"}, camp.Columns)
	require.Equal(t, int64(7), camp.Seed)
	require.Equal(t, 2, camp.Runs)
	cell := camp.Cell("redis-lua +fence/pause+kill")
	require.NotNil(t, cell)
	require.Equal(t, "pause,kill", cell.Nemesis)
	require.Equal(t, reports.ExpectEither, cell.Expect)
	require.Equal(t, int64(3e9), cell.TimeLimitNs)
	require.Equal(t, int64(5e8), cell.TTLNs)
	require.Equal(t, "50ms..250ms", cell.Hold) // built-in default
	require.Equal(t, int64(9e9), camp.Cell("redis-lua/kill").TimeLimitNs)
	// Without an expectation (--locks/--nemeses) a fault that does not
	// apply is an n/a cell, which never differs.
	lists, err := campaigns.PlanLists(campaigns.Lists{Locks: "redis-lua", Nemeses: "none,failover"}, campaigns.Environment{})
	require.NoError(t, err)
	fo := lists.Cell("redis-lua/failover")
	require.Equal(t, reports.CellNA, fo.Status)
	require.Equal(t, reports.NotRun, fo.Outcome)

	bad := []struct{ name, yaml string }{
		{"unknown key", "cells:\n  - lock: redis-lua\n    expekt: {none: safe}\n"},
		{"bad expectation", "cells:\n  - lock: redis-lua\n    expect: {none: fine}\n"},
		{"no expectation", "cells:\n  - lock: redis-lua\n"},
		{"no cells", "name: x\n"},
		{"bad duration", "defaults: {time_limit: soon}\ncells:\n  - lock: redis-lua\n    expect: {none: safe}\n"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := campaigns.ParseConfig([]byte(tc.yaml))
			require.Error(t, err)
		})
	}
	for _, tc := range []struct{ name, yaml string }{
		{"unknown lock", "cells:\n  - lock: nope\n    expect: {none: safe}\n"},
		{"unknown fault", "cells:\n  - lock: redis-lua\n    expect: {earthquake: safe}\n"},
		{"fence without tokens", "cells:\n  - lock: redlock\n    fence: true\n    expect: {none: safe}\n"},
		{"expectation on a cell that is n/a", "cells:\n  - lock: redis-lua\n    expect: {none: safe, failover: safe}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := campaigns.ParseConfig([]byte(tc.yaml))
			require.NoError(t, err)
			_, err = campaigns.PlanConfig(c, campaigns.Environment{})
			require.Error(t, err)
		})
	}
}

// TestNightlyConfig: the shipped config parses, covers every scheme in
// the registry, and expects something of every cell that can run; every
// cell's options pass the run's own validation (a --param its fault or
// scheme does not read, a point its scheme lacks, would make the cell an
// error every night).
func TestNightlyConfig(t *testing.T) {
	c, err := campaigns.LoadConfig("nightly.yaml")
	require.NoError(t, err)
	camp, err := campaigns.PlanConfig(c, campaigns.Environment{})
	require.NoError(t, err)
	covered := map[string]bool{}
	for i := range camp.Cells {
		cell := &camp.Cells[i]
		covered[cell.Lock] = true
		require.NotEqual(t, reports.CellNA, cell.Status, "%s is n/a: drop it from nightly.yaml (%s)", cell.ID, cell.Reason)
		require.NotEmpty(t, cell.Expect, cell.ID)
		o, err := campaigns.Options2Harness(cell, 1, t.TempDir())
		require.NoError(t, err, cell.ID)
		o.Machine = &lmatrix.Machine{} // whatever this machine lacks
		_, err = o.Validate()
		require.NoError(t, err, cell.ID)
	}
	for _, name := range locks.Names() {
		require.True(t, covered[name], "nightly.yaml does not cover scheme %s", name)
	}
}

func TestOptions2HarnessKeepsTheParamsARunReads(t *testing.T) {
	params := map[string]string{"pause": "0.1..0.3", "wait_timeout": "1", "wait_timout": "1"}
	cell := &reports.Cell{ID: "c", Lock: "redis-lua", Nemesis: "none", Hold: "100ms..200ms", Think: "10ms..20ms", Params: params}
	o, err := campaigns.Options2Harness(cell, 1, t.TempDir())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"wait_timout": "1"}, o.Params, "a typo stays for the run to refuse; settings of other faults and topologies go")
	cell = &reports.Cell{ID: "c", Lock: "mysql-for-update", Nemesis: "pause", Hold: "100ms..200ms", Think: "10ms..20ms", Params: params}
	o, err = campaigns.Options2Harness(cell, 1, t.TempDir())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"pause": "0.1..0.3", "wait_timeout": "1", "wait_timout": "1"}, o.Params)
}

// dockerSchemes finds a scheme whose topology the docker backend runs and
// one whose topology it does not (from docker.Supports, which grows).
func dockerSchemes(t *testing.T) (in, out *locks.Scheme) {
	t.Helper()
	for _, name := range locks.Names() {
		s := scheme(t, name)
		switch {
		case in == nil && docker.Supports(s.Topology):
			in = &s
		case out == nil && !docker.Supports(s.Topology):
			out = &s
		}
	}
	require.NotNil(t, in, "the docker backend runs no scheme's topology")
	return in, out
}

func TestApplicableOnDocker(t *testing.T) {
	in, out := dockerSchemes(t)
	env := campaigns.Environment{Cluster: campaigns.ClusterDocker,
		// The host's binaries and clock shim do not matter to containers.
		Missing:  func(string) []clusters.Requirement { return []clusters.Requirement{{Binary: "x", Package: "x"}} },
		ClockErr: errors.New("no libfaketime on the host")}
	st, why := campaigns.Applicable(*in, "", "none", env)
	require.Equal(t, "", st, why)
	st, why = campaigns.Applicable(*in, "", "pause", env)
	require.Equal(t, "", st, why)
	if out != nil {
		st, why = campaigns.Applicable(*out, "", "none", env)
		require.Equal(t, reports.CellNA, st)
		require.Contains(t, why, "--cluster docker runs the topologies "+strings.Join(docker.Names(), ", "))
		require.Contains(t, why, out.Topology+" runs only on --cluster local")
	}
	// No engine or no image: every cell it could run is skipped, saying why.
	env.DockerErr = func(topology string) error {
		require.Equal(t, in.Topology, topology)
		return errors.New("image redis:7 is not here")
	}
	st, why = campaigns.Applicable(*in, "", "none", env)
	require.Equal(t, reports.CellSkipped, st)
	require.Equal(t, "image redis:7 is not here", why)

	var e campaigns.Environment
	require.Error(t, e.ForCluster(context.Background(), "compose"))
	require.NoError(t, e.ForCluster(context.Background(), ""))
	require.Equal(t, campaigns.ClusterLocal, e.Cluster)
}

func TestPlanRecordsCluster(t *testing.T) {
	in, out := dockerSchemes(t)
	l := in.Name
	if out != nil {
		l += "," + out.Name
	}
	c, err := campaigns.PlanLists(campaigns.Lists{Locks: l, Nemeses: "none"}, campaigns.Environment{Cluster: campaigns.ClusterDocker})
	require.NoError(t, err)
	require.Equal(t, campaigns.ClusterDocker, c.Cluster)
	require.Equal(t, reports.CellPending, c.Cell(in.Name+"/none").Status)
	if out != nil {
		require.Equal(t, reports.CellNA, c.Cell(out.Name+"/none").Status)
	}
	c, err = campaigns.PlanLists(campaigns.Lists{Locks: in.Name, Nemeses: "none"}, campaigns.Environment{})
	require.NoError(t, err)
	require.Equal(t, campaigns.ClusterLocal, c.Cluster)
}

// TestFailoverRunsOnAReplicatedTopology: --locks all covers MySQL
// failover: a MySQL scheme's failover cell runs on mysql-replicated (a
// topology the scheme also runs on, with a replica) and says so, in the
// scheme's own row; a scheme without such a topology stays n/a; a cell
// that names its topology keeps it. A store's run on that topology lands in
// the same cell.
func TestFailoverRunsOnAReplicatedTopology(t *testing.T) {
	c, err := campaigns.PlanLists(campaigns.Lists{Locks: "all", Nemeses: "none,failover"}, campaigns.Environment{})
	require.NoError(t, err)
	mysql := 0
	for _, name := range locks.Names() {
		cell := c.Cell(name + "/failover")
		require.NotNil(t, cell, name)
		if !strings.HasPrefix(name, "mysql-") {
			continue
		}
		mysql++
		require.Equal(t, reports.CellPending, cell.Status, "%s: %s", cell.ID, cell.Reason)
		require.Equal(t, "mysql-replicated", cell.Topology)
		require.Contains(t, cell.Note, "runs on mysql-replicated: topology mysql has no primary with a replica")
		require.Empty(t, c.Cell(name+"/none").Topology, "only the fault that needs it moves")
		o, err := campaigns.Options2Harness(cell, 1, t.TempDir())
		require.NoError(t, err)
		require.Equal(t, "mysql-replicated", o.Topology)
		if _, err = o.Validate(); err != nil { // a missing server, not the topology
			require.NotContains(t, err.Error(), "failover", "the run validates on its topology")
		}
	}
	require.Positive(t, mysql)
	require.NotContains(t, c.Rows, "mysql-get-lock @mysql-replicated")
	require.Equal(t, reports.CellNA, c.Cell("redis-lua/failover").Status)
	// Sentinel's failover takes longer leases and holds than the defaults
	// to matter: the cell is sized for it.
	sentinel := c.Cell("redis-sentinel/failover")
	require.Equal(t, reports.CellPending, sentinel.Status)
	require.Empty(t, sentinel.Topology)
	require.Empty(t, sentinel.Note)
	require.Contains(t, sentinel.Sizing, "ttl 6s, hold 3s..4s, at least 12s")
	require.Equal(t, int64(6*time.Second), sentinel.TTLNs)
	require.Equal(t, "3s..4s", sentinel.Hold)
	require.GreaterOrEqual(t, sentinel.TimeLimitNs, int64(12*time.Second))

	page := &strings.Builder{}
	require.NoError(t, reports.WriteCampaignHTML(page, c))
	require.Contains(t, page.String(), `title="runs on mysql-replicated: topology mysql has no primary with a replica to fail over">on mysql-replicated</div>`)

	// A store: the failover run on mysql-replicated is the scheme's cell.
	dir := copyStore(t)
	src := filepath.Join(dir, "redis-lua", "none", "run1")
	dst := filepath.Join(dir, "mysql-get-lock", "failover", "run1")
	require.NoError(t, os.MkdirAll(dst, 0o755))
	hist, err := os.ReadFile(filepath.Join(src, "history.jsonl"))
	require.NoError(t, err)
	head, rest, _ := strings.Cut(string(hist), "\n")
	var ev history.Event
	require.NoError(t, json.Unmarshal([]byte(head), &ev))
	ev.Info.Lock, ev.Info.Nemeses, ev.Info.Topology = "mysql-get-lock", []string{"failover"}, "mysql-replicated"
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "history.jsonl"), []byte(string(b)+"\n"+rest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dst, "config.json"), []byte(`{"options": {"topology": "mysql-replicated"}}`), 0o644))
	st, err := campaigns.FromRuns(dir, recheck)
	require.NoError(t, err)
	cell := st.Cell("mysql-get-lock/failover")
	require.NotNil(t, cell, "rows: %v", st.Rows)
	require.Equal(t, "mysql-replicated", cell.Topology)
	require.Contains(t, st.Rows, "mysql-get-lock")
}
