package lostgen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

var update = flag.Bool("update", false, "rewrite testdata/*.jsonl and *.truth.json from the generator")

// recorded are the small histories of issue 17's shapes kept in testdata,
// for other packages' tests to read (each NAME.jsonl with NAME.truth.json).
var recorded = []struct {
	name string
	cfg  Config
	want string // Truth.Linearizable
}{
	// 50 clients, 5% of answers lost behind a 1 s op timeout (20 leases):
	// 10-50 indeterminate operations open at every instant.
	{"long-open-lost", Config{Ops: 1000, Clients: 50, Lost: 0.05, Seed: 11}, Yes},
	// the same shape with double grants the history proves.
	{"many-clients-certain", Config{Ops: 1000, Clients: 50, Lost: 0.02, Double: 3, Mix: MixCertain, Seed: 12}, No},
	// double grants over a lost acquire whose grant can move: linearizable.
	{"explainable-lost-holder", Config{Ops: 1000, Clients: 5, Lost: 0.05, Double: 2, Mix: MixExplainable, Seed: 13}, Yes},
	// a lock without expiry: a lost acquire that took effect holds it for
	// good, and nobody knows (a deadlock explained by a lost answer).
	{"no-expiry-lost-deadlock", Config{Ops: 500, Clients: 10, Lost: 0.05, NoExpiry: true, DeadlockMs: 200, Seed: 15}, Yes},
	// issue 17's liveness case: a client's acquires keep taking effect a
	// lease apart while it hears no answer; the lock is unavailable to
	// everybody else for 2 s, every refusal explained by a lost grant.
	{"deaf-client-unavailable", Config{Ops: 1000, Clients: 5, Lost: 0.01, DeafClient: 1, DeafFrom: time.Second, DeafFor: 2 * time.Second, DeadlockMs: 1000, Seed: 16}, Yes},
}

func TestRecorded(t *testing.T) {
	for _, rc := range recorded {
		t.Run(rc.name, func(t *testing.T) {
			path := filepath.Join("testdata", rc.name+".jsonl")
			var buf bytes.Buffer
			tr, err := Write(&buf, rc.cfg)
			require.NoError(t, err)
			require.Equal(t, rc.want, tr.Linearizable, tr.Why)
			tb, err := json.MarshalIndent(tr, "", "  ")
			require.NoError(t, err)
			tb = append(tb, '\n')
			if *update {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
				require.NoError(t, os.WriteFile(filepath.Join("testdata", rc.name+".truth.json"), tb, 0o644))
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(buf.Bytes(), b), "%s is stale: go test ./internal/lostgen -run TestRecorded -update", path)
			stored, err := os.ReadFile(filepath.Join("testdata", rc.name+".truth.json"))
			require.NoError(t, err)
			require.Equal(t, string(tb), string(stored))

			h, err := history.Load(path)
			require.NoError(t, err)
			for _, in := range tr.Injections {
				if in.Label == Certain {
					require.NoError(t, certainInHistory(h, in, rc.cfg))
				}
			}
			r := agree(t, h, tr, rc.cfg)
			if rc.cfg.DeafClient > 0 {
				deafAgrees(t, r, tr)
			}
			if rc.cfg.NoExpiry && tr.FinalHolder != 0 {
				for _, p := range r.Properties {
					if p.Name == "deadlock" {
						require.Equal(t, checker.Fail, p.Status, "the lock is held for good by op %d", tr.FinalHolder)
					}
				}
			}
		})
	}
}
