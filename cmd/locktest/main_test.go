package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/internal/testenv"
)

var bin string

// parallelRuns is how many tests marked t.Parallel run at once unless
// -parallel says otherwise (go test's default is GOMAXPROCS). These tests
// mostly wait: on servers starting, on runs of fixed length, on faults
// and their healing; most of their CPU is the servers' and clients' own.
const parallelRuns = 3

// TestMain builds the real binary once: these tests run it as a user would.
// The tests that start real servers run side by side (t.Parallel): each has
// its own store, state directory (LOCKTEST_STATE_DIR), campaign directory
// and ports, and checks only for what its own runs left behind.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelRuns)); err != nil {
			panic(err)
		}
	}
	dir, err := os.MkdirTemp("", "locktest-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "locktest")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String()}
}

func needServer(t *testing.T) {
	t.Helper()
	testenv.Require(t, clusters.Check("redis"))
}

func TestBadInput(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unknown lock", []string{"run", "--lock", "nope"}, nil, `unknown lock "nope"`},
		{"no lock", []string{"run"}, nil, "--lock NAME or --client-cmd CMD is required"},
		{"client without topology", []string{"run", "--client-cmd", "true"}, nil, "--client-cmd needs --topology"},
		{"unknown nemesis", []string{"run", "--lock", "redis-lua", "--nemesis", "meteor"}, nil, `unknown nemesis "meteor"`},
		{"bad duration", []string{"run", "--lock", "redis-lua", "--time-limit", "soon"}, nil, `invalid argument "soon"`},
		{"bad hold", []string{"run", "--lock", "redis-lua", "--hold", "5s..1s"}, nil, "--hold"},
		{"zero clients", []string{"run", "--lock", "redis-lua", "--clients", "0"}, nil, "--clients must be at least 1"},
		{"unknown command", []string{"fly"}, nil, `unknown command "fly"`},
		{"check nothing", []string{"check", filepath.Join(store, "none")}, nil, "not a run directory"},
		{"unknown variant", []string{"run", "--lock", "etcd", "--param", "etcd-client=pre-1"}, nil, "etcd has the variants pre-11456"},
		{"variant of another scheme", []string{"run", "--lock", "redis-lua", "--param", "etcd-client=pre-11456"}, nil, "--param etcd-client applies to etcd, not to lock redis-lua"},
		{"waiting without wait", []string{"run", "--lock", "etcd", "--nemesis", "pause", "--param", "pause-at=waiting"}, nil, `has no fault point "waiting"`},
		{"negative delay", []string{"run", "--lock", "redis-lua", "--nemesis", "delay", "--param", "delay=-5ms"}, nil, `--param delay: "-5ms": want 0 < LO <= HI <= 1m`},
		{"inverted delay", []string{"run", "--lock", "redis-lua", "--nemesis", "delay", "--param", "delay=200ms..50ms"}, nil, `--param delay: "200ms..50ms"`},
		{"negative jitter", []string{"run", "--lock", "redis-lua", "--nemesis", "delay", "--param", "jitter=-1ms"}, nil, "--param jitter=-1ms"},
		{"jitter without delay", []string{"run", "--lock", "redis-lua", "--nemesis", "pause", "--param", "jitter=5ms"}, nil, "--param jitter sets the delay fault, which this run does not inject"},
		{"loss out of range", []string{"run", "--lock", "redis-lua", "--nemesis", "loss", "--param", "loss=1.5"}, nil, "--param loss"},
		{"param given twice", []string{"run", "--lock", "etcd", "--nemesis", "kill", "--param", "kill=leader", "--param", "kill=holder"}, nil, `--param kill given twice ("leader", then "holder")`},
		{"param given twice in one", []string{"run", "--lock", "etcd", "--nemesis", "kill", "--param", "kill=leader,kill=holder"}, nil, "--param kill given twice"},
		{"image given twice", []string{"run", "--cluster", "docker", "--lock", "redis-lua", "--image", "redis=a:1", "--image", "redis=b:2"}, nil, `--image redis given twice ("a:1", then "b:2")`},
		{"bench param given twice", []string{"bench", "--lock", "redis-lua", "--nemesis", "pause", "--param", "pause=1..2", "--param", "pause=2..3"}, nil, "--param pause given twice"},
		{"jitter as long as the delay", []string{"run", "--lock", "redis-lua", "--nemesis", "delay", "--param", "delay=50ms..200ms", "--param", "jitter=50ms"}, nil, "--param jitter=50ms: want less than the shortest delay (50ms, --param delay's LO)"},
		{"jitter past the default delay", []string{"run", "--lock", "redis-lua", "--nemesis", "delay", "--ttl", "1s", "--param", "jitter=2s"}, nil, "--param jitter=2s: want less than the shortest delay (1.2s"},
		{"delay on compose", []string{"run", "--lock", "redis-lua", "--nemesis", "delay", "--cluster", "compose"}, nil, "which --cluster compose does not yet"},
		{"missing server", []string{"run", "--lock", "redis-lua"}, []string{"PATH=" + t.TempDir()}, "redis-server not found: install it with `apt-get install -y redis-server`"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args[0] == "run" || args[0] == "bench" {
				args = append(args, "--store", store)
			}
			r := run(t, tc.env, args...)
			require.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			require.Len(t, lines, 1, "one clear line, got: %q", r.stderr)
			require.Contains(t, lines[0], tc.want)
			require.True(t, strings.HasPrefix(lines[0], "locktest: "))
		})
	}
	entries, _ := os.ReadDir(store)
	require.Empty(t, entries, "bad input creates no run directory")
}

func TestListAndHelp(t *testing.T) {
	r := run(t, nil, "list")
	require.Equal(t, 0, r.code)
	for _, s := range []string{"redis-setnx", "redis-setnx-expire", "redis-del", "redis-lua", "redis-lua-lenient", "pause", "pause-server", "kill", "crash-client",
		"mirrors: etcd client/v3 concurrency.Mutex", "etcd-client=pre-11456", "redisson-watchdog=pre-3.44", "redlock-clock=wall"} {
		require.Contains(t, r.stdout, s)
	}
	r = run(t, nil, "run", "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "130  interrupted")
	require.Contains(t, r.stdout, "3    inconclusive")
}

// Ctrl-C while a client is frozen: exit 130, everything resumed and
// stopped, the history kept and checkable.
func TestInterrupt(t *testing.T) {
	needServer(t)
	t.Parallel()
	store := t.TempDir()
	// A state directory of its own: the shared one also holds the records of
	// other test packages' runs, running or just ended.
	stateDir := t.TempDir()
	cmd := exec.Command(bin, "run", "--lock", "redis-lua", "--nemesis", "pause", "--time-limit", "60s", "--ttl", "2s", "--seed", "3", "--store", store)
	cmd.Env = append(os.Environ(), "LOCKTEST_STATE_DIR="+stateDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	hist := waitForFault(t, cmd, store, 30*time.Second, &out)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("no exit 30s after Ctrl-C; output:\n%s", out.String())
	}
	require.Equal(t, 130, cmd.ProcessState.ExitCode(), out.String())
	require.Contains(t, out.String(), "interrupted")

	h, err := history.Load(hist)
	require.NoError(t, err)
	require.Equal(t, "interrupted", h.Ended)
	for _, c := range h.Clients {
		require.False(t, alive(c.PID), "client %d still runs", c.ID)
	}
	for _, f := range h.Faults {
		require.NotEqual(t, history.Never, f.End, "fault %s never healed", f.Name)
	}
	noStateLeft(t, stateDir)

	r := run(t, nil, "check", filepath.Join(store, "latest"))
	require.Contains(t, []int{0, 1, 3}, r.code, r.stderr)
	require.Regexp(t, `(?m)^(SAFE|UNSAFE|INCONCLUSIVE)`, r.stdout)
}

// kill -9 of the harness in the middle of a run: its children die with it
// (parent-death signal), `locktest cleanup` removes what is left — network
// namespaces and the clock shim's shared memory included — and the next run
// starts clean.
func TestCleanupAfterKill9(t *testing.T) {
	needServer(t)
	t.Parallel()
	cases := []struct {
		name string
		args []string
		root bool
	}{
		{"during a pause", []string{"--lock", "redis-lua", "--nemesis", "pause"}, false},
		{"during a partition with shifted clocks", []string{"--lock", "redlock", "--nemesis", "partition,clock", "--param", "partition=isolate-server,split"}, true},
		// Six servers and five clients, each in its own namespace.
		{"during a partition of sentinel", []string{"--lock", "redis-sentinel", "--nemesis", "partition", "--param", "partition=isolate-server,split,bridge"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				if os.Getenv("CI") != "" {
					t.Fatal("CI runs as root")
				}
				t.Skip("needs root")
			}
			t.Parallel()
			store := t.TempDir()
			stateDir := t.TempDir()
			env := []string{"LOCKTEST_STATE_DIR=" + stateDir}
			args := append([]string{"run", "--time-limit", "60s", "--ttl", "2s", "--store", store}, tc.args...)
			cmd, st := startUntilFault(t, env, store, stateDir, 30*time.Second, args...)
			require.NotEmpty(t, st.Procs)

			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()

			r := run(t, env, "cleanup")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, "forgot run "+st.RunID)
			for _, p := range st.Procs {
				waitGone(t, p.PID)
			}
			for _, p := range st.Paths {
				require.NoFileExists(t, p)
			}
			if st.NetID != "" {
				require.Empty(t, netns.Names(st.NetID), "namespaces left")
			}
			states, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
			require.Empty(t, states)
			r = run(t, env, "cleanup")
			require.Contains(t, r.stdout, "nothing to clean up")

			// The history up to the kill is kept and can be checked.
			r = run(t, nil, "check", filepath.Join(store, "latest"))
			require.Contains(t, []int{0, 1, 3}, r.code, r.stderr)

			// A second run starts clean.
			r = run(t, env, append([]string{"run", "--time-limit", "3s", "--store", store, "--quiet"}, tc.args...)...)
			require.Contains(t, []int{0, 1, 3}, r.code, r.stdout+r.stderr)
		})
	}
}

func noStateLeft(t *testing.T, stateDir string) {
	t.Helper()
	// The run removes its own state file on every exit path but kill -9.
	matches, _ := filepath.Glob(filepath.Join(stateDir, "*"))
	for _, m := range matches {
		b, _ := os.ReadFile(m)
		var st runstate.State
		_ = json.Unmarshal(b, &st)
		t.Errorf("state file %s left by a finished run (harness pid %d, alive %v)", m, st.HostPID, alive(st.HostPID))
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		require.True(t, time.Now().Before(deadline), "pid %d still alive", pid)
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// startUntilFault starts `locktest ARGS` with env, which must record its
// run in stateDir and its history under store, and returns once a fault
// is in effect (started, not yet healed), with the run's state record.
func startUntilFault(t *testing.T, env []string, store, stateDir string, limit time.Duration, args ...string) (*exec.Cmd, runstate.State) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	require.NoError(t, cmd.Start())
	waitForFault(t, cmd, store, limit, nil)
	states, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
	require.Len(t, states, 1)
	var st runstate.State
	b, err := os.ReadFile(states[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	return cmd, st
}

// waitForFault returns, with the path of its history, once the run cmd
// started under store has a fault in effect (started, not yet healed); it
// kills cmd and fails t after limit, with out (the run's output) if given.
func waitForFault(t *testing.T, cmd *exec.Cmd, store string, limit time.Duration, out *bytes.Buffer) string {
	t.Helper()
	hist := filepath.Join(store, "latest", "history.jsonl")
	deadline := time.Now().Add(limit)
	for {
		b, _ := os.ReadFile(hist)
		if bytes.Count(b, []byte(`"fault-start"`)) > bytes.Count(b, []byte(`"fault-end"`)) {
			return hist
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			output := ""
			if out != nil {
				output = "; output:\n" + out.String()
			}
			t.Fatalf("no fault within %s%s", limit, output)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// `locktest run --quiet` prints the verdict lines and where the report
// is, not the counts, properties and anomalies of the full summary.
func TestQuietRun(t *testing.T) {
	needServer(t)
	t.Parallel()
	store := t.TempDir()
	r := run(t, nil, "run", "--lock", "redis-lua", "--nemesis", "pause", "--time-limit", "3s", "--ttl", "500ms", "--seed", "5", "--store", store, "--quiet")
	require.Contains(t, []int{0, 1, 3}, r.code, r.stdout+r.stderr)
	require.Regexp(t, `^(SAFE|UNSAFE|INCONCLUSIVE): `, r.stdout)
	require.Contains(t, r.stdout, "  lock redis-lua, nemeses pause, seed 5")
	require.Contains(t, r.stdout, "  why: ")
	require.Contains(t, r.stdout, "report: ")
	for _, not := range []string{"properties:", "\nanomalies (", "  acquires ", "\x1b["} {
		require.NotContains(t, r.stdout, not)
	}
}
