package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/recipe"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/runstate"
)

// procNode is one server process of the local backend, running inside its
// namespace when it has one: its name, address and process handling
// (pause, resume, kill, stop). The ensembles (ZooKeeper, etcd) launch it
// as it is, with the command line and readiness given to it; redisNode
// and mysqlNode embed it, build their own command lines (a port chosen at
// each start, the clock shim) and start them through spawn.
type procNode struct {
	name    string
	dir     string
	tracker *runstate.Tracker
	host    *netns.Host // nil: loopback
	argv    []string    // the server's command line (outside the namespace)
	env     []string    // extra environment
	logName string      // log file under dir
	// stopLimit is how long stop waits after SIGTERM before SIGKILL (3 s
	// when 0).
	stopLimit time.Duration

	mu     sync.Mutex
	addr   string // client address (an ensemble's is fixed for its life)
	cmd    *exec.Cmd
	exited chan struct{}
}

func (n *procNode) Name() string { return n.name }

func (n *procNode) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addr
}

// Host returns the node's namespace, or nil on loopback.
func (n *procNode) Host() *netns.Host { return n.host }

func (n *procNode) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// dial opens a TCP connection to addr from the node's namespace (never
// from the root namespace to a namespace address: it would leave the
// machine).
func (n *procNode) dial(addr string, timeout time.Duration) (net.Conn, error) {
	return hostDial(n.host)(addr, timeout)
}

// hostDial dials from inside host's namespace, from the harness's own when
// host is nil (loopback).
func hostDial(host *netns.Host) recipe.Dial {
	if host != nil {
		return host.Dial
	}
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		return net.DialTimeout("tcp", addr, timeout)
	}
}

// probe is a node's Probe (clusters.Prober): its process runs and is not
// stopped, and answers (ask: its own protocol's probe, from its recipe).
func probe(name string, pid int, ask func() error) error {
	if pid == 0 {
		return fmt.Errorf("%s is down", name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return fmt.Errorf("%s (pid %d) is gone", name, pid)
	}
	if s := string(b); strings.LastIndexByte(s, ')') > 0 {
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] != "S" && f[0] != "R" && f[0] != "D" {
			return fmt.Errorf("%s (pid %d) is in state %s", name, pid, f[0])
		}
	}
	if err := ask(); err != nil {
		var reply *recipe.ReplyError
		if errors.As(err, &reply) {
			return err // names the node already
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// launch starts the process; it does not wait for readiness.
func (n *procNode) launch() error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	argv := n.argv
	if n.host != nil {
		argv = n.host.Command(argv...)
	}
	if _, _, err := n.spawn(spawn{argv: argv, env: n.env, dir: n.dir, log: filepath.Join(n.dir, n.logName)}); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	return nil
}

// spawn is how a node's server process is started.
type spawn struct {
	argv []string // the command line, already in the node's namespace
	env  []string // added to the harness's environment
	dir  string   // its working directory, "" for the harness's
	log  string   // the file its output is appended to
	// clockFile is the clock shim's offset file, "" without the shim:
	// the shared memory libfaketime leaves behind is tracked, and removed
	// once the process exits.
	clockFile string
	// started, when not nil, sets the node's own fields of the new
	// process (its address, its port) under n.mu, with n.cmd and
	// n.exited.
	started func()
}

// spawn starts the process sp describes, in its own process group and
// killed with the harness, and records it: the tracker, n.cmd and
// n.exited, which it returns too (closed once the process has exited). It
// does not wait for readiness.
func (n *procNode) spawn(sp spawn) (*exec.Cmd, chan struct{}, error) {
	logf, err := os.OpenFile(sp.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(sp.argv[0], sp.argv[1:]...)
	cmd.Dir = sp.dir
	cmd.Env = append(os.Environ(), sp.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	exited := make(chan struct{})
	pid := cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		logf.Close()
		if sp.clockFile != "" {
			// libfaketime leaves its shared memory behind, even on a
			// clean shutdown.
			removeFaketimeShm(pid)
		}
		close(exited)
	}()
	if sp.clockFile != "" {
		for _, p := range faketimeShm(pid) {
			n.tracker.AddPath(p)
		}
	}
	n.tracker.AddProc(pid, n.name)
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	if sp.started != nil {
		sp.started()
	}
	n.mu.Unlock()
	return cmd, exited, nil
}

// waitReady polls ready every 50 ms until it returns nil, the process
// exits, ctx is done or limit passes.
func (n *procNode) waitReady(ctx context.Context, limit time.Duration, ready func() error) error {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	deadline := time.Now().Add(limit)
	var last error
	for {
		if last = ready(); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %s", n.name, lastLines(filepath.Join(n.dir, n.logName), 3))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s: %w", n.name, limit, last)
		}
	}
}

// relaunch starts the server again after a kill, with its data directory
// as it was, and returns once ready says it serves: up to three attempts,
// 300 ms apart (the ports free).
func (n *procNode) relaunch(ctx context.Context, ready func() error) error {
	if n.PID() != 0 {
		return fmt.Errorf("%s is still running", n.name)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = n.launch(); err != nil {
			continue
		}
		if err = n.waitReady(ctx, 30*time.Second, ready); err == nil {
			return nil
		}
		n.kill()
		time.Sleep(300 * time.Millisecond) // the ports free
	}
	return fmt.Errorf("restart %s: %w", n.name, err)
}

// Pause freezes the server and returns once every thread is stopped.
func (n *procNode) Pause() error {
	pid := n.PID()
	if pid == 0 {
		return fmt.Errorf("%s is not running", n.name)
	}
	if err := proc.Stop(pid); err != nil {
		return fmt.Errorf("pause %s: %w", n.name, err)
	}
	return nil
}

// Resume continues a paused server.
func (n *procNode) Resume() error {
	pid := n.PID()
	if pid == 0 {
		return fmt.Errorf("%s is not running", n.name)
	}
	if err := proc.Cont(pid); err != nil {
		return fmt.Errorf("resume %s: %w", n.name, err)
	}
	return nil
}

// Kill sends SIGKILL and waits until the process is gone.
func (n *procNode) Kill() error {
	if n.PID() == 0 {
		return fmt.Errorf("%s is not running", n.name)
	}
	n.kill()
	return nil
}

func (n *procNode) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	<-exited
	n.tracker.RemoveProc(cmd.Process.Pid)
}

// stop resumes the server if paused, sends SIGTERM and kills it after
// stopLimit.
func (n *procNode) stop(ctx context.Context) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(cmp.Or(n.stopLimit, 3*time.Second)):
		_ = cmd.Process.Kill()
		<-exited
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
	}
	n.tracker.RemoveProc(cmd.Process.Pid)
	return nil
}

// rss returns the process's resident memory in bytes, 0 if unknown.
func (n *procNode) rss() int64 {
	pid := n.PID()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	var size, res int64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		return 0
	}
	return res * int64(os.Getpagesize())
}

// loopbackPorts picks count free loopback ports.
func loopbackPorts(count int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < count; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// portRaceRetry starts an ensemble on loopback again, on fresh ports, when
// one of its members exited at start: loopbackPorts frees the ports it
// found before the members bind them, and another process may take one in
// between. Each attempt starts from empty server directories (the failed
// attempt's logs are kept beside them, as servers.failed-N).
func portRaceRetry(start func(context.Context, clusters.Spec) (clusters.Cluster, error)) func(context.Context, clusters.Spec) (clusters.Cluster, error) {
	return func(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
		for attempt := 1; ; attempt++ {
			c, err := start(ctx, s)
			if err == nil || s.Net != nil || attempt == 3 || ctx.Err() != nil || !strings.Contains(err.Error(), "exited at start") {
				return c, err
			}
			servers := filepath.Join(s.Dir, "servers")
			if rerr := os.Rename(servers, fmt.Sprintf("%s.failed-%d", servers, attempt)); rerr != nil && !os.IsNotExist(rerr) {
				return nil, errors.Join(err, rerr)
			}
		}
	}
}
