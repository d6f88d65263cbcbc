package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
)

// A member that exited at start (a port taken between loopbackPorts and
// its bind) gets the ensemble started again on fresh ports, its failed
// logs kept; other errors, and namespaced ensembles, are not retried.
func TestPortRaceRetry(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	start := portRaceRetry(func(_ context.Context, s clusters.Spec) (clusters.Cluster, error) {
		calls++
		require.NoError(t, os.MkdirAll(filepath.Join(s.Dir, "servers", "zk-1"), 0o755))
		if calls == 1 {
			return nil, errors.New("zk-2 exited at start: ")
		}
		return nil, nil
	})
	_, err := start(context.Background(), clusters.Spec{Dir: dir})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.DirExists(t, filepath.Join(dir, "servers.failed-1", "zk-1"))

	calls = 0
	fail := portRaceRetry(func(context.Context, clusters.Spec) (clusters.Cluster, error) {
		calls++
		return nil, errors.New("zk-1 exited at start: ")
	})
	_, err = fail(context.Background(), clusters.Spec{Dir: t.TempDir()})
	require.ErrorContains(t, err, "exited at start")
	require.Equal(t, 3, calls, "bounded: three attempts")

	calls = 0
	_, err = portRaceRetry(func(context.Context, clusters.Spec) (clusters.Cluster, error) {
		calls++
		return nil, errors.New("no leader")
	})(context.Background(), clusters.Spec{Dir: t.TempDir()})
	require.Error(t, err)
	require.Equal(t, 1, calls)
}
