package workloads

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/protocol"
)

// The test binary doubles as a client process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestResourceFencing(t *testing.T) {
	tok := func(v int64) *int64 { return &v }
	cases := []struct {
		name   string
		fence  bool
		steps  []func(r *Resource) history.Event
		last   history.Type
		reason string
	}{
		{"unfenced accepts any write", false, []func(*Resource) history.Event{
			func(r *Resource) history.Event { return write(r, 1, tok(5)) },
			func(r *Resource) history.Event { return write(r, 1, tok(3)) },
		}, history.OK, ""},
		{"fenced rejects a lower token", true, []func(*Resource) history.Event{
			func(r *Resource) history.Event { return write(r, 1, tok(5)) },
			func(r *Resource) history.Event { return write(r, 2, tok(3)) },
		}, history.Fail, history.ReasonStaleToken},
		{"a read with a newer token fences older writers", true, []func(*Resource) history.Event{
			func(r *Resource) history.Event { e := history.Event{Type: history.OK}; r.read(&e, tok(9)); return e },
			func(r *Resource) history.Event { return write(r, 1, tok(8)) },
		}, history.Fail, history.ReasonStaleToken},
		{"fenced accepts the same token again", true, []func(*Resource) history.Event{
			func(r *Resource) history.Event { return write(r, 1, tok(5)) },
			func(r *Resource) history.Event { return write(r, 2, tok(5)) },
		}, history.OK, ""},
		{"fenced rejects a write without token", true, []func(*Resource) history.Event{
			func(r *Resource) history.Event { return write(r, 1, nil) },
		}, history.Fail, history.ReasonStaleToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewResource(0, tc.fence)
			var e history.Event
			for _, s := range tc.steps {
				e = s(r)
			}
			require.Equal(t, tc.last, e.Type)
			require.Equal(t, tc.reason, e.Reason)
		})
	}
}

func write(r *Resource, v int64, token *int64) history.Event {
	e := history.Event{Type: history.OK}
	r.write(&e, v, token)
	return e
}

func TestRangeDraw(t *testing.T) {
	r := Range{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond}
	rnd := newRand(1)
	for i := 0; i < 1000; i++ {
		d := r.Draw(rnd)
		require.GreaterOrEqual(t, d, r.Min)
		require.LessOrEqual(t, d, r.Max)
	}
	require.Equal(t, 5*time.Millisecond, Range{Min: 5 * time.Millisecond}.Draw(rnd))
}

func startWorker(tb testing.TB, addr string) *Process {
	tb.Helper()
	hello := protocol.Hello{Type: protocol.TypeHello, Version: protocol.Version, Client: 1, Lock: "redis-lua",
		Servers: []string{addr}, Key: "bench", TTLMillis: 10000, OpTimeoutMs: 1000, Seed: 1}
	p, err := startProcess([]string{os.Args[0], "worker"}, 1, filepath.Join(tb.TempDir(), "c.stderr"), hello, 10*time.Second)
	require.NoError(tb, err)
	tb.Cleanup(func() { p.Shutdown(time.Second) })
	return p
}

func redis(tb testing.TB) clusters.Cluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redis-server not installed under CI: %v", err)
		}
		tb.Skip("redis-server not installed: run scripts/install.sh")
	}
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: "redis", Dir: tb.TempDir()})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

// A client process answers in order, pauses and resumes, and a killed one
// is reported as exited.
func TestProcessLifecycle(t *testing.T) {
	cl := redis(t)
	p := startWorker(t, cl.Addrs()[0])
	rep, err := p.Do(protocol.OpAcquire, "", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok", rep.Outcome)
	owner := rep.Owner

	require.NoError(t, p.Pause())
	got := make(chan protocol.Reply, 1)
	go func() {
		r, err := p.Do(protocol.OpRead, "", 100*time.Millisecond)
		if err != nil {
			r.Error = err.Error()
		}
		got <- r
	}()
	select {
	case r := <-got:
		t.Fatalf("a paused client answered: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, p.Resume())
	select {
	case r := <-got:
		require.Equal(t, "ok", r.Outcome, r.Error)
	case <-time.After(5 * time.Second):
		t.Fatal("the resumed client did not answer")
	}
	rep, err = p.Do(protocol.OpRelease, owner, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok", rep.Outcome)

	p.Kill()
	_, err = p.Do(protocol.OpAcquire, "", time.Second)
	require.ErrorIs(t, err, ErrExited)
}

// A client that prints garbage is a harness error naming the client.
func TestGarbageClient(t *testing.T) {
	dir := t.TempDir()
	hello := protocol.Hello{Type: protocol.TypeHello, Version: protocol.Version, Client: 4}
	_, err := startProcess([]string{"sh", "-c", "read x; echo 'this is not json'; sleep 5"}, 4, filepath.Join(dir, "c.stderr"), hello, 3*time.Second)
	require.Error(t, err)
	require.Contains(t, err.Error(), "client 4")
	require.Contains(t, err.Error(), "not json")

	_, err = startProcess([]string{"sh", "-c", "echo boom >&2; exit 3"}, 5, filepath.Join(dir, "d.stderr"), hello, 3*time.Second)
	require.Error(t, err)
	require.Contains(t, err.Error(), "boom")
}

// BenchmarkPipeCycle measures an acquire+release cycle driven through the
// pipe protocol to a client process, the way every run drives its clients.
func BenchmarkPipeCycle(b *testing.B) {
	cl := redis(b)
	p := startWorker(b, cl.Addrs()[0])
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rep, err := p.Do(protocol.OpAcquire, "", 5*time.Second)
		if err != nil || rep.Outcome != "ok" {
			b.Fatalf("acquire: %v %+v", err, rep)
		}
		if rep, err = p.Do(protocol.OpRelease, rep.Owner, 5*time.Second); err != nil || rep.Outcome != "ok" {
			b.Fatalf("release: %v %+v", err, rep)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
}
