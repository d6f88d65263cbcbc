package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/harness/harnesstest"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
)

// needDocker skips outside CI, and fails under CI, without a Docker engine
// and the local redis image; it returns the environment that makes runs use
// the local images (never a pull).
func needDocker(t *testing.T) []string { return needImages(t, docker.KindRedis) }

// needImages is needDocker for the images of kinds; the environment it
// returns names the local image of every kind, unless $LOCKTEST_IMAGE_<KIND>
// names another.
func needImages(t *testing.T, kinds ...string) []string {
	t.Helper()
	images := map[string]string{}
	var env []string
	for _, k := range docker.Kinds {
		images[k] = os.Getenv(docker.ImageEnv(k))
		if images[k] == "" {
			images[k] = docker.LocalImage(k)
		}
		env = append(env, docker.ImageEnv(k)+"="+images[k])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for _, k := range kinds {
		if err = docker.Available(ctx, k, images); err != nil {
			break
		}
	}
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("the docker backend tests need root")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err.Error())
	}
	return env
}

// kill -9 of the harness during a partition on the docker backend:
// `locktest cleanup` removes its containers, its network and the client and
// container namespace names.
func TestDockerCleanupAfterKill9(t *testing.T) {
	env := needDocker(t)
	t.Parallel()
	store, stateDir := t.TempDir(), t.TempDir()
	env = append(env, "LOCKTEST_STATE_DIR="+stateDir)
	cmd, st := startUntilFault(t, env, store, stateDir, 40*time.Second, "run", "--cluster", "docker", "--lock", "redlock",
		"--nemesis", "partition,pause-server", "--time-limit", "60s", "--ttl", "2s", "--store", store)
	require.True(t, st.Docker)
	c, n, err := docker.Leftovers(context.Background(), st.RunID)
	require.NoError(t, err)
	require.Equal(t, 5, c)
	require.Equal(t, 1, n)
	require.NotEmpty(t, netns.Names(st.NetID))
	require.NotEmpty(t, netns.Links(st.NetID), "the clients' veths on the run's bridge")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	r := run(t, env, "cleanup")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "removed network locktest-"+st.RunID)
	c, n, err = docker.Leftovers(context.Background(), st.RunID)
	require.NoError(t, err)
	require.Zero(t, c+n, "containers or networks left: %s", r.stdout)
	require.Empty(t, netns.Names(st.NetID))
	// Right after cleanup, not once the kernel gets round to it.
	require.Empty(t, netns.Links(st.NetID), "links left: %s", r.stdout)
	require.Contains(t, r.stdout, "links ("+st.NetID+"c")
	for _, p := range st.Procs {
		waitGone(t, p.PID)
	}
	r = run(t, env, "cleanup")
	require.Contains(t, r.stdout, "nothing to clean up")
}

// composeCmd is Docker's compose: the v2 plugin or the v1 program.
func composeCmd(t *testing.T) []string {
	t.Helper()
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("neither `docker compose` nor docker-compose is installed")
	}
	t.Skip("neither `docker compose` nor docker-compose is installed")
	return nil
}

var composeNets struct {
	sync.Mutex
	next int
}

// composeNet returns LOCKTEST_COMPOSE_NET=172.16.X for a stack of the
// test: a /24 no Docker network has (the file's default, 172.16.77, may be
// a user's stack; parallel stacks need one each).
func composeNet(t *testing.T) string {
	t.Helper()
	cli, err := docker.Connect(context.Background())
	require.NoError(t, err)
	defer cli.Close()
	nets, err := cli.NetworkList(context.Background(), network.ListOptions{})
	require.NoError(t, err)
	var taken []netip.Prefix
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil {
				taken = append(taken, p)
			}
		}
	}
	composeNets.Lock()
	defer composeNets.Unlock()
	for k := 0; k < 150; k++ {
		composeNets.next++
		third := 100 + (os.Getpid()+composeNets.next)%150
		p := netip.MustParsePrefix(fmt.Sprintf("172.16.%d.0/24", third))
		if !slices.ContainsFunc(taken, p.Overlaps) {
			return fmt.Sprintf("LOCKTEST_COMPOSE_NET=172.16.%d", third)
		}
	}
	t.Fatal("no free /24 in 172.16.100-249 for a compose stack")
	return ""
}

// The repository's docker-compose.yml is valid, and one profile brought up
// with the local image runs a short workload with --cluster compose, faults
// included; the stack is left running and healthy, then taken down.
func TestComposeProfile(t *testing.T) {
	env := needDocker(t)
	compose := composeCmd(t)
	t.Parallel()
	file, err := filepath.Abs("../../docker-compose.yml")
	require.NoError(t, err)
	project := "locktest-test-" + time.Now().Format("150405")
	env = append(env, composeNet(t))
	dc := func(args ...string) {
		t.Helper()
		argv := append(append(append([]string{}, compose[1:]...), "-f", file, "-p", project), args...)
		cmd := exec.Command(compose[0], argv...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%v: %s", argv, out)
	}
	dc("config", "-q")
	dc("--profile", "redlock", "config", "-q")
	dc("--profile", "redis", "up", "-d")
	t.Cleanup(func() { dc("--profile", "redis", "down", "--volumes") })

	store := t.TempDir()
	r := run(t, append(env, docker.ComposeProjectEnv+"="+project), "run", "--cluster", "compose", "--lock", "redis-lua",
		"--nemesis", "pause-server,partition", "--time-limit", "6s", "--store", store, "--quiet")
	require.Contains(t, []int{0, 1, 3}, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "pause-server")
	// A clock fault cannot be added to a running stack: a usage error.
	r = run(t, env, "run", "--cluster", "compose", "--lock", "redis-lua", "--nemesis", "clock", "--store", store)
	require.Equal(t, 2, r.code, r.stderr)

	// kill -9 of the harness while the stack is paused or partitioned:
	// cleanup thaws it and clears the rules in its namespace.
	stateDir := t.TempDir()
	cenv := append(env, docker.ComposeProjectEnv+"="+project, "LOCKTEST_STATE_DIR="+stateDir)
	cmd, st := startUntilFault(t, cenv, store, stateDir, 30*time.Second, "run", "--cluster", "compose", "--lock", "redis-lua",
		"--nemesis", "pause-server,partition", "--param", "partition=isolate-holder", "--time-limit", "60s", "--store", store, "--quiet")
	require.NotEmpty(t, st.NetID)
	require.NotEmpty(t, netns.Links(st.NetID), "the clients' veths on the stack's bridge")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	r = run(t, cenv, "cleanup")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "cleared partition rules")
	// The veths plugged into the user's bridge go with the cleanup.
	require.Empty(t, netns.Links(st.NetID), "links left: %s", r.stdout)
	require.Empty(t, netns.Names(st.NetID))
	cli, err := docker.Connect(context.Background())
	require.NoError(t, err)
	defer cli.Close()
	info, err := cli.ContainerInspect(context.Background(), project+"_redis_1")
	if err != nil { // compose v2 names containers with dashes
		info, err = cli.ContainerInspect(context.Background(), project+"-redis-1")
	}
	require.NoError(t, err)
	require.True(t, info.State.Running && !info.State.Paused, "state %+v", info.State)
	out, err := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(info.State.Pid)+"/ns/net", "iptables-save").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "DROP")
}

// The profiles of the other topologies, brought up with the local images:
// --cluster compose attaches to them and runs their faults (failover on the
// replicated ones: the harness sets up the replication of mysql-replicated
// itself, and a second run attaches to a stack the first failed over).
func TestComposeTopologies(t *testing.T) {
	compose := composeCmd(t)
	t.Parallel()
	file, err := filepath.Abs("../../docker-compose.yml")
	require.NoError(t, err)
	cases := []struct {
		profile, kind string
		limit         string // --time-limit of each run
		runs          [][]string
	}{
		{"etcd3", docker.KindEtcd, "8s", [][]string{{"--lock", "etcd", "--nemesis", "pause-server,kill,partition", "--param", "kill=leader"}}},
		// Redlock's kill strikes just enough of the granting servers
		// (3 of 5 when all granted) at once: restarted together, they
		// keep their addresses.
		// 12 s: on a busy machine Redlock's first grants come late
		// (slow servers miss the per-node timeout), and the kill
		// waits for one; the sentinel stack takes longer anyway.
		{"redlock", docker.KindRedis, "12s", [][]string{{"--lock", "redlock", "--nemesis", "kill"}}},
		{"sentinel", docker.KindRedis, "8s", [][]string{
			{"--lock", "redis-sentinel", "--nemesis", "failover", "--ttl", "6s", "--hold", "3s..4s"},
			{"--lock", "redis-sentinel", "--nemesis", "pause-server"}}},
		{"mysql-replicated", docker.KindMariaDB, "8s", [][]string{
			{"--lock", "mysql-for-update", "--topology", "mysql-replicated", "--nemesis", "failover", "--hold", "800ms..1200ms"},
			{"--lock", "mysql-for-update", "--topology", "mysql-replicated", "--nemesis", "kill"}}},
	}
	for _, tc := range cases {
		t.Run(tc.profile, func(t *testing.T) {
			env := needImages(t, tc.kind)
			t.Parallel()
			env = append(env, composeNet(t))
			project := fmt.Sprintf("locktest-test-%s-%d", strings.ReplaceAll(tc.profile, "-", ""), time.Now().UnixNano()%100000)
			dc := func(args ...string) {
				t.Helper()
				argv := append(append(append([]string{}, compose[1:]...), "-f", file, "-p", project, "--profile", tc.profile), args...)
				cmd := exec.Command(compose[0], argv...)
				cmd.Env = append(os.Environ(), env...)
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "%v: %s", argv, out)
			}
			t0 := time.Now()
			dc("up", "-d")
			t.Cleanup(func() { dc("down", "--volumes") })
			t.Logf("%s: compose up -d in %s", tc.profile, time.Since(t0).Round(100*time.Millisecond))
			store := t.TempDir()
			for _, args := range tc.runs {
				t0 = time.Now()
				r := run(t, append(env, docker.ComposeProjectEnv+"="+project),
					append([]string{"run", "--cluster", "compose", "--time-limit", tc.limit, "--store", store, "--quiet", "--seed", "3"}, args...)...)
				require.Contains(t, []int{0, 1, 3}, r.code, r.stdout+r.stderr)
				h, err := history.Load(filepath.Join(store, "latest", "history.jsonl"))
				require.NoError(t, err)
				if len(h.Faults) == 0 {
					// A fault strikes after a grant (and kill only while
					// a client holds the lock): on a busy machine a run
					// may see none in time. Such a run proves nothing
					// and must say so.
					res, err := reports.ReadResultsJSON(filepath.Join(store, "latest", "results.json"))
					require.NoError(t, err)
					require.Equal(t, checker.Inconclusive, res.Verdict, "no fault in %v: %s", args, res.Why)
					require.Equal(t, 3, r.code, "no fault in %v", args)
					require.Contains(t, res.Why, "never injected a fault")
					t.Logf("%s %v: exit %d in %s, no fault (%d successful acquires): %s", tc.profile, args, r.code, time.Since(t0).Round(100*time.Millisecond), res.Counts.AcquiresOK, res.Why)
					continue
				}
				for _, f := range h.Faults {
					require.NotEqual(t, history.Never, f.End, "fault %s on %s never healed", f.Name, f.Target)
					require.NotContains(t, f.Detail, "failed", "%s on %s", f.Name, f.Target)
				}
				if tc.profile == "redlock" {
					requireRedlockKills(t, h, 5)
				}
				if slices.Contains(args, "failover") {
					// Every scheme here is unsafe under a failover: a
					// failover run is never safe, and inconclusive only
					// when the history shows that no failover could give
					// the lock away twice (a busy machine).
					res, err := reports.ReadResultsJSON(filepath.Join(store, "latest", "results.json"))
					require.NoError(t, err)
					require.NotEqual(t, checker.Safe, res.Verdict, "%v: %s", args, res.Why)
					if res.Verdict == checker.Inconclusive {
						require.True(t, harnesstest.MissedFailover(*res, h, time.Duration(h.Info.TTLMillis)*time.Millisecond), "%v: %s", args, res.Why)
						t.Logf("%s %v: inconclusive, as the history shows: %s", tc.profile, args, res.Why)
					}
				}
				t.Logf("%s %v: exit %d in %s, %d faults", tc.profile, args, r.code, time.Since(t0).Round(100*time.Millisecond), len(h.Faults))
			}
		})
	}
}

// requireRedlockKills checks each kill of a Redlock run against the grant
// it struck after, as the run recorded it: a kill takes just enough of the
// servers that granted a current holder's lock for another client to win
// a majority once they come back empty (3 of 5 when all 5 granted, 1 when
// a bare majority did), and one server when no holder's grant named any.
// Under load slow servers miss Redlock's per-node timeout and grants have
// fewer granters, so the count follows the grant, not an idle machine's 5.
func requireRedlockKills(t *testing.T, h *history.History, servers int) {
	t.Helper()
	kills, matched := 0, 0
	for _, f := range h.Faults {
		if f.Name != "kill" {
			continue
		}
		kills++
		killed := len(strings.Split(f.Target, ","))
		want := map[int]bool{}
		for _, g := range holderGrants(h, f.Start) {
			if k := max(1, servers/2+1-(servers-g)); k <= g {
				want[k] = true
			}
		}
		if len(want) == 0 {
			want[1] = true
		} else {
			matched++
		}
		require.True(t, want[killed], "kill of %s at %d: %d servers, want one of %v (the holders' grants then)", f.Target, f.Start, killed, want)
	}
	require.Positive(t, kills, "no kill")
	t.Logf("%d kills, %d of them after a holder's grant", kills, matched)
}

// holderGrants returns how many servers granted each lock a client held at
// time at (its acquire returned before, its release had not returned 200 ms
// before: the kill picks its targets a moment before it records its start).
func holderGrants(h *history.History, at int64) []int {
	const slack = int64(200 * time.Millisecond)
	var out []int
	for i, op := range h.Ops {
		if op.Op != history.Acquire || op.Type != history.OK || len(op.Nodes) == 0 || op.Return > at {
			continue
		}
		held := true
		for _, next := range h.Ops[i+1:] {
			if next.Client == op.Client && next.Op == history.Release {
				held = next.Return >= at-slack
				break
			}
		}
		if held {
			out = append(out, len(op.Nodes))
		}
	}
	return out
}

// doctor says whether a Docker engine answers, where, and which images of
// each kind it has (a missing engine is a note, not a failure).
func TestDockerDoctor(t *testing.T) {
	env := needDocker(t)
	r := run(t, env, "doctor")
	require.Regexp(t, `(?m)^ok +docker engine +\S+, Docker \S+ \((DOCKER_HOST unset|DOCKER_HOST=\S+)\)$`, r.stdout)
	require.Regexp(t, `(?m)^ok +compose +(docker compose|docker-compose) `, r.stdout)
	// The tests' environment names the local images: runs use them.
	require.Regexp(t, `(?m)^ok +image redis +locktest/redis:bookworm \(local build\) present, redis:7 \(official\) (present|missing); runs use locktest/redis:bookworm \(LOCKTEST_IMAGE_REDIS\)$`, r.stdout)
	for _, k := range docker.Kinds {
		require.Contains(t, r.stdout, "image "+k+" ")
	}
	r = run(t, append(env, "DOCKER_HOST=tcp://127.0.0.1:1"), "doctor")
	require.Contains(t, r.stdout, "note     docker engine    none answers at tcp://127.0.0.1:1 (DOCKER_HOST=tcp://127.0.0.1:1): --cluster docker and compose cannot run")
	require.NotContains(t, r.stdout, "image redis")
}
