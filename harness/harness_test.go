package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
)

// The acceptance cells of the foundation, each against a real redis-server.
func TestRunCells(t *testing.T) {
	t.Parallel()
	needServer(t)
	cases := []struct {
		name    string
		lock    string
		nemesis string
		fence   bool
		params  map[string]string
		verdict checker.Verdict
		want    []string // anomaly kinds that must be present
		absent  []string // anomaly kinds that must not be
	}{
		{name: "lua without faults is safe", lock: "redis-lua", nemesis: "none", verdict: checker.Safe,
			absent: []string{string(checker.KindDoubleHolder), string(checker.KindLostUpdate), string(checker.KindForeignRelease)}},
		{name: "lua under pause has a double holder", lock: "redis-lua", nemesis: "pause", verdict: checker.Unsafe,
			want: []string{string(checker.KindDoubleHolder)}, absent: []string{string(checker.KindForeignRelease)}},
		{name: "plain DEL under pause releases a foreign lock", lock: "redis-del", nemesis: "pause", verdict: checker.Unsafe,
			want: []string{string(checker.KindDoubleHolder), string(checker.KindForeignRelease)}},
		{name: "fenced lua under pause keeps the data safe", lock: "redis-lua", nemesis: "pause", fence: true, verdict: checker.Safe,
			want: []string{string(checker.KindStaleWriteRejected)}, absent: []string{string(checker.KindLostUpdate), string(checker.KindStaleWriteAccepted)}},
		{name: "setnx with a crashed holder deadlocks", lock: "redis-setnx", nemesis: "crash-client", verdict: checker.Unsafe,
			want: []string{string(checker.KindDeadlock)}},
		// Faults in the gaps between a client's steps.
		{name: "setnx-expire crashed between SETNX and EXPIRE deadlocks", lock: "redis-setnx-expire", nemesis: "crash-client",
			params: map[string]string{"crash-at": "after-setnx"}, verdict: checker.Unsafe, want: []string{string(checker.KindDeadlock)}},
		{name: "get-del paused between GET and DEL releases a foreign lock", lock: "redis-get-del", nemesis: "pause",
			params: map[string]string{"pause-at": "after-get"}, verdict: checker.Unsafe, want: []string{string(checker.KindForeignRelease)}},
		{name: "fenced get-del under pause keeps the data safe", lock: "redis-get-del", nemesis: "pause", fence: true, verdict: checker.Safe,
			absent: []string{string(checker.KindLostUpdate), string(checker.KindStaleWriteAccepted)}},
		{name: "redlock paused between its check and its write", lock: "redlock", nemesis: "pause",
			params: map[string]string{"pause-at": "after-check"}, verdict: checker.Unsafe,
			want: []string{string(checker.KindDoubleHolder), string(checker.KindCheckThenAct)}, absent: []string{string(checker.KindUsedAfterValidity)}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := baseOptions(t, tc.lock, tc.nemesis, int64(100+i))
			o.Fence, o.Params = tc.fence, tc.params
			slot(t, o.TimeLimit)
			out, _, verdict, want := runCell(t, o, tc.verdict, tc.want)
			r := out.Result
			found := kinds(r, "")
			require.Equal(t, verdict, r.Verdict, "why: %s; anomalies: %v", r.Why, found)
			for _, k := range want {
				require.Positive(t, found[k], "want a %s anomaly; got %v", k, found)
			}
			for _, k := range tc.absent {
				require.Zero(t, found[k], "want no %s anomaly; got %v", k, found)
			}
			for _, f := range []string{"config.json", "history.jsonl", "results.json", "report.html", "linearization.html", "servers/redis-1/redis.log"} {
				require.FileExists(t, filepath.Join(out.Dir, f))
			}
			assertNothingLeft(t, out.Dir)
		})
	}
}

// An interrupt while a client is frozen: every process resumed or ended,
// the server stopped, the history kept and checkable.
func TestInterruptDuringPause(t *testing.T) {
	t.Parallel()
	needServer(t)
	slot(t, 5*time.Second) // interrupted at the first pause
	o := baseOptions(t, "redis-lua", "pause", 7)
	o.TimeLimit = 30 * time.Second
	o.TTL = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var out *Outcome
	var err error
	go func() { out, err = Run(ctx, o); close(done) }()

	// Wait until a pause is in effect, then interrupt.
	deadline := time.Now().Add(20 * time.Second)
	for !pauseActive(t, o.Store) {
		require.True(t, time.Now().Before(deadline), "no pause began within 20s")
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop within 20s of the interrupt")
	}
	require.NoError(t, err)
	require.True(t, out.Interrupted)
	h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
	require.NoError(t, err)
	require.Equal(t, "interrupted", h.Ended)
	require.NotEmpty(t, h.Faults)
	assertNothingLeft(t, out.Dir)
	res, err := CheckDir(out.Dir, nil, true)
	require.NoError(t, err)
	require.NotEmpty(t, res.Verdict)
}

func pauseActive(t *testing.T, store string) bool {
	t.Helper()
	path := filepath.Join(store, "latest", "history.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return strings.Count(string(b), `"type":"fault-start"`) > strings.Count(string(b), `"type":"fault-end"`)
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"unknown lock", func(o *Options) { o.Lock = "nope" }, `unknown lock "nope"`},
		{"unknown nemesis", func(o *Options) { o.Nemesis = "pause,flood" }, `unknown nemesis "flood"`},
		{"zero clients", func(o *Options) { o.Clients = 0 }, "--clients must be at least 1"},
		{"negative ttl", func(o *Options) { o.TTL = -time.Second }, "--ttl must be positive"},
		{"none combined", func(o *Options) { o.Nemesis = "none,pause" }, "none cannot be combined"},
		{"unknown backend", func(o *Options) { o.Cluster = "k8s" }, `unknown cluster backend "k8s"`},
		{"clock on zk", func(o *Options) { o.Lock, o.Nemesis = "zk", "clock" }, "Redis and MySQL topologies have; zk3 has none"},
		{"param typo", func(o *Options) { o.Params = map[string]string{"wait_timout": "5"} }, "unknown --param wait_timout (known: pause, "},
		{"param of another topology", func(o *Options) { o.Params = map[string]string{"wait_timeout": "5"} }, "--param wait_timeout applies to mysql, mysql-replicated, not to lock redis-lua on topology redis"},
		{"param of a fault not injected", func(o *Options) { o.Params = map[string]string{"pause": "0.1..0.3"} }, "--param pause sets the pause fault, which this run does not inject"},
		// Fault points: the scheme's own, or after-grant.
		{"pause-at without pause", func(o *Options) { o.Params = map[string]string{"pause-at": "after-grant"} }, "--param pause-at aims the pause fault, which this run does not inject"},
		{"pause-at a point the scheme lacks", func(o *Options) {
			o.Nemesis, o.Params = "pause", map[string]string{"pause-at": "after-check"}
		}, `--param pause-at=after-check: lock redis-lua has no fault point "after-check" (it has: after-grant)`},
		{"crash-at a point of another scheme", func(o *Options) {
			o.Lock, o.Nemesis, o.Params = "redis-get-del", "crash-client", map[string]string{"crash-at": "after-setnx"}
		}, `lock redis-get-del has no fault point "after-setnx" (it has: after-grant, after-get)`},
		{"crash-at waiting", func(o *Options) {
			// crash-client never strikes a waiter: the run would never
			// inject a fault.
			o.Lock, o.Nemesis, o.Wait, o.Params = "etcd", "crash-client", true, map[string]string{"crash-at": "waiting"}
		}, `--param crash-at=waiting: lock etcd has no fault point "waiting" (it has: after-grant)`},
		// Values are checked before any server starts, in MariaDB's range.
		{"lock_wait not whole", func(o *Options) {
			o.Lock, o.Params = "mysql-get-lock", map[string]string{"lock_wait": "2.5"}
		}, "--param lock_wait=2.5: want a whole number of seconds from 0 to 31536000"},
		{"wait_timeout above MariaDB's maximum", func(o *Options) {
			o.Lock, o.Params = "mysql-unique", map[string]string{"wait_timeout": "99999999"}
		}, "--param wait_timeout=99999999: want a whole number of seconds from 1 to 31536000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := baseOptions(t, "redis-lua", "none", 1)
			tc.mod(&o)
			_, err := o.Validate()
			require.Error(t, err)
			require.ErrorAs(t, err, new(UsageError))
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "\n")
		})
	}
}

// --param failover: kill (the default) or isolate, which only
// redis-sentinel on the local backend can do, and which needs root.
func TestValidateFailoverParam(t *testing.T) {
	cases := []struct {
		name, lock, topology, nemesis, cluster, mode, want string
	}{
		{"unknown mode", "redis-sentinel", "", "failover", "local", "drop", `--param failover: unknown failover mode "drop" (known: kill, isolate)`},
		{"isolate on mysql", "mysql-get-lock", "mysql-replicated", "failover", "local", "isolate", "--param failover=isolate needs a topology that can cut its primary off the network (redis-sentinel); mysql-replicated kills its primary"},
		{"isolate on docker", "redis-sentinel", "", "failover", "docker", "isolate", "--param failover=isolate runs on --cluster local only"},
		{"without the failover fault", "redis-sentinel", "", "pause", "local", "isolate", "--param failover sets the failover fault, which this run does not inject"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := baseOptions(t, tc.lock, tc.nemesis, 1)
			o.Topology, o.Cluster = tc.topology, tc.cluster
			o.Params = map[string]string{"failover": tc.mode}
			_, err := o.Validate()
			require.ErrorAs(t, err, new(UsageError))
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "\n")
		})
	}
	for _, mode := range []string{"kill", "isolate"} {
		o := baseOptions(t, "redis-sentinel", "failover", 1)
		o.Params = map[string]string{"failover": mode}
		_, err := o.Validate()
		if mode == "isolate" && netns.Available() != nil {
			require.ErrorContains(t, err, "failover with --param failover=isolate cannot run")
			continue
		}
		if len(clusters.Missing("redis-sentinel")) == 0 {
			require.NoError(t, err, mode)
		}
	}
}

func TestValidateParamsAccepted(t *testing.T) {
	o := baseOptions(t, "redis-lua", "pause", 1)
	o.Params = map[string]string{"pause": "0.1..0.3"}
	_, err := o.Validate()
	require.NoError(t, err)
	o = baseOptions(t, "mysql-get-lock", "none", 1)
	o.Params = map[string]string{"lock_wait": "1", "wait_timeout": "3"}
	_, err = o.Validate()
	if err != nil {
		require.NotContains(t, err.Error(), "--param") // a missing MariaDB may refuse it
	}
	o = baseOptions(t, "etcd", "pause", 1)
	o.Wait = true
	o.Params = map[string]string{"etcd-client": "pre-11456", "pause-at": "waiting"}
	_, err = o.Validate()
	if err != nil {
		require.NotContains(t, err.Error(), "--param") // a missing etcd may refuse it
	}
	o = baseOptions(t, "", "none", 1)
	o.ClientCmd, o.Topology = "true", "redis"
	o.Params = map[string]string{"my_client_setting": "x"}
	_, err = o.Validate()
	require.NoError(t, err, "a --client-cmd run hands unknown params to the user's client")
}

func isRedis(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.HasPrefix(string(b), "redis")
}

// A fault that cannot matter with the default sizing gets one that lets
// it: Sentinel's failover everywhere, MariaDB's on containers only (it
// promotes within milliseconds on the local backend).
func TestFaultSizing(t *testing.T) {
	traits := func(lock string) history.Traits {
		s, ok := locks.Lookup(lock)
		require.True(t, ok, lock)
		return s.Traits
	}
	sz, ok := FaultSizing("local", "redis-sentinel", []string{"failover"}, traits("redis-sentinel"))
	require.True(t, ok)
	require.Greater(t, sz.Hold.Min, 2300*time.Millisecond, "holds outlive the promotion")
	require.Greater(t, sz.TTL, sz.Hold.Max, "the lease outlives the holds")
	_, ok = FaultSizing("local", "mysql-replicated", []string{"failover"}, traits("mysql-for-update"))
	require.False(t, ok)
	sz, ok = FaultSizing("docker", "mysql-replicated", []string{"failover"}, traits("mysql-for-update"))
	require.True(t, ok)
	require.Greater(t, sz.TTL, sz.Hold.Max)
	_, ok = FaultSizing("local", "redis-sentinel", []string{"pause"}, traits("redis-sentinel"))
	require.False(t, ok)
	// A kill of the server holding a session lock: the holds outlive
	// MariaDB's restart (0.5-1.5 s); the lease, which it has none of, and
	// a lock in rows, which survives the kill, are left alone.
	for _, lock := range []string{"mysql-for-update", "mysql-get-lock"} {
		sz, ok = FaultSizing("local", "mysql", []string{"kill"}, traits(lock))
		require.True(t, ok, lock)
		require.GreaterOrEqual(t, sz.Hold.Min, 2*time.Second, lock)
		require.Zero(t, sz.TTL, lock)
	}
	for _, lock := range []string{"mysql-unique", "zk", "etcd", "redis-lua"} {
		_, ok = FaultSizing("local", "mysql", []string{"kill"}, traits(lock))
		require.False(t, ok, lock)
	}
}

// A --client-cmd run's own points are known only once it runs, but the
// waiter point is the controller's: pause-at=waiting wants --wait, and
// crash-at=waiting is never struck.
func TestValidateClientCmdWaiting(t *testing.T) {
	cases := []struct {
		nemesis, key string
		wait         bool
		want         string
	}{
		{"pause", "pause-at", false, `--param pause-at=waiting: "waiting" is a point of pause with --wait only`},
		{"crash-client", "crash-at", true, `--param crash-at=waiting: "waiting" is a point of pause with --wait only`},
		{"pause", "pause-at", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			o := clientCmdOptions(t, "true", "redis", tc.nemesis, 1)
			o.Wait = tc.wait
			o.Params = map[string]string{tc.key: "waiting"}
			_, err := o.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorAs(t, err, new(UsageError))
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// The fault points a scheme declares, after-grant, and with --wait the
// waiter point are accepted.
func TestValidatePointsAccepted(t *testing.T) {
	cases := []struct {
		lock, nemesis, key, value string
		wait                      bool
	}{
		{"redlock", "pause", "pause-at", "after-check", false},
		{"redis-get-del", "pause", "pause-at", "after-grant,after-get", false},
		{"redis-setnx-expire", "crash-client", "crash-at", "after-setnx", false},
		{"redis-lua", "pause", "pause-at", "waiting", true},
	}
	for _, tc := range cases {
		t.Run(tc.lock+"/"+tc.value, func(t *testing.T) {
			o := baseOptions(t, tc.lock, tc.nemesis, 1)
			o.Params = map[string]string{tc.key: tc.value}
			o.Wait = tc.wait
			_, err := o.Validate()
			require.NoError(t, err)
		})
	}
}
