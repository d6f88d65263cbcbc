package nemesis

import (
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// fakeNode is a server that only counts what is done to it.
type fakeNode struct {
	name   string
	mu     sync.Mutex
	paused []time.Time
	frozen bool
}

func (n *fakeNode) Name() string { return n.name }
func (n *fakeNode) Addr() string { return n.name + ":6379" }
func (n *fakeNode) PID() int     { return 1 }
func (n *fakeNode) Pause() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paused = append(n.paused, time.Now())
	n.frozen = true
	return nil
}
func (n *fakeNode) Resume() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.frozen = false
	return nil
}
func (n *fakeNode) Kill() error                   { return nil }
func (n *fakeNode) Restart(context.Context) error { return nil }
func (n *fakeNode) PauseHow() (string, string)    { return "docker pause", "docker unpause" }

type fakeCluster struct{ nodes []clusters.Node }

func (c *fakeCluster) Topology() string               { return "fake" }
func (c *fakeCluster) Nodes() []clusters.Node         { return c.nodes }
func (c *fakeCluster) Addrs() []string                { return nil }
func (c *fakeCluster) Versions() []string             { return nil }
func (c *fakeCluster) Stop(ctx context.Context) error { return nil }

func fakeEnv(names ...string) (*Env, []*fakeNode) {
	var fs []*fakeNode
	var ns []clusters.Node
	for _, name := range names {
		f := &fakeNode{name: name}
		fs = append(fs, f)
		ns = append(ns, f)
	}
	return &Env{Recorder: history.NewRecorder(io.Discard, history.Monotonic(), true), Cluster: &fakeCluster{ns}, TTL: 200 * time.Millisecond, Seed: 7}, fs
}

func notes(env *Env) []string {
	var out []string
	for _, e := range env.Recorder.Events() {
		if e.Type == history.Note {
			out = append(out, e.Detail)
		}
	}
	return out
}

func TestAwaitNode(t *testing.T) {
	env, _ := fakeEnv("redis-1")
	release, _, ok := env.claimNode("redis-1", "kill")
	require.True(t, ok)
	_, holder, ok := env.claimNode("redis-1", "pause-server")
	require.False(t, ok)
	require.Equal(t, "kill", holder)

	// Released within the limit: the waiter gets it, after the release.
	var released time.Time
	go func() {
		time.Sleep(150 * time.Millisecond)
		released = time.Now()
		release()
		release() // twice: no harm
	}()
	got, waitedFor, ok := env.awaitNode(context.Background(), "redis-1", "pause-server", 5*time.Second)
	require.True(t, ok)
	require.Equal(t, "kill", waitedFor)
	require.False(t, time.Now().Before(released.Add(settle)), "acted before the holder had let go")
	_, holder, ok = env.claimNode("redis-1", "kill")
	require.False(t, ok, "the waiter holds it now")
	require.Equal(t, "pause-server", holder)
	got()

	// Free at once: no wait, no settle.
	got, waitedFor, ok = env.awaitNode(context.Background(), "redis-1", "pause-server", time.Second)
	require.True(t, ok)
	require.Empty(t, waitedFor)
	got()

	// Held past the limit, or past the end of the run: the turn is lost.
	held, _, _ := env.claimNode("redis-1", "kill")
	defer held()
	t0 := time.Now()
	_, holder, ok = env.awaitNode(context.Background(), "redis-1", "pause-server", 100*time.Millisecond)
	require.False(t, ok)
	require.Equal(t, "kill", holder)
	require.Less(t, time.Since(t0), time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, ok = env.awaitNode(ctx, "redis-1", "pause-server", time.Minute)
	require.False(t, ok)
	require.Less(t, time.Since(t0), 2*time.Second)
}

// With several servers, pause-server takes a free one instead of the one
// kill acts on; aimed at the leader (or on one server) it waits its turn.
func TestClaimTurn(t *testing.T) {
	env, fs := fakeEnv("redis-1", "redis-2", "redis-3")
	r := rand.New(rand.NewPCG(1, 2))
	nodes := env.Cluster.Nodes()
	rel1, _, _ := env.claimNode("redis-1", "kill")
	rel2, _, _ := env.claimNode("redis-2", "kill")
	n, release := claimTurn(context.Background(), env, r, nodes, fs[0], "")
	require.NotNil(t, release)
	require.Equal(t, "redis-3", n.Name())
	require.Contains(t, notes(env), "pause-server skipped redis-1: kill is acting on it; took redis-3 instead")
	release()
	rel2()

	go func() {
		time.Sleep(100 * time.Millisecond)
		rel1()
	}()
	n, release = claimTurn(context.Background(), env, r, nodes, fs[0], "leader")
	require.NotNil(t, release)
	require.Equal(t, "redis-1", n.Name())
	last := notes(env)[len(notes(env))-1]
	require.True(t, strings.HasPrefix(last, "pause-server waited "), last)
	require.True(t, strings.HasSuffix(last, " for redis-1: kill was acting on it"), last)
	release()
}

// pause-server on a single server that kill keeps busy at the moment
// pause-server's first turn comes: it waits and freezes it once kill is
// done (it used to skip the turn, and a short run could end with no
// pause-server fault: inconclusive). The history says what was done to the
// server (docker pause, not SIGSTOP, on a container).
func TestPauseServerWaitsItsTurn(t *testing.T) {
	env, fs := fakeEnv("redis-1")
	release, _, _ := env.claimNode("redis-1", "kill")
	var released time.Time
	go func() {
		time.Sleep(3200 * time.Millisecond) // past pause-server's first turn (1-3 s)
		released = time.Now()
		release()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4500*time.Millisecond)
	defer cancel()
	require.NoError(t, (&pauseServer{}).Run(ctx, env))
	fs[0].mu.Lock()
	defer fs[0].mu.Unlock()
	require.NotEmpty(t, fs[0].paused)
	require.False(t, fs[0].frozen, "left frozen")
	require.True(t, fs[0].paused[0].After(released), "frozen while kill held it")
	var starts, ends []string
	for _, e := range env.Recorder.Events() {
		switch e.Type {
		case history.FaultStart:
			starts = append(starts, e.Detail)
		case history.FaultEnd:
			ends = append(ends, e.Detail)
		}
	}
	require.NotEmpty(t, starts)
	require.True(t, strings.HasPrefix(starts[0], "docker pause for "), starts[0])
	require.Equal(t, "docker unpause", ends[0])
	require.True(t, strings.HasPrefix(notes(env)[0], "pause-server waited "), notes(env))
}
