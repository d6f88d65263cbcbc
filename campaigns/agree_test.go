package campaigns_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/locks"
	mx "github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/workloads"
)

// machines are the machines the agreement test imagines: one that can do
// everything, and one that lacks each thing a cell may need.
func machines() map[string]mx.Machine {
	return map[string]mx.Machine{
		"all":     {},
		"no root": {NetErr: errors.New("network faults need root")},
		"no shim": {ClockErr: errors.New("the clock fault: the clock shim needs libfaketime")},
		"no mysql": {Missing: func(t string) []clusters.Requirement {
			return map[string][]clusters.Requirement{"mysql": {{Binary: "mariadbd", Package: "mariadb-server"}}}[t]
		}},
		"no image": {DockerErr: func(t string) error { return fmt.Errorf("no image for %s", t) }},
	}
}

// TestRunAndCampaignAgree runs every scheme x fault x topology x backend
// (and failover's --param failover=isolate) through `locktest run`'s
// validation and through the campaign's planning, on each imagined
// machine: a cell the campaign marks n/a or skipped is refused by run with
// the same reason, and one the campaign runs is accepted by run.
func TestRunAndCampaignAgree(t *testing.T) {
	counts := map[mx.Status]int{}
	for _, s := range locks.Schemes {
		for _, fault := range nemesis.Names() {
			params := []map[string]string{nil}
			if fault == "failover" {
				params = append(params, map[string]string{"failover": nemesis.FailoverIsolate})
			}
			for _, topo := range clusters.Topologies {
				for _, b := range clusters.Backends {
					for mname, m := range machines() {
						for _, p := range params {
							name := fmt.Sprintf("%s/%s/%s/%s/%s/%v", s.Name, fault, topo.Name, b.Name, mname, p)
							m.Cluster = string(b.Name)
							want := mx.Applicable(mx.Cell{Scheme: s, Topology: topo.Name, Faults: []string{fault}, Params: p}, m)
							counts[want.Status]++
							require.NotEqual(t, mx.Invalid, want.Status, name)

							o := harness.Options{
								Lock: s.Name, Nemesis: fault, Topology: topo.Name, Cluster: string(b.Name), Params: p, Machine: &m,
								TimeLimit: time.Second, Clients: 2, TTL: time.Second, OpTimeout: time.Second,
								Hold: workloads.Range{Max: time.Millisecond},
							}
							_, err := o.Validate()
							if want.Status == mx.Applies {
								require.NoError(t, err, name)
							} else {
								require.ErrorAs(t, err, new(harness.UsageError), name)
								require.Equal(t, want.Reason(), err.Error(), name)
							}

							if b.Name == clusters.Compose {
								continue // a campaign starts its servers: local or docker
							}
							cfg := &campaigns.Config{Cells: []campaigns.CellConfig{{
								Lock: s.Name, Topology: topo.Name, Expect: map[string]string{fault: ""},
								Settings: campaigns.Settings{Params: p},
							}}}
							camp, perr := campaigns.PlanConfig(cfg, campaigns.Environment(m))
							require.NoError(t, perr, name)
							require.Len(t, camp.Cells, 1, name)
							c := camp.Cells[0]
							switch want.Status {
							case mx.Applies:
								require.Equal(t, reports.CellPending, c.Status, name)
							case mx.NotApplicable:
								require.Equal(t, reports.CellNA, c.Status, name)
							case mx.Skipped:
								require.Equal(t, reports.CellSkipped, c.Status, name)
							}
							if err != nil {
								require.Equal(t, err.Error(), c.Reason, name)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("cells: %d apply, %d n/a, %d skipped", counts[mx.Applies], counts[mx.NotApplicable], counts[mx.Skipped])
	require.NotZero(t, counts[mx.Applies])
	require.NotZero(t, counts[mx.NotApplicable])
	require.NotZero(t, counts[mx.Skipped])
}

// The example: a client clock skew cannot matter to a scheme that
// never reads its own clock; run refuses it with the campaign's reason.
func TestClockClientRefused(t *testing.T) {
	o := harness.Options{Lock: "redis-lua", Nemesis: "clock-client", Cluster: "local", Machine: &mx.Machine{},
		TimeLimit: time.Second, Clients: 2, TTL: time.Second, OpTimeout: time.Second}
	_, err := o.Validate()
	require.ErrorAs(t, err, new(harness.UsageError))
	st, why := campaigns.Applicable(scheme(t, "redis-lua"), "", "clock-client", campaigns.Environment{})
	require.Equal(t, reports.CellNA, st)
	require.Equal(t, why, err.Error())
	require.Contains(t, why, "redis-lua never reads its own clock")
}
