package workloads

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/protocol"
)

// A client asked to stop at a fault point announces it, freezes itself
// there (the controller's hang detection waits, as for a pause it sent),
// answers once resumed; asked to crash there, it dies and counts as killed
// on purpose.
func TestSelfStopAtPoint(t *testing.T) {
	cl := redis(t)
	hello := protocol.Hello{Type: protocol.TypeHello, Version: protocol.Version, Client: 1, Lock: "redis-setnx-expire",
		Servers: []string{cl.Addrs()[0]}, Key: "gaps", TTLMillis: 10000, OpTimeoutMs: 1000, Seed: 1}
	p, err := startProcess([]string{os.Args[0], "worker"}, 1, filepath.Join(t.TempDir(), "c.stderr"), hello, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(time.Second) })
	scheme, _ := locks.Lookup("redis-setnx-expire")
	require.Equal(t, scheme.Points, p.Points(), "the ready message carries the scheme's points")
	require.Equal(t, locks.PointAfterSetNX, p.Points()[0].Name)

	type stop struct {
		point string
		crash bool
	}
	stops := make(chan stop, 2)
	p.onStop = func(_ *Process, point string, crash bool) { stops <- stop{point, crash} }

	got := make(chan protocol.Reply, 1)
	go func() {
		// A reply limit far below the stop: a stop the client raised
		// itself is a fault, not a hang.
		r, err := p.DoRequest(protocol.Request{Op: protocol.OpAcquire, StopAt: locks.PointAfterSetNX, Stop: protocol.StopPause}, 100*time.Millisecond)
		if err != nil {
			r.Error = err.Error()
		}
		got <- r
	}()
	select {
	case s := <-stops:
		require.Equal(t, stop{locks.PointAfterSetNX, false}, s)
	case <-time.After(5 * time.Second):
		t.Fatal("no notice of the stop")
	}
	require.NoError(t, p.WaitStopped(time.Second))
	select {
	case r := <-got:
		t.Fatalf("a client stopped at its point answered: %+v", r)
	case <-time.After(400 * time.Millisecond):
	}
	require.NoError(t, p.Resume())
	var owner string
	select {
	case r := <-got:
		require.Equal(t, "ok", r.Outcome, r.Error)
		owner = r.Owner
	case <-time.After(5 * time.Second):
		t.Fatal("the resumed client did not answer")
	}
	rep, err := p.Do(protocol.OpRelease, owner, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok", rep.Outcome)

	// A point of another operation, or none it knows: no stop.
	rep, err = p.DoRequest(protocol.Request{Op: protocol.OpAcquire, StopAt: "after-nothing"}, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok", rep.Outcome)
	rep, err = p.Do(protocol.OpRelease, rep.Owner, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok", rep.Outcome)

	_, err = p.DoRequest(protocol.Request{Op: protocol.OpAcquire, StopAt: locks.PointAfterSetNX, Stop: protocol.StopCrash}, 5*time.Second)
	require.ErrorIs(t, err, ErrExited)
	require.True(t, p.Killed(), "a crash the client raised at a point is a crash on purpose")
	require.Equal(t, stop{locks.PointAfterSetNX, true}, <-stops)
}
