package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/docker"
)

// The same cells on containers: the textbook lock is safe without faults
// and broken by a paused holder; Redlock under server faults runs.
func TestDockerCells(t *testing.T) {
	t.Parallel()
	needDocker(t)
	cases := []struct {
		name, lock, nemesis string
		verdict             checker.Verdict
		want                string
	}{
		{"lua without faults is safe", "redis-lua", "none", checker.Safe, ""},
		{"lua under pause has a double holder", "redis-lua", "pause", checker.Unsafe, string(checker.KindDoubleHolder)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := baseOptions(t, tc.lock, tc.nemesis, int64(300+i))
			o.Cluster, o.Images = "docker", dockerImages("docker")
			slot(t, o.TimeLimit)
			out, err := Run(context.Background(), o)
			require.NoError(t, err)
			found := kinds(out.Result, "")
			require.Equal(t, tc.verdict, out.Result.Verdict, "why: %s; anomalies: %v", out.Result.Why, found)
			if tc.want != "" {
				require.Positive(t, found[tc.want], "want a %s anomaly; got %v", tc.want, found)
			}
			require.FileExists(t, filepath.Join(out.Dir, "servers", "redis-1", "redis.log"))
			c, n, err := docker.Leftovers(context.Background(), runIDOf(t, out.Dir))
			require.NoError(t, err)
			require.Zero(t, c+n, "containers or networks left")
		})
	}
}

// Usage errors of the container backends (exit 2), found before anything
// starts.
func TestDockerUsageErrors(t *testing.T) {
	cases := []struct {
		name, lock, nemesis, cluster string
		images                       map[string]string
		want                         string
	}{
		{"clock on compose", "redis-lua", "clock", "compose", nil, "clock fault needs the clock shim"},
		{"clock on zk3", "zk", "clock", "docker", nil, "only the Redis and MySQL topologies have; zk3 has none"},
		{"image of an unknown kind", "redis-lua", "none", "docker", map[string]string{"mysql": "x"}, "unknown kind of server (known: redis, zookeeper, etcd, mariadb)"},
		{"image on the local backend", "redis-lua", "none", "local", map[string]string{"redis": "x"}, "--cluster docker only"},
		{"unknown backend", "redis-lua", "none", "k8s", nil, "unknown cluster backend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := baseOptions(t, tc.lock, tc.nemesis, 1)
			o.Cluster, o.Images = tc.cluster, tc.images
			_, err := o.Validate()
			var ue UsageError
			require.ErrorAs(t, err, &ue)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// runIDOf reads the run id from a run's config.json.
func runIDOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	var cfg struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal(b, &cfg))
	require.NotEmpty(t, cfg.RunID)
	return cfg.RunID
}
