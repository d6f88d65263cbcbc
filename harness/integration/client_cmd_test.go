package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/history"
)

// python returns Debian's python3 with the module mod, or skips (fails under
// CI, where scripts/install.sh installs them).
func python(t *testing.T, mod string) string {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import "+mod).Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s cannot import %s under CI: %v", py, mod, err)
		}
		t.Skipf("%s cannot import %s: apt-get install -y python3-%s", py, mod, mod)
	}
	return py
}

func example(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", path))
	require.NoError(t, err)
	return p
}

// Third-party lock libraries, through the public protocol, with the same
// faults and checks as the built-in schemes.
func TestClientCmdAdapters(t *testing.T) {
	t.Parallel()
	needServer(t)
	cases := []struct {
		name     string
		mod      string
		script   string
		topology string
		nemesis  string
		ttl      time.Duration
		verdict  checker.Verdict
		want     string
		fence    bool
	}{
		{"redis-py Lock without faults is safe", "redis", "redis-py/client.py", "redis", "none", time.Second, checker.Safe, "", false},
		{"redis-py Lock under pause has a double holder", "redis", "redis-py/client.py", "redis", "pause", time.Second, checker.Unsafe, string(checker.KindDoubleHolder), false},
		// A session of 4 s: on a loaded 2-core machine a Python client's
		// heartbeats can starve for 2 s, and an expired session is a real
		// loss of the lock, not a fault the run injected.
		{"kazoo Lock without faults is safe", "kazoo", "kazoo/client.py", "zk3", "none", 4 * time.Second, checker.Safe, "", false},
		{"kazoo Lock under pause past the session timeout has a double holder", "kazoo", "kazoo/client.py", "zk3", "pause", 2 * time.Second, checker.Unsafe, string(checker.KindDoubleHolder), false},
		// A lock written from docs/protocol.md alone: its validity check
		// does not save it from a pause (after the check, or after the
		// grant); fencing tokens do.
		{"hand-made Redis lock under pause has a double holder", "redis", "handmade-redis/client.py", "redis", "pause", time.Second, checker.Unsafe, string(checker.KindDoubleHolder), false},
		{"hand-made Redis lock under pause with fencing is safe", "redis", "handmade-redis/client.py", "redis", "pause", time.Second, checker.Safe, "", true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !slices.ContainsFunc(local.Topologies, func(tp local.Topology) bool { return tp.Name == tc.topology }) {
				t.Skipf("topology %s is not in this build", tc.topology)
			}
			py := python(t, tc.mod)
			o := clientCmdOptions(t, py+" "+example(t, tc.script), tc.topology, tc.nemesis, int64(300+i))
			o.TTL = tc.ttl
			o.Fence = tc.fence
			o.TimeLimit = 10 * time.Second
			slot(t, o.TimeLimit)
			out, err := Run(context.Background(), o)
			require.NoError(t, err)
			found := kinds(out.Result, "")
			require.Equal(t, tc.verdict, out.Result.Verdict, "why: %s; anomalies %v", out.Result.Why, found)
			if tc.want != "" {
				require.Positive(t, found[tc.want], "anomalies %v", found)
			}
			for _, p := range out.Result.Properties {
				if tc.fence && (p.Name == "fencing" || p.Name == "token-order") {
					require.Equal(t, checker.Pass, p.Status, "the grants carried tokens the resource checked; %s: %s", p.Name, p.Detail)
				}
			}
			assertNothingLeft(t, out.Dir)
		})
	}
}

// A broken client program is a harness error naming the client and what it
// printed, never a lock verdict.
func TestBrokenClients(t *testing.T) {
	t.Parallel()
	needServer(t)
	cases := []struct {
		script string
		want   []string
	}{
		{"broken/crash.sh", []string{"client 0", "cannot load my lock library", "probe.stderr"}},
		{"broken/garbage.sh", []string{"client 1", "printed garbage", "Traceback"}},
		{"broken/silent.sh", []string{"did not answer"}},
		{"broken/wrong-ids.sh", []string{"answered request", "with the id 999"}},
	}
	for i, tc := range cases {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			o := clientCmdOptions(t, example(t, tc.script), "redis", "none", int64(400+i))
			o.OpTimeout = 200 * time.Millisecond
			o.TimeLimit = 3 * time.Second
			slot(t, o.TimeLimit)
			start := time.Now()
			out, err := Run(context.Background(), o)
			require.Error(t, err)
			require.Less(t, time.Since(start), 20*time.Second)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			if out != nil && out.Dir != "" {
				assertNothingLeft(t, out.Dir)
			}
		})
	}
}

// A client that misbehaves mid-run ends the faults at once: the run is
// aborted long before its time limit (the pause fault, waiting for a
// grant that never comes, would otherwise wait the whole limit out), the
// history says why, and nothing is left behind.
func TestAbortedRunEndsItsFaults(t *testing.T) {
	t.Parallel()
	needServer(t)
	slot(t, 5*time.Second) // aborted at once
	o := clientCmdOptions(t, example(t, "broken/wrong-ids.sh"), "redis", "pause", 410)
	o.OpTimeout = 200 * time.Millisecond
	o.TimeLimit = 2 * time.Minute
	start := time.Now()
	out, err := Run(context.Background(), o)
	took := time.Since(start)
	require.ErrorContains(t, err, "run aborted")
	require.ErrorContains(t, err, "with the id 999")
	require.Less(t, took, o.TimeLimit/2, "the faults went on after the workload failed")
	require.NotNil(t, out)
	h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h.Ended, "harness error: "), "run-end: %q", h.Ended)
	assertNothingLeft(t, out.Dir)
}

// A client program whose ready message says its lock never reads its own
// clock is refused the clock-client fault, as a built-in scheme is: a usage
// error with the campaign's reason, after the probe and before any history
// is recorded.
func TestClientCmdRefusedFault(t *testing.T) {
	t.Parallel()
	needServer(t)
	py := python(t, "redis")
	slot(t, time.Second) // refused after the probe
	o := clientCmdOptions(t, py+" "+example(t, "redis-py/client.py"), "redis", "clock-client", 350)
	_, err := o.Validate()
	require.NoError(t, err, "until the program's ready message, it may check its validity")
	out, err := Run(context.Background(), o)
	require.Nil(t, out)
	var ue UsageError
	require.ErrorAs(t, err, &ue)
	require.ErrorContains(t, err, "never reads its own clock")
	require.NotContains(t, err.Error(), "\n")
	histories, _ := filepath.Glob(filepath.Join(o.Store, "*", "*", "*", "history.jsonl"))
	require.Empty(t, histories, "nothing recorded")
}
