package docker_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/netns"
)

// needDocker skips (outside CI) or fails (CI=true) when there is no engine
// or no local redis image, and makes the backend use the local image.
func needDocker(t *testing.T) { needImage(t, docker.KindRedis) }

// testImage is the image the tests run for kind: the local one
// (scripts/build-images.sh), unless $LOCKTEST_IMAGE_<KIND> names another.
func testImage(kind string) string {
	if img := os.Getenv(docker.ImageEnv(kind)); img != "" {
		return img
	}
	return docker.LocalImage(kind)
}

// testImages are the images of every kind the tests run (never a pull).
func testImages() map[string]string {
	out := map[string]string{}
	for _, k := range docker.Kinds {
		out[k] = testImage(k)
	}
	return out
}

// needImage is needDocker for the image of kind.
func needImage(t *testing.T, kind string) {
	t.Helper()
	img := testImage(kind)
	skip := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s", why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		skip("the docker backend tests need root (the Docker socket, network namespaces)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := docker.Connect(ctx)
	if err != nil {
		skip(err.Error())
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, img); err != nil {
		skip("image " + img + " missing: build it with `sudo ./scripts/build-images.sh " + kind + "`")
	}
}

var seq atomic.Int64

// runID is a fresh run id of the harness's length (12 characters).
func runID() string {
	return fmt.Sprintf("ltt%05d%04x", time.Now().UnixMilli()%100000, (int64(os.Getpid())+seq.Add(1))&0xffff)
}

// start starts topology and removes it, and checks that nothing is left,
// when the test ends.
func start(t *testing.T, spec clusters.Spec) clusters.Cluster {
	t.Helper()
	spec.RunID = runID()
	spec.Dir = t.TempDir()
	cl, err := docker.Backend{Images: testImages()}.Start(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, cl.Stop(context.Background()))
		c, n, err := docker.Leftovers(context.Background(), spec.RunID)
		require.NoError(t, err)
		require.Zero(t, c+n, "containers or networks left")
		if spec.NetID != "" {
			require.Empty(t, netns.Names(spec.NetID))
		}
	})
	return cl
}

// do sends one inline command and returns the first reply line.
func do(t *testing.T, c net.Conn, cmd string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Write([]byte(cmd + "\r\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStartsOnTheRunsBridge(t *testing.T) {
	needDocker(t)
	cl := start(t, clusters.Spec{Topology: "redis5"})
	require.Len(t, cl.Addrs(), 5)
	for _, a := range cl.Addrs() {
		host, _, _ := net.SplitHostPort(a)
		out, err := exec.Command("ip", "route", "get", host).CombinedOutput()
		require.NoError(t, err)
		// Test traffic stays on this machine: to the run's bridge, never
		// the default route.
		require.Contains(t, string(out), " dev br-lt", "route to %s: %s", a, out)
		require.Equal(t, "+PONG", do(t, dial(t, a), "PING"))
	}
	require.Contains(t, cl.Versions()[0], "redis 7")
}

func TestUnsupportedTopology(t *testing.T) {
	_, err := docker.Backend{}.Start(context.Background(), clusters.Spec{Topology: "mysql-galera", RunID: "x"})
	require.ErrorContains(t, err, "not supported")
}

// pause-server is the cgroup freezer: replies stop, and all arrive on thaw.
func TestPauseFreezes(t *testing.T) {
	needDocker(t)
	cl := start(t, clusters.Spec{Topology: "redis"})
	n := cl.Nodes()[0]
	c := dial(t, n.Addr())
	require.Equal(t, "+PONG", do(t, c, "PING"))
	require.NoError(t, n.Pause())
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	_, err := c.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	r := bufio.NewReader(c)
	_, err = r.ReadString('\n')
	require.Error(t, err, "a frozen server answered")
	state, err := os.ReadFile(freezerState(t, n.PID()))
	if err == nil {
		require.Contains(t, string(state), "FROZEN")
	}
	require.NoError(t, n.Resume())
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+PONG", strings.TrimSpace(line), "the reply held back by the freeze")
}

// freezerState finds the freezer cgroup of pid (cgroup v1) or its
// cgroup.freeze (v2).
func freezerState(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && strings.Contains(f[1], "freezer") {
			return "/sys/fs/cgroup/freezer" + f[2] + "/freezer.state"
		}
		if len(f) == 3 && f[0] == "0" && f[1] == "" {
			return "/sys/fs/cgroup" + f[2] + "/cgroup.events"
		}
	}
	return "/nonexistent"
}

// kill + restart: same address, a new process, the data gone.
func TestKillRestartsEmpty(t *testing.T) {
	needDocker(t)
	cl := start(t, clusters.Spec{Topology: "redis"})
	n := cl.Nodes()[0]
	require.Equal(t, "+OK", do(t, dial(t, n.Addr()), "SET k v"))
	old := n.PID()
	require.NoError(t, n.Kill())
	require.Zero(t, n.PID())
	_, err := net.DialTimeout("tcp", n.Addr(), 300*time.Millisecond)
	require.Error(t, err, "a killed server accepted a connection")
	require.NoError(t, n.Restart(context.Background()))
	require.NotEqual(t, old, n.PID())
	require.Equal(t, "$-1", do(t, dial(t, n.Addr()), "GET k"))
}

// The clock shim inside the container: a jump of the offset file expires a
// key at once.
func TestClockShift(t *testing.T) {
	needDocker(t)
	cl := start(t, clusters.Spec{Topology: "redis", ClockShim: true})
	n := cl.Nodes()[0]
	c := dial(t, n.Addr())
	require.Equal(t, "+OK", do(t, c, "SET k v PX 30000"))
	require.NoError(t, n.(clusters.ClockShifter).ShiftClock(60*time.Second))
	deadline := time.Now().Add(2 * time.Second)
	for do(t, c, "GET k") != "$-1" {
		require.True(t, time.Now().Before(deadline), "the key outlived a 60 s clock jump")
		time.Sleep(50 * time.Millisecond)
	}
	now, err := n.(clusters.ClockReader).ReadClock(context.Background())
	require.NoError(t, err)
	require.InDelta(t, 60, time.Until(now).Seconds(), 1, "ReadClock tells the shifted clock")
	require.NoError(t, n.(clusters.ClockShifter).ShiftClock(0))
}

// A partition cuts a client namespace off a container and heals, with DROP
// rules inside the two namespaces only: the root namespace's firewall is
// the same before and after.
func TestPartitionCutsAndHeals(t *testing.T) {
	needDocker(t)
	netID := fmt.Sprintf("ltp%x", time.Now().UnixNano()%0xfffff)
	cl := start(t, clusters.Spec{Topology: "redis5", NetID: netID})
	before := rootRules(t) // (without Docker's own rules)
	nw := cl.(clusters.Networked).Net()
	require.NotNil(t, nw)
	client, err := nw.AddHost("client-1")
	require.NoError(t, err)
	n := cl.Nodes()[2]
	srv := n.(clusters.Hosted).Host()
	require.NotNil(t, srv)

	reach := func(addr string) error {
		c, err := client.Dial(addr, 300*time.Millisecond)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		_, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	require.NoError(t, reach(n.Addr()))
	held, err := client.Dial(n.Addr(), time.Second)
	require.NoError(t, err)
	defer held.Close()

	require.NoError(t, nw.Block(context.Background(), [][2]*netns.Host{{client, srv}}))
	require.Error(t, reach(n.Addr()), "the partition let a new connection through")
	require.NoError(t, reach(cl.Nodes()[0].Addr()), "the partition cut more than one server")
	require.Equal(t, "+PONG", do(t, dial(t, n.Addr()), "PING"), "the harness side lost the server")
	// An open connection stalls...
	_ = held.SetDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = held.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	r := bufio.NewReader(held)
	_, err = r.ReadString('\n')
	require.Error(t, err)

	// ... and resumes once healed, as do new connections. The rules also
	// survive a kill and restart of the container (a new namespace).
	require.NoError(t, n.Kill())
	require.NoError(t, n.Restart(context.Background()))
	require.Error(t, reach(n.Addr()), "the partition did not follow the restarted container")
	require.NoError(t, nw.Heal(context.Background()))
	require.NoError(t, reach(n.Addr()))
	require.Equal(t, before, rootRules(t), "the root namespace's firewall changed")
}

func rootRules(t *testing.T) [32]byte {
	t.Helper()
	out, err := exec.Command("iptables-save").Output()
	require.NoError(t, err)
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		// (Docker's engine rewrites its own chains and bridge rules
		// whenever any test, in this package or another one running
		// beside it, makes or removes a network: those are not ours.)
		docker := strings.Contains(l, "DOCKER") || strings.Contains(l, "br-") || strings.Contains(l, "docker0")
		if !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, ":") && !docker {
			keep = append(keep, l)
		}
	}
	return sha256.Sum256([]byte(strings.Join(keep, "\n")))
}
