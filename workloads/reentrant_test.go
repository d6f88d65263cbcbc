package workloads

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/protocol"
)

// A reentrant lock through the pipe: the client keeps one lease per nested
// acquire and gives the innermost one back first.
func TestReentrantWorker(t *testing.T) {
	cl := redis(t)
	hello := protocol.Hello{Type: protocol.TypeHello, Version: protocol.Version, Client: 1, Lock: "redisson",
		Servers: cl.Addrs(), Key: "re", TTLMillis: 5000, OpTimeoutMs: 1000, Seed: 1}
	p, err := startProcess([]string{os.Args[0], "worker"}, 1, filepath.Join(t.TempDir(), "c.stderr"), hello, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(time.Second) })
	do := func(op, owner string) protocol.Reply {
		t.Helper()
		rep, err := p.Do(op, owner, 5*time.Second)
		require.NoError(t, err)
		return rep
	}

	outer := do(protocol.OpAcquire, "")
	require.Equal(t, "ok", outer.Outcome, outer.Error)
	inner := do(protocol.OpAcquire, "")
	require.Equal(t, "ok", inner.Outcome, inner.Error)
	require.Equal(t, outer.Owner, inner.Owner, "a nested acquire re-enters the same hold")

	rep := do(protocol.OpRelease, inner.Owner)
	require.Equal(t, "ok", rep.Outcome, rep.Error)
	require.Empty(t, rep.Removed, "the inner release deletes nothing")
	rep = do(protocol.OpRelease, outer.Owner)
	require.Equal(t, "ok", rep.Outcome, rep.Error)
	require.Equal(t, outer.Owner, rep.Removed, "the outer release deletes the lock")
	rep = do(protocol.OpRelease, outer.Owner)
	require.Equal(t, "fail", rep.Outcome)
	require.Contains(t, rep.Error, "no lease")
}
