package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/proxy"
	"github.com/locktest/locktest/clusters/recipe"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/protocol"
	"github.com/locktest/locktest/workloads"
)

// Run runs one cell. ctx is the interrupt: when it is done the run heals its
// faults, stops everything, still checks and writes what it recorded, and
// returns with Interrupted set.
//
// It reads as its phases: validate, prepare (the run directory), start the
// cluster, probe the client program (--client-cmd), drive the workload and
// the faults side by side, finish (check and report).
func Run(ctx context.Context, o Options) (*Outcome, error) {
	p, err := o.Validate()
	if err != nil {
		return nil, err
	}
	r := &run{o: o, plan: p}
	defer r.cleanup()
	if err := r.prepare(); err != nil {
		return nil, err
	}
	if err := r.startCluster(ctx); err != nil {
		return nil, err
	}
	if err := r.probeClient(); err != nil {
		return nil, err
	}
	d, err := r.drive(ctx)
	if err != nil {
		return d.outcome, err
	}
	return r.finish(d)
}

// run is one run between its phases: what each phase made that the next
// ones use, and what cleanup undoes.
type run struct {
	o    Options
	plan Plan
	out  io.Writer

	started time.Time
	seq     int64
	runID   string
	dir     string
	sized   string // the line saying the run was sized for its faults, "" if not
	tracker *runstate.Tracker

	cl      clusters.Cluster
	network *netns.Net
	netID   string // the run's own namespaces (local backend), "" without
	startup time.Duration
	poolDir string
	reused  bool

	argv  []string
	hello protocol.Hello

	// undo are the cleanups, run last-registered first.
	undo []func()
}

// driven is what the drive phase leaves to finish.
type driven struct {
	detected    *Detection
	interrupted bool
	outcome     *Outcome // the outcome to return with an aborted run's error
}

func (r *run) defer_(f func()) { r.undo = append(r.undo, f) }

func (r *run) cleanup() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

func (r *run) say(format string, a ...any) {
	if !r.o.Quiet {
		fmt.Fprintf(r.out, format+"\n", a...)
	}
}

// prepare sizes the run for its faults, makes the run directory and
// writes config.json.
func (r *run) prepare() error {
	o, p := &r.o, r.plan
	r.out = o.Out
	if r.out == nil {
		r.out = os.Stdout
	}
	if o.SizeForFaults {
		if sz, ok := FaultSizing(p.Backend.Name, p.Topology, p.Names, p.Scheme.Traits); ok {
			ttl := ""
			if sz.TTL > 0 {
				o.TTL, ttl = sz.TTL, fmt.Sprintf("--ttl %s ", sz.TTL)
			}
			o.Hold = sz.Hold
			r.sized = fmt.Sprintf("sized for %s on %s: %s--hold %s..%s (%s; set --ttl or --hold to choose)",
				strings.Join(p.Names, ","), p.Topology, ttl, sz.Hold.Min, sz.Hold.Max, sz.Why)
		}
	}
	r.started = time.Now()
	var err error
	if r.dir, err = newRunDir(o.Store, p.Scheme.Name, strings.Join(p.Names, "+"), r.started); err != nil {
		return err
	}
	// Unique per run, even for runs a process starts in the same instant.
	r.seq = runSeq.Add(1)
	r.runID = "lt" + r.started.Format("150405") + fmt.Sprintf("%04x%02x", os.Getpid()&0xffff, r.seq&0xff)
	if r.tracker, err = runstate.Open(r.runID, r.dir); err != nil {
		return err
	}
	r.defer_(func() { r.tracker.Close() })
	if err := os.MkdirAll(filepath.Join(r.dir, "clients"), 0o755); err != nil {
		return err
	}
	s := p.Scheme
	if err := writeJSON(filepath.Join(r.dir, "config.json"), map[string]any{
		"options": o, "run_id": r.runID, "version": Version, "started": r.started.Format(time.RFC3339Nano),
		"scheme":  map[string]any{"name": s.Name, "topology": p.Topology, "lease": s.Lease, "fencing": s.Fencing, "reentrant": s.Reentrant},
		"nemeses": p.Names,
	}); err != nil {
		return err
	}
	r.say("locktest %s: lock %s, nemesis %s, %d clients, %s, seed %d", Version, s.Name, strings.Join(p.Names, ","), o.Clients, o.TimeLimit, o.Seed)
	r.say("run directory: %s", r.dir)
	if r.sized != "" {
		r.say("%s", r.sized)
	}
	if p.Replay != nil {
		r.say("replaying %d faults from %s (--schedule)", len(p.Replay.Faults), p.Replay.ReplayedFrom)
	}
	return nil
}

// startCluster starts the servers on the plan's backend (or borrows the
// pool's), with the run's network when its faults need one.
func (r *run) startCluster(ctx context.Context) error {
	o, p := r.o, r.plan
	t0 := time.Now()
	// Servers run with other working directories: every path they get is
	// absolute (a relative clock-shim file shifted nothing).
	absDir, err := filepath.Abs(r.dir)
	if err != nil {
		return err
	}
	spec := clusters.Spec{Topology: p.Topology, Dir: absDir, Tracker: r.tracker, Params: o.Params, ClockShim: needsClockShim(p.Nemeses), RunID: r.runID}
	backend := r.backend()
	pooled := o.Pool.covers(o)
	if pooled {
		backend = o.Pool.backend(o, p.Names)
	}
	if err := r.makeNetwork(&spec, pooled); err != nil {
		return err
	}
	cl, err := backend.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("start %s cluster: %w", p.Topology, err)
	}
	r.cl = cl
	if nw, ok := clusters.As[clusters.Networked](cl); ok && nw.Net() != nil {
		r.network = nw.Net() // closed by cl.Stop
	}
	r.defer_(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = cl.Stop(sctx)
	})
	r.startup = time.Since(t0)
	if r.poolDir, r.reused = pooledRun(cl); r.reused {
		r.startup = 0
	}
	r.say("cluster %s up in %s: %s", p.Topology, r.startup.Round(time.Millisecond), strings.Join(cl.Addrs(), " "))
	return nil
}

// backend is the plan's backend, ready to start a cluster.
func (r *run) backend() clusters.Backend {
	switch r.plan.Backend.Name {
	case clusters.Docker:
		r.tracker.SetDocker(os.Getenv("DOCKER_HOST"))
		return docker.Backend{Images: r.o.Images}
	case clusters.Compose:
		return docker.Compose{}
	}
	return local.Backend{}
}

// makeNetwork gives the run its network when its faults need one: the
// container backends bring their own (clusters.Networked) under spec's
// NetID; on the local backend the run makes its namespaces, unless a
// pooled cluster has them already.
func (r *run) makeNetwork(spec *clusters.Spec, pooled bool) error {
	if !nemesis.NeedsNet(r.plan.Nemeses, r.o.Params) {
		return nil
	}
	if r.plan.Backend.Name != clusters.Local {
		spec.NetID = netns.Prefix + fmt.Sprintf("%x", r.started.UnixNano()%0xffffff) + fmt.Sprintf("%x", os.Getpid()%0xfff)
		r.tracker.SetNet(spec.NetID)
		return nil
	}
	if pooled {
		return nil
	}
	r.netID = netns.Prefix + fmt.Sprintf("%x%x%02x", r.started.UnixNano()%0xffffff, os.Getpid()%0xfff, r.seq&0xff)
	r.tracker.SetNet(r.netID)
	network, err := netns.New(r.netID)
	if err != nil {
		return err
	}
	r.network, spec.Net = network, network
	// Runs after the cluster and the clients are stopped.
	r.defer_(func() {
		_ = network.Heal(context.Background())
		_ = network.Close()
	})
	return nil
}

// probeClient sets the client command and hello, and for --client-cmd
// starts the user's program once: it must start at all, and its ready
// message says what its lock promises, which decides whether the run's
// faults can matter to it (matrix.Applicable, as for a built-in scheme).
func (r *run) probeClient() error {
	o := r.o
	scheme := &r.plan.Scheme
	r.argv = o.ClientArgv
	if o.ClientCmd != "" {
		// exec: the process the harness pauses and kills is the user's
		// program itself, not a shell around it.
		r.argv = []string{"sh", "-c", "exec " + o.ClientCmd}
	}
	if r.argv == nil {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		r.argv = []string{exe, "worker"}
	}
	r.hello = protocol.Hello{
		Lock: scheme.Name, Servers: r.cl.Addrs(), Key: lockKey(r.cl, r.runID), TTLMillis: o.TTL.Milliseconds(),
		Fence: o.Fence, Wait: o.Wait, WaitTimeoutMs: o.WaitTimeout.Milliseconds(),
		OpTimeoutMs: o.OpTimeout.Milliseconds(), Seed: o.Seed, Params: o.Params,
	}
	if o.ClientCmd == "" {
		return nil
	}
	probeArgv := r.argv
	if r.network != nil {
		h, err := r.network.AddHost("probe")
		if err != nil {
			return err
		}
		probeArgv = h.Command(r.argv...)
	}
	ready, err := workloads.Probe(probeArgv, r.hello, filepath.Join(r.dir, "clients", "probe.stderr"), 10*time.Second)
	if err != nil {
		return ClientError{fmt.Errorf("--client-cmd %q: %w", o.ClientCmd, err)}
	}
	if li := ready.Lock; li != nil {
		scheme.Traits = li.Traits
		if li.Name != "" {
			scheme.Summary = li.Name
		}
	}
	if o.Fence && !scheme.Fencing {
		return ClientError{fmt.Errorf("--fence: the client program's lock (%s) hands out no fencing tokens (its ready message says fencing: false)", scheme.Name)}
	}
	// Before anything is recorded: a fault that cannot matter to it is
	// refused as for a built-in scheme.
	if a := matrix.Applicable(r.plan.Cell(o.Params), r.plan.Machine); a.Status != matrix.Applies {
		return UsageError{a.Err}
	}
	r.say("client program: %s (lease %v, fencing %v, reentrant %v)", orDefault(scheme.Summary, o.ClientCmd), scheme.Lease, scheme.Fencing, scheme.Reentrant)
	return nil
}

// runInfo is the history's header.
func (r *run) runInfo(base int64) *history.RunInfo {
	o, s := r.o, r.plan.Scheme
	info := &history.RunInfo{
		FormatVersion: history.FormatVersion, Lock: s.Name, Nemeses: r.plan.Names, Seed: o.Seed,
		Clients: o.Clients, Traits: s.Traits, Fence: o.Fence, Fencing: s.Fencing && o.Fence, Wait: o.Wait,
		TimeLimitMs: o.TimeLimit.Milliseconds(), StartedAt: r.started.Format(time.RFC3339), Cluster: o.Cluster,
		Topology: r.plan.Topology, Version: Version, Servers: r.cl.Versions(), Command: o.Command,
		DeadlockMs: (2*o.TTL + time.Second).Milliseconds(), BaseMonotonic: base,
		ReadWrite: s.ReadWrite, StartupMillis: r.startup.Milliseconds(), ClusterReused: r.reused,
	}
	if r.plan.Replay != nil {
		info.ReplayedFrom = r.plan.Replay.ReplayedFrom
	}
	if s.Lease {
		info.TTLMillis = o.TTL.Milliseconds()
	}
	if s.Session && !s.Renews && strings.HasPrefix(info.Topology, "mysql") {
		if set, err := recipe.MySQLSettingsFrom(o.Params); err == nil {
			info.IdleTimeoutMillis = int64(set.WaitTimeout) * 1000
		}
	}
	if o.Wait {
		// A blocking acquire hides failed tries inside one operation.
		info.DeadlockMs += o.WaitTimeout.Milliseconds()
	}
	if o.ClientCmd == "" {
		if m, err := locks.MirrorOf(s.Name, o.Params); err == nil {
			info.Mirrors = &m
		}
	}
	return info
}

// drive records the history while the clients and the faults run side by
// side until the time limit, the interrupt, the online checker's
// certainty (--stop-early) or a failed fault; an error is an aborted run.
func (r *run) drive(ctx context.Context) (driven, error) {
	o := r.o
	base := history.Monotonic()
	rec, err := history.Create(filepath.Join(r.dir, "history.jsonl"), base, false)
	if err != nil {
		return driven{}, err
	}
	defer rec.Close()
	info := r.runInfo(base)
	rec.RecordAt(history.Event{Type: history.Run, Info: info}, 0)

	links := r.makeProxies()
	wl, procs, err := r.startClients(rec, links)
	env := r.faultEnv(rec, wl, links)
	if err != nil {
		rec.Record(history.Event{Type: history.RunEnd, Detail: "harness error: " + err.Error()}, nil)
		return driven{}, errors.Join(err, r.writeSchedule(env))
	}
	r.say("%d client processes started; running for %s", len(procs), o.TimeLimit)

	stop, stopNow := context.WithTimeout(ctx, o.TimeLimit)
	defer stopNow()
	// The online checker: the first violation as soon as it is certain,
	// and with StopEarly the end of the run there.
	var stoppedEarly atomic.Bool
	det := detect(rec, *info, func() {
		// In a fenced run a lock-level violation may still be contained
		// by the resource (a safe verdict): only the final check tells.
		if o.StopEarly && !o.Fence {
			stoppedEarly.Store(true)
			stopNow()
		}
	})
	wlErr, nErr := r.sideBySide(ctx, stop, stopNow, rec, wl, procs, env)
	if err := r.writeSchedule(env); err != nil {
		nErr = errors.Join(nErr, fmt.Errorf("write %s: %w", nemesis.ScheduleFile, err))
	}
	d := driven{detected: det.finish(), interrupted: ctx.Err() != nil}
	endDetail := "time limit"
	switch {
	case stoppedEarly.Load() && wlErr == nil && nErr == nil && !d.interrupted:
		endDetail = history.EndedEarly
		d.detected.Stopped = true
	case d.interrupted:
		endDetail = history.EndedInterrupted
	case wlErr != nil || nErr != nil:
		endDetail = "harness error: " + errors.Join(wlErr, nErr).Error()
	}
	rec.Record(history.Event{Type: history.RunEnd, Detail: endDetail}, nil)
	if err := rec.Close(); err != nil {
		return driven{}, err
	}
	if (wlErr != nil || nErr != nil) && !d.interrupted {
		return driven{outcome: &Outcome{Dir: r.dir}}, fmt.Errorf("run aborted (history kept in %s): %w", r.dir, errors.Join(wlErr, nErr))
	}
	return d, nil
}

// startClients starts the run's client processes, recording into rec.
func (r *run) startClients(rec *history.Recorder, links *proxy.Set) (*workloads.Runner, []*workloads.Process, error) {
	o := r.o
	wl := workloads.NewRunner(workloads.Config{
		Clients: o.Clients, Argv: r.argv, Hello: r.hello,
		Hold: o.Hold, Think: o.Think, Seed: o.Seed, Dir: r.dir,
		ReplyLimit: replyLimit(o), StartLimit: 10 * time.Second,
		ClientHost: proxiedHost(r.network, links),
		Tracker:    r.tracker, Recorder: rec, Resource: workloads.NewResource(0, o.Fence),
		Reentrant: r.plan.Scheme.Reentrant, ReadWrite: r.plan.Scheme.ReadWrite,
	})
	procs, err := wl.Start()
	return wl, procs, err
}

// faultEnv is what the run's faults act on: its cluster, its clients
// (wl), its link proxies (links, nil without), the faults' settings and,
// in a replay, the schedule replayed (r.plan.Replay).
func (r *run) faultEnv(rec *history.Recorder, wl *workloads.Runner, links *proxy.Set) *nemesis.Env {
	o := r.o
	return &nemesis.Env{Recorder: rec, Cluster: r.cl, Workload: wl, TTL: o.TTL, Seed: o.Seed, Net: r.network, Params: o.Params,
		Settings: r.plan.Settings, Links: links, Replay: r.plan.Replay, Traits: r.plan.Scheme.Traits,
		Wait: o.Wait} // with --wait, pause freezes waiters too (locks.PointWaiting)
}

// sideBySide runs the workload, the faults and the progress lines side by
// side until stop (the time limit, or stopNow): the first error (a fault
// that failed, a client that misbehaved) ends the others at once, and the
// run is aborted; the workload's end ends the faults. ctx is the
// interrupt. It returns both errors, for the record.
func (r *run) sideBySide(ctx, stop context.Context, stopNow func(), rec *history.Recorder, wl *workloads.Runner, procs []*workloads.Process, env *nemesis.Env) (wlErr, nErr error) {
	o := r.o
	g, gctx := errgroup.WithContext(stop)
	g.Go(func() error {
		nErr = nemesis.RunAll(gctx, env, r.plan.Nemeses)
		return nErr
	})
	g.Go(func() error {
		defer stopNow()
		wlErr = wl.Run(ctx, gctx, procs)
		return wlErr
	})
	if !o.Quiet {
		g.Go(func() error { progress(gctx, r.out, rec, o.TimeLimit); return nil })
	}
	_ = g.Wait() // wlErr and nErr, both
	return wlErr, nErr
}

// finish checks the history, writes the reports and says what the online
// checker saw. The check ends early at a Ctrl-C or SIGTERM (the next one
// after a first that ended the workload).
func (r *run) finish(d driven) (*Outcome, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return r.finishContext(ctx, d)
}

// finishContext is finish with its check stopped when ctx is done: a run
// whose check was stopped is an interrupted run (exit 130; a campaign
// runs its seed again on --resume), whatever its workload did.
func (r *run) finishContext(ctx context.Context, d driven) (*Outcome, error) {
	if d.detected != nil {
		stopped := ""
		if d.detected.Stopped {
			stopped = "; the run stopped there (--stop-early)"
		}
		r.say("online checker: a %s that began at %.2fs was certain at %.2fs%s", d.detected.Kind, d.detected.ViolationAt.Seconds(), d.detected.CertainAt.Seconds(), stopped)
	}
	res, err := checkDir(ctx, r.dir, r.out, r.o.Quiet, r.o.Quiet)
	if err != nil {
		return nil, err
	}
	if !d.interrupted {
		keepCluster(r.cl)
	}
	return &Outcome{Dir: r.dir, Result: *res, Interrupted: d.interrupted || res.CheckInterrupted, Startup: r.startup, NetID: r.netID,
		Detected: d.detected, Cluster: r.poolDir, Reused: r.reused}, nil
}
