package conformance

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/internal/testenv"
	"github.com/locktest/locktest/protocol"
)

func redis(t *testing.T) clusters.Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not installed under CI: %v", err)
		}
		t.Skip("redis-server not installed: run scripts/install.sh")
	}
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: "redis", Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

func example(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "examples", p))
	require.NoError(t, err)
	return abs
}

// python returns Debian's python3 when it can import mod, or skips (fails
// under CI, where scripts/install.sh installs python3-mod).
func python(t *testing.T, mod string) string {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import "+mod).Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3-%s missing under CI: %v", mod, err)
		}
		t.Skipf("apt-get install -y python3-%s", mod)
	}
	return py
}

func hello(cl clusters.Cluster) protocol.Hello {
	return protocol.Hello{Lock: "client-cmd", Servers: cl.Addrs(), Key: "conf", TTLMillis: 5000, OpTimeoutMs: 1000, Seed: 1}
}

func TestRedisPyAdapterConforms(t *testing.T) {
	py := python(t, "redis")
	cl := redis(t)
	rep := Run([]string{py, example(t, "redis-py/client.py")}, hello(cl), 5*time.Second, io.Discard)
	for _, f := range rep.Findings {
		t.Logf("%v %s: %s", f.OK, f.Step, f.Detail)
	}
	require.Zero(t, rep.Violations)
	require.GreaterOrEqual(t, len(rep.Findings), 10)
}

// With --owned the example declares its after-check point: conformance asks
// it to stop there, sees the notice and the stop, resumes it and gets its
// answer.
func TestRedisPyOwnedStopsAtItsPoint(t *testing.T) {
	py := python(t, "redis")
	cl := redis(t)
	rep := Run([]string{py, example(t, "redis-py/client.py"), "--owned"}, hello(cl), 5*time.Second, io.Discard)
	stopped := 0
	for _, f := range rep.Findings {
		t.Logf("%v %s: %s", f.OK, f.Step, f.Detail)
		if f.OK && strings.Contains(f.Step, "stopping at after-check") && strings.Contains(f.Detail, "stopped itself") {
			stopped++
		}
	}
	require.Zero(t, rep.Violations)
	require.Equal(t, 1, stopped, "the after-check point was tried")
}

func TestBrokenClientsAreReported(t *testing.T) {
	cl := redis(t)
	cases := []struct {
		script string
		want   string
	}{
		{"broken/crash.sh", "exited before its ready message"},
		{"broken/garbage.sh", "malformed reply"},
		{"broken/silent.sh", "no reply within"},
		{"broken/wrong-ids.sh", "reply id 999 answers request 1"},
	}
	for _, tc := range cases {
		t.Run(tc.script, func(t *testing.T) {
			rep := Run([]string{example(t, tc.script)}, hello(cl), time.Second, io.Discard)
			require.Positive(t, rep.Violations)
			var all []string
			for _, f := range rep.Findings {
				if !f.OK {
					all = append(all, f.Detail)
				}
			}
			require.Contains(t, strings.Join(all, "\n"), tc.want)
		})
	}
}

// The hand-made lock of examples/handmade-redis (SET NX PX, a validity check
// before each write, a Lua compare-and-delete), an adapter written from
// docs/protocol.md alone: it conforms with and without fencing tokens, and
// stops itself at its after-check point when asked.
func TestHandmadeRedisAdapterConforms(t *testing.T) {
	py := python(t, "redis")
	cl := redis(t)
	for _, fence := range []bool{false, true} {
		t.Run(map[bool]string{false: "no fencing", true: "fencing"}[fence], func(t *testing.T) {
			h := hello(cl)
			h.Key = "handmade-" + map[bool]string{false: "plain", true: "fenced"}[fence]
			h.Fence = fence
			rep := Run([]string{py, example(t, "handmade-redis/client.py")}, h, 5*time.Second, io.Discard)
			stopped, tokens := 0, 0
			for _, f := range rep.Findings {
				t.Logf("%v %s: %s", f.OK, f.Step, f.Detail)
				if f.OK && strings.Contains(f.Step, "stopping at after-check") && strings.Contains(f.Detail, "stopped itself") {
					stopped++
				}
				if strings.HasPrefix(f.Step, "acquire") && strings.Contains(f.Detail, `"token":`) {
					tokens++
				}
			}
			require.Zero(t, rep.Violations)
			require.GreaterOrEqual(t, len(rep.Findings), 10)
			require.Equal(t, 1, stopped, "the after-check point was tried")
			if fence {
				require.GreaterOrEqual(t, tokens, 2, "every grant carries a token")
			} else {
				require.Zero(t, tokens, "no token without fencing")
			}
		})
	}
}

// kazoo's non-blocking acquire answers contended when a node precedes its
// own (docs/own-lock.md): as right as held, so conformance accepts it.
func TestKazooContendedConforms(t *testing.T) {
	testenv.Require(t, clusters.Check("zk3"))
	py := python(t, "kazoo")
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: "zk3", Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	rep := Run([]string{py, example(t, "kazoo/client.py")}, hello(cl), 10*time.Second, io.Discard)
	contended := 0
	for _, f := range rep.Findings {
		t.Logf("%v %s: %s", f.OK, f.Step, f.Detail)
		if f.OK && strings.Contains(f.Detail, `"contended"`) {
			contended++
		}
	}
	require.Zero(t, rep.Violations)
	require.Equal(t, 1, contended, "client 2's acquire answered contended")
}

// A fail with a reason that is not among the right ones is still a
// finding, and its line names every right one.
func TestCheckReplyListsTheRightReasons(t *testing.T) {
	cases := []struct {
		line   string
		ok     bool
		detail string
	}{
		{`{"id":1,"outcome":"fail","reason":"held"}`, true, ""},
		{`{"id":1,"outcome":"fail","reason":"contended"}`, true, ""},
		{`{"id":1,"outcome":"fail","reason":"not-owner"}`, false, "a correct lock answers fail/held or fail/contended here"},
		{`{"id":1,"outcome":"ok","owner":"x"}`, false, "answered ok, a correct lock answers fail/held or fail/contended here"},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			var r Report
			checkReply(&r, "acquire by client 2", protocol.Request{ID: 1, Op: protocol.OpAcquire}, tc.line, "fail", "held|contended")
			require.Equal(t, tc.ok, r.Violations == 0, "%v", r.Findings)
			if !tc.ok {
				require.Contains(t, r.Findings[0].Detail, tc.detail)
			}
		})
	}
}
