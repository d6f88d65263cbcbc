// Package harnesstest holds what the harness's real-server tests share: the
// options of a small seeded run, the checks that a server or tool is
// installed, and the test binary's worker mode. The tests live in two
// packages, harness and harness/integration, so that go test runs them side
// by side (it runs one package's parallel tests at most -parallel at a
// time, but several packages at once).
package harnesstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/testenv"
	"github.com/locktest/locktest/workloads"
)

// Main is a test package's TestMain: it lets the test binary double as a
// client process (the harness starts it with the argument "worker",
// exactly as it starts `locktest worker`), and otherwise runs the tests,
// the real-server ones through the gate of Slot.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := workloads.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	setParallel()
	code := m.Run()
	if testing.Verbose() {
		admitted, extras := SlotStats()
		fmt.Printf("harnesstest: %d runs through the gate, %d of them as extra runs on an idle machine\n", admitted, extras)
	}
	os.Exit(code)
}

// NeedServer skips outside CI when redis-server is missing, and fails under
// CI, where a missing server is a broken install.
func NeedServer(t *testing.T) {
	t.Helper()
	testenv.Require(t, clusters.Check("redis"))
}

// NeedTopology skips outside CI when a topology's servers are missing, and
// fails under CI.
func NeedTopology(t *testing.T, topology string) {
	t.Helper()
	testenv.Require(t, clusters.Check(topology))
}

// NeedSentinel skips outside CI when redis-sentinel is missing, and fails
// under CI.
func NeedSentinel(t *testing.T) {
	t.Helper()
	testenv.Require(t, clusters.Check("redis-sentinel"))
}

// NeedNet skips outside CI, and fails under CI, when network namespaces
// cannot be made.
func NeedNet(t *testing.T) {
	t.Helper()
	testenv.Require(t, netns.Available())
}

// NeedFaketime skips outside CI, and fails under CI, without the clock shim.
func NeedFaketime(t *testing.T) {
	t.Helper()
	testenv.Require(t, clusters.CheckClockShim())
}

// NeedDocker skips outside CI, and fails under CI, when there is no Docker
// engine or no local redis image; the runs use the local images (see
// DockerImages), never a pull.
func NeedDocker(t *testing.T) { NeedImage(t, docker.KindRedis) }

// NeedImage is NeedDocker for the image of kind.
func NeedImage(t *testing.T, kind string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := docker.Available(ctx, kind, DockerImages("docker"))
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("the docker backend tests need root")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err.Error())
	}
}

// DockerImages are the images a test run on cluster uses: for docker, the
// local image of every kind (scripts/build-images.sh), unless
// $LOCKTEST_IMAGE_<KIND> names another; nil for the other backends.
func DockerImages(cluster string) map[string]string {
	if cluster != "docker" {
		return nil
	}
	out := map[string]string{}
	for _, k := range docker.Kinds {
		out[k] = os.Getenv(docker.ImageEnv(k))
		if out[k] == "" {
			out[k] = docker.LocalImage(k)
		}
	}
	return out
}

// BaseOptions are the options of a short seeded run of lock under nem on
// the local backend, whose clients are the test binary in worker mode (see
// Main).
func BaseOptions(t *testing.T, lock, nem string, seed int64) harness.Options {
	t.Helper()
	return harness.Options{
		Lock: lock, Nemesis: nem, Seed: seed,
		TimeLimit: 8 * time.Second, Clients: 5, TTL: time.Second,
		Hold:        workloads.Range{Min: 50 * time.Millisecond, Max: 250 * time.Millisecond},
		Think:       workloads.Range{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond},
		WaitTimeout: 3 * time.Second, OpTimeout: 500 * time.Millisecond,
		Store: t.TempDir(), Cluster: "local", Quiet: true,
		ClientArgv: []string{os.Args[0], "worker"},
		Out:        &strings.Builder{},
	}
}

// ClientCmdOptions are BaseOptions for the --client-cmd cmd on topology.
func ClientCmdOptions(t *testing.T, cmd, topology, nem string, seed int64) harness.Options {
	t.Helper()
	o := BaseOptions(t, "", nem, seed)
	o.ClientArgv = nil
	o.ClientCmd = cmd
	o.Topology = topology
	return o
}

// FailoverShape sizes a failover cell: long holds within a longer lease, and
// a run long enough for one failover (the rejoin, about 10 s, comes after).
func FailoverShape(o *harness.Options) {
	o.TTL = 6 * time.Second
	o.Hold = workloads.Range{Min: 3 * time.Second, Max: 4 * time.Second}
	o.TimeLimit = 12 * time.Second
}

// MissedFailover reports whether r is the inconclusive verdict a failover
// cell rightly earns when no failover could give the lock away twice, and
// the recorded history agrees, failover by failover: it promoted nothing,
// or (a lease that is not renewed) only more than ttl after it struck,
// or the promoted
// replica had applied every write the primary had committed and the lock
// lives in rows (history.PromotedWithEveryWrite), or no other client was
// granted the lock from the promotion until the holder whose grant the
// failover followed let go (its first release after the failure began, or
// the end of its validity), or the promotion was seen only late
// (history.PromotedLate: when it came is not known).
// Failover cells accept it in place of unsafe; never safe.
func MissedFailover(r checker.Result, h *history.History, ttl time.Duration) bool {
	if r.Verdict != checker.Inconclusive {
		return false
	}
	if !strings.Contains(r.Why, "no failover promoted a replica") && !strings.Contains(r.Why, "no failover lost a live holder's lock") &&
		!strings.Contains(r.Why, "no failover's promoted replica granted the lock while") &&
		!strings.Contains(r.Why, "a failover's replica was promoted only after the failover had stopped waiting") {
		return false
	}
	n := 0
	for _, f := range h.Faults {
		if f.Name != "failover" {
			continue
		}
		n++
		p, ok := h.Promotion(f)
		switch {
		case !ok, history.Late(p), h.Info.Lease && !h.Info.Renews && p.Time-f.Start > ttl.Nanoseconds():
		case !h.Info.Session && strings.HasSuffix(p.Detail, history.PromotedWithEveryWrite):
		case regranted(h, f.Client, f.Start, p.Time):
			return false
		}
	}
	return n > 0
}

// regranted reports whether a client other than holder was granted the
// lock from promotion p until holder let go: its first release invoked
// after from, or before that the end of the validity its grant (the last
// before from) gave it, if it checks one.
func regranted(h *history.History, holder int, from, p int64) bool {
	end := history.Never
	for _, op := range h.Ops {
		if op.Client != holder {
			continue
		}
		if op.Op == history.Acquire && op.Type == history.OK && op.Return <= from {
			end = op.ValidUntil // Never when it checks none
		}
		if op.Op == history.Release && op.Call >= from {
			end = min(end, op.Call)
			break
		}
	}
	for _, op := range h.Ops {
		if op.Client != holder && op.Op == history.Acquire && op.Type == history.OK && op.Return >= p && op.Return <= end {
			return true
		}
	}
	return false
}

// Kinds counts r's anomalies of severity (all of them for "") by kind.
func Kinds(r checker.Result, severity string) map[string]int {
	out := map[string]int{}
	for _, a := range r.Anomalies {
		if severity == "" || string(a.Severity) == severity {
			out[string(a.Kind)]++
		}
	}
	return out
}

// AssertNothingLeft checks that no process the run in dir started is alive.
func AssertNothingLeft(t *testing.T, dir string) {
	t.Helper()
	h, err := history.Load(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	for _, c := range h.Clients {
		require.False(t, Alive(c.PID), "client %d (pid %d) still runs", c.ID, c.PID)
		require.NotEqual(t, history.Never, c.End, "client %d has no exit event", c.ID)
	}
	for _, f := range h.Faults {
		require.NotEqual(t, history.Never, f.End, "fault %s on %s was never healed", f.Name, f.Target)
	}
	// No server started for the run survives it: every server's command
	// line names its directory under the run directory.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
		require.False(t, Alive(pid), "pid %d still runs: %s", pid, strings.ReplaceAll(string(b), "\x00", " "))
	}
}

// Alive says whether the process pid runs (a zombie does not).
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	// A zombie is gone for our purposes.
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// ReadFile returns the text of the file at path.
func ReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// NotLanded reports whether r is the inconclusive verdict of a run whose
// faults did not land where they could matter, and for no other reason:
// its one reason is that a nemesis of the run never injected a fault, or
// that none of its faults started while a client (or its client) held the
// lock (checker.NeverInjected, checker.NoneWhileHeld). Such a run says
// nothing about the lock: on a busy machine a fault aimed at a moment (a
// grant whose reply it drops, a replica held back before a grant) can miss
// it every time in a short run. A run with too few acquires, or any other
// reason besides, is not such a run.
func NotLanded(r checker.Result, h *history.History) bool {
	if r.Verdict != checker.Inconclusive {
		return false
	}
	for _, n := range h.Info.Nemeses {
		if r.Why == checker.NeverInjected(n) || r.Why == checker.NoneWhileHeld(n, true) || r.Why == checker.NoneWhileHeld(n, false) {
			return true
		}
	}
	return false
}

// RunLanded runs o and loads its history. When the run's faults did not
// land (NotLanded), it runs once more with another seed (logged): a cell
// that expects its fault to find a hole gets a second chance on a busy
// machine. landed is false when the second run's faults missed too: the
// cell then accepts that run's inconclusive verdict, never a safe one.
func RunLanded(t *testing.T, o harness.Options) (out *harness.Outcome, h *history.History, landed bool) {
	t.Helper()
	for try := 0; ; try++ {
		var err error
		out, err = harness.Run(context.Background(), o)
		require.NoError(t, err)
		h, err = history.Load(filepath.Join(out.Dir, "history.jsonl"))
		require.NoError(t, err)
		if !NotLanded(out.Result, h) {
			return out, h, true
		}
		if try == 1 {
			t.Logf("the faults of seed %d did not land either (%s): inconclusive is the verdict these runs earned", o.Seed, out.Result.Why)
			return out, h, false
		}
		t.Logf("the faults of seed %d did not land (%s, a busy machine): once more with seed %d", o.Seed, out.Result.Why, o.Seed+1000)
		assertSetAsideCleaned(t, o, out)
		o.Seed += 1000
	}
}

// RunCell runs a cell that expects verdict with anomalies of the kinds in
// want, and loads its history. A cell that expects unsafe runs through
// RunLanded; when its faults did not land twice, the verdict it then
// expects is inconclusive, with no anomaly (never safe).
func RunCell(t *testing.T, o harness.Options, verdict checker.Verdict, want []string) (*harness.Outcome, *history.History, checker.Verdict, []string) {
	t.Helper()
	if verdict == checker.Unsafe {
		out, h, landed := RunLanded(t, o)
		if !landed {
			return out, h, checker.Inconclusive, nil
		}
		return out, h, verdict, want
	}
	out, err := harness.Run(context.Background(), o)
	require.NoError(t, err)
	h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
	require.NoError(t, err)
	return out, h, verdict, want
}

// assertSetAsideCleaned checks that a run RunLanded sets aside left nothing
// behind: no client or server process, no unhealed fault, no network
// namespace, no container or network (the cells check the run they keep).
func assertSetAsideCleaned(t *testing.T, o harness.Options, out *harness.Outcome) {
	t.Helper()
	AssertNothingLeft(t, out.Dir)
	if out.NetID != "" {
		require.Empty(t, netns.Names(out.NetID), "namespaces left behind")
	}
	if o.Cluster != "docker" {
		return
	}
	b, err := os.ReadFile(filepath.Join(out.Dir, "config.json"))
	require.NoError(t, err)
	var cfg struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal(b, &cfg))
	c, n, err := docker.Leftovers(context.Background(), cfg.RunID)
	require.NoError(t, err)
	require.Zero(t, c+n, "containers or networks left")
}

// RequireKinds requires, for each kind in want, an anomaly of that kind
// in r. A double holder of a session or lease lock may show instead as a
// release told ok although the server removed nothing (the holder's key or
// node was gone: its session or lease had ended while it held the lock)
// by a client a fault struck during that hold (a pause, a partition), which
// let go before another client was granted the lock (on a busy machine the
// others come late). That is logged, and accepted.
func RequireKinds(t *testing.T, r checker.Result, h *history.History, want []string) {
	t.Helper()
	found := Kinds(r, "")
	for _, k := range want {
		if k == string(checker.KindDoubleHolder) && found[k] == 0 && lostWhileStruck(r, h) {
			t.Logf("the lost lock shows as a release ok on a session or lease the server had ended, after a fault struck its holder, not as a double holder: no other client was granted the lock before the holder let go")
			continue
		}
		require.Positive(t, found[k], "want a %s anomaly; got %v", k, found)
	}
}

// lostWhileStruck reports whether r has a release told ok although the
// server removed nothing, by a client that a fault struck between its
// acquire and that release.
func lostWhileStruck(r checker.Result, h *history.History) bool {
	for _, a := range r.Anomalies {
		if a.Kind != checker.KindReleaseOKOnExpired || !strings.Contains(a.Explanation, "the server removed nothing") || len(a.Ops) < 2 || len(a.Clients) == 0 {
			continue
		}
		acquired := int64(-1)
		for _, op := range h.Ops {
			if op.OpID == a.Ops[0] {
				acquired = op.Call
				break
			}
		}
		for _, f := range h.Faults {
			if acquired >= 0 && f.Client == a.Clients[0] && f.Start >= acquired && f.Start <= a.Start && !f.Failed {
				return true
			}
		}
	}
	return false
}
