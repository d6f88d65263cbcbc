// Package harness wires one run together: cluster up, client processes and
// nemeses side by side, history recorded as it happens, then the checker and
// the reports. The CLI only turns flags into Options and calls Run.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/recipe"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/protocol"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/workloads"
)

// Version is locktest's version, written into every run.
var Version = "0.1.0-dev"

// Options are the parameters of one run.
type Options struct {
	Lock        string          `json:"lock"`
	Nemesis     string          `json:"nemesis"`
	TimeLimit   time.Duration   `json:"time_limit"`
	Clients     int             `json:"clients"`
	TTL         time.Duration   `json:"ttl"`
	Hold        workloads.Range `json:"hold"`
	Think       workloads.Range `json:"think"`
	Seed        int64           `json:"seed"`
	Fence       bool            `json:"fence"`
	Wait        bool            `json:"wait"`
	WaitTimeout time.Duration   `json:"wait_timeout"`
	OpTimeout   time.Duration   `json:"op_timeout"`
	Store       string          `json:"store"`
	Cluster     string          `json:"cluster"`
	// Topology overrides the scheme's own topology with another it runs
	// on (locks.Scheme.Topologies), e.g. mysql-replicated.
	Topology string `json:"topology,omitempty"`
	Quiet    bool   `json:"quiet"`
	// Params are scheme- and server-specific settings (--param KEY=VALUE),
	// passed to the cluster and to every client.
	Params map[string]string `json:"params,omitempty"`
	// Images overrides, per kind of server ("redis", "zookeeper", "etcd",
	// "mariadb"), the image the docker
	// backend runs (--image KIND=IMAGE; else $LOCKTEST_IMAGE_<KIND>, else
	// the official image).
	Images map[string]string `json:"images,omitempty"`
	// ClientCmd is a shell command that runs the user's own client program
	// (speaking the protocol in docs/protocol.md); --topology says which
	// servers it gets.
	ClientCmd string `json:"client_cmd,omitempty"`
	// ClientArgv runs a client process; nil means this executable's hidden
	// worker command.
	ClientArgv []string `json:"client_argv,omitempty"`
	Command    string   `json:"command,omitempty"` // the command line, for the record
	// SizeForFaults lets the run choose the TTL and hold times when a fault
	// can only matter with longer ones than the defaults (FaultSizing); set
	// when the user gave neither --ttl nor --hold.
	SizeForFaults bool `json:"size_for_faults,omitempty"`
	// StopEarly ends the workload as soon as the online checker is certain
	// of a violation (--stop-early; campaigns): the verdict cannot change
	// any more, and the rest of the run would only repeat it. Not in
	// fenced runs, where fencing may still contain the violation.
	StopEarly bool `json:"stop_early,omitempty"`
	// Out receives progress lines and the final summary (os.Stdout if nil).
	Out io.Writer `json:"-"`
	// Pool, when not nil, lends the run a started cluster (see Pool); nil
	// starts and stops one for the run.
	Pool *Pool `json:"-"`
}

// Outcome is what a run produced.
type Outcome struct {
	Dir         string
	Result      checker.Result
	Interrupted bool
	Startup     time.Duration // cluster start-up, until every server answered
	NetID       string        // prefix of the run's network namespaces, "" without
	// Detected is the first violation the online checker was certain of
	// during the run, nil if none.
	Detected *Detection
	Cluster  string // the pooled cluster's directory, "" for the run's own
	Reused   bool   // the pooled cluster was started for an earlier run: Startup is 0
}

// ClientError is a client program that misbehaves (crashes at start,
// prints garbage, never answers): a harness error, never a lock verdict.
type ClientError struct{ Err error }

func (e ClientError) Error() string { return e.Err.Error() }
func (e ClientError) Unwrap() error { return e.Err }

// runSeq numbers the runs of this process.
var runSeq atomic.Int64

// replyLimit is how long a running client may take to answer one request,
// the time it spends frozen by a fault not counted: its own deadline for the
// request, plus a blocking wait, plus slack.
func replyLimit(o Options) time.Duration {
	d := o.OpTimeout + 5*time.Second
	if o.Wait {
		d += o.WaitTimeout
	}
	return d
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// UsageError is an error in the options: exit code 2, one line.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

func usage(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// Validate checks the options and returns the scheme and nemeses they name.
func (o *Options) Validate() (locks.Scheme, []nemesis.Nemesis, []string, error) {
	s, ok := locks.Lookup(o.Lock)
	if o.ClientCmd != "" {
		if o.Topology == "" {
			return s, nil, nil, usage("--client-cmd needs --topology (the servers your client uses, e.g. redis)")
		}
		name := o.Lock
		if name == "" {
			name = "client-cmd"
		}
		// What the lock promises comes from the program's ready message;
		// until then assume a lease lock that may have tokens.
		s, ok = locks.Scheme{Name: name, Topology: o.Topology, Lease: true, Fencing: true}, true
	}
	if !ok {
		return s, nil, nil, usage("unknown lock %q (known: %s)", o.Lock, strings.Join(locks.Names(), ", "))
	}
	ns, names, err := nemesis.Parse(o.Nemesis)
	if err != nil {
		return s, nil, nil, UsageError{err}
	}
	switch {
	case o.Clients < 1:
		return s, nil, nil, usage("--clients must be at least 1 (got %d)", o.Clients)
	case o.Clients > 200:
		return s, nil, nil, usage("--clients must be at most 200 (got %d)", o.Clients)
	case o.TimeLimit <= 0:
		return s, nil, nil, usage("--time-limit must be positive (got %s)", o.TimeLimit)
	case o.TTL <= 0:
		return s, nil, nil, usage("--ttl must be positive (got %s)", o.TTL)
	case o.Hold.Min < 0 || o.Hold.Max < o.Hold.Min:
		return s, nil, nil, usage("--hold must be MIN..MAX with 0 <= MIN <= MAX")
	case o.OpTimeout <= 0:
		return s, nil, nil, usage("--op-timeout must be positive")
	case o.Wait && o.WaitTimeout <= 0:
		return s, nil, nil, usage("--wait-timeout must be positive")
	case o.Fence && !s.Fencing:
		return s, nil, nil, usage("lock %s cannot hand out fencing tokens", s.Name)
	}
	if o.Cluster != "local" && o.Cluster != "docker" && o.Cluster != "compose" {
		return s, nil, nil, usage("unknown cluster backend %q (this build has: local, docker, compose)", o.Cluster)
	}
	topology := o.topologyOf(s)
	if !s.RunsOn(topology) {
		return s, nil, nil, usage("lock %s does not run on topology %q (it runs on: %s)", s.Name, topology, strings.Join(append([]string{s.Topology}, s.Topologies...), ", "))
	}
	if o.Cluster != "local" {
		if err := validateContainers(o.Cluster, topology, ns); err != nil {
			return s, nil, nil, err
		}
	}
	for kind := range o.Images {
		if o.Cluster != "docker" {
			return s, nil, nil, usage("--image applies to --cluster docker only")
		}
		if !slices.Contains(docker.Kinds, kind) {
			return s, nil, nil, usage("--image %s=...: unknown kind of server (known: %s)", kind, strings.Join(docker.Kinds, ", "))
		}
	}
	if needsFailover(ns) && !local.FailsOver(topology) {
		return s, nil, nil, usage("the failover fault needs a topology with a primary and a replica; %s has none (with the MySQL schemes: --topology mysql-replicated)", topology)
	}
	if m := clusters.Missing(topology); len(m) > 0 && o.Cluster == "local" {
		return s, nil, nil, UsageError{clusters.MissingError(m)}
	}
	if mode, err := nemesis.ParseFailover(o.Params["failover"]); err != nil {
		return s, nil, nil, usage("--param failover: %v", err)
	} else if mode == nemesis.FailoverIsolate && needsFailover(ns) {
		switch {
		case o.Cluster != "local":
			return s, nil, nil, usage("--param failover=isolate runs on --cluster local only")
		case !local.IsolatesPrimary(topology):
			return s, nil, nil, usage("--param failover=isolate needs a topology that can cut its primary off the network (redis-sentinel); %s kills its primary (failover=kill)", topology)
		}
	}
	if needsNet(ns, o.Params) {
		if err := nemesis.NetUnavailable(netns.Available()); err != nil {
			return s, nil, nil, UsageError{err}
		}
	}
	if needsClockShim(ns) && o.Cluster == "local" && !local.ClockShim(topology) {
		return s, nil, nil, usage("the clock fault needs servers under the per-server clock shim; topology %s has none (ZooKeeper and etcd expire sessions on monotonic clocks)", topology)
	}
	if needsClockShim(ns) && o.Cluster == "local" {
		if err := clusters.CheckClockShim(); err != nil {
			return s, nil, nil, usage("the clock fault: %v", err)
		}
	}
	if _, err := nemesis.ParseShapes(o.Params["partition"]); err != nil {
		return s, nil, nil, usage("--param partition: %v", err)
	}
	if _, err := nemesis.ParseClockDirections(o.Params["clock"]); err != nil {
		return s, nil, nil, UsageError{err}
	}
	if _, _, err := nemesis.ParsePause(o.Params["pause"]); err != nil {
		return s, nil, nil, usage("--param pause: %v", err)
	}
	if err := o.validateParams(s, topology, names); err != nil {
		return s, nil, nil, err
	}
	return s, ns, names, nil
}

// Sizing is what a fault needs of the workload to be able to matter on a
// topology: a TTL, hold times and a run long enough.
type Sizing struct {
	TTL       time.Duration
	Hold      workloads.Range
	TimeLimit time.Duration // the shortest run that lets the fault strike
	Why       string
}

// FaultSizing returns the sizing a fault needs on a topology (of the
// backend cluster: local, docker, compose) when the defaults cannot let it
// matter; ok false when they do.
//
// A Sentinel failover gives the lock away only if the replica is promoted
// while the holder still holds a live lease: Sentinel notices the dead
// master after down-after-milliseconds (1 s) and promotes a replica about
// 2.3 s after the kill, so a 2 s lease and holds under 0.5 s have always
// run out by then (the run would be inconclusive, see checker's struck).
// The fault waits for a grant on the master alone first (a few seconds).
//
// A MariaDB failover on containers promotes the replica 0.25-0.3 s after
// the kill (locally a few milliseconds): holds of 50-500 ms are over by
// then.
func FaultSizing(cluster, topology string, nemeses []string) (Sizing, bool) {
	if !slices.Contains(nemeses, "failover") {
		return Sizing{}, false
	}
	switch {
	case topology == "redis-sentinel":
		return Sizing{
			TTL: 6 * time.Second, Hold: workloads.Range{Min: 3 * time.Second, Max: 4 * time.Second}, TimeLimit: 12 * time.Second,
			Why: "Sentinel promotes a replica about 2.3 s after the master fails: the lease and the holds outlive that",
		}, true
	case topology == "mysql-replicated" && cluster != "local" && cluster != "":
		return Sizing{
			TTL: 3 * time.Second, Hold: workloads.Range{Min: time.Second, Max: 1500 * time.Millisecond}, TimeLimit: 10 * time.Second,
			Why: "on containers the replica is promoted 0.25-0.3 s after the primary is killed: the holds outlive that, the lease the holds",
		}, true
	}
	return Sizing{}, false
}

// faultParams are the --param keys the faults read, each named after its fault.
var faultParams = []string{"pause", "pause-server", "kill", "partition", "clock", "failover"}

// KnownParam reports whether some fault, scheme or topology reads the
// --param key, and whether a run of scheme on topology with faults
// nemeses reads it; for has the faults, schemes or topologies that do.
func KnownParam(key, scheme, topology string, nemeses []string) (known, applies bool, for_ string) {
	if slices.Contains(faultParams, key) {
		return true, slices.Contains(nemeses, key), "the " + key + " fault"
	}
	i := slices.IndexFunc(local.Params, func(p local.Param) bool { return p.Name == key })
	if i < 0 {
		return false, false, ""
	}
	p := local.Params[i]
	for _, name := range strings.Split(p.For, ",") {
		if name = strings.TrimSpace(name); name == topology || name == scheme {
			return true, true, p.For
		}
	}
	return true, false, p.For
}

// validateParams refuses a --param key nothing reads (a typo would
// otherwise leave the run on its defaults without a word) and one that
// this run's scheme, topology or faults do not read. A --client-cmd run
// hands every key to the user's program (hello.params), which may read it.
func (o *Options) validateParams(s locks.Scheme, topology string, nemeses []string) error {
	keys := make([]string, 0, len(o.Params))
	for k := range o.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		known, applies, for_ := KnownParam(k, s.Name, topology, nemeses)
		switch {
		case applies:
		case slices.Contains(faultParams, k):
			return usage("--param %s sets the %s fault, which this run does not inject (--nemesis %s)", k, k, strings.Join(nemeses, ","))
		case o.ClientCmd != "":
		case !known:
			names := slices.Clone(faultParams)
			for _, p := range local.Params {
				names = append(names, p.Name)
			}
			return usage("unknown --param %s (known: %s)", k, strings.Join(names, ", "))
		default:
			return usage("--param %s applies to %s, not to lock %s on topology %s", k, for_, s.Name, topology)
		}
	}
	if strings.HasPrefix(topology, "mysql") {
		// The values too, before any server starts.
		if err := recipe.CheckMySQLParams(o.Params); err != nil {
			return UsageError{err}
		}
	}
	return nil
}

// validateContainers checks a run on the docker or compose backend: a
// topology clusters/docker lists, and no fault that backend lacks.
func validateContainers(backend, topology string, ns []nemesis.Nemesis) error {
	t, ok := docker.Lookup(topology)
	if !ok {
		return usage("--cluster %s does not run topology %s (it runs: %s)", backend, topology, strings.Join(docker.Names(), ", "))
	}
	if backend == "compose" && needsClockShim(ns) {
		return usage("the clock fault needs the clock shim, which --cluster compose cannot add to a running stack: use --cluster docker")
	}
	if needsClockShim(ns) && !t.ClockShim {
		return usage("the clock fault needs the clock shim, which only the Redis and MySQL topologies have; %s has none", topology)
	}
	return nil
}

// topologyOf is the topology a run of s starts: --topology, else the
// scheme's own.
func (o *Options) topologyOf(s locks.Scheme) string {
	if o.Topology != "" {
		return o.Topology
	}
	return s.Topology
}

func needsFailover(ns []nemesis.Nemesis) bool {
	for _, n := range ns {
		if f, ok := n.(nemesis.FailoverNeeder); ok && f.NeedsFailover() {
			return true
		}
	}
	return false
}

func needsClockShim(ns []nemesis.Nemesis) bool {
	for _, n := range ns {
		if c, ok := n.(nemesis.ClockShimNeeder); ok && c.NeedsClockShim() {
			return true
		}
	}
	return false
}

// needsNet: the run's faults need the network layer with its --param
// settings (partitions; failover=isolate).
func needsNet(ns []nemesis.Nemesis, params map[string]string) bool {
	return nemesis.NeedsNet(ns, params)
}

// Run runs one cell. ctx is the interrupt: when it is done the run heals its
// faults, stops everything, still checks and writes what it recorded, and
// returns with Interrupted set.
func Run(ctx context.Context, o Options) (*Outcome, error) {
	scheme, nemeses, names, err := o.Validate()
	if err != nil {
		return nil, err
	}
	out := o.Out
	if out == nil {
		out = os.Stdout
	}
	say := func(format string, a ...any) {
		if !o.Quiet {
			fmt.Fprintf(out, format+"\n", a...)
		}
	}
	sized := ""
	if o.SizeForFaults {
		if sz, ok := FaultSizing(o.Cluster, o.topologyOf(scheme), names); ok {
			ttl, hold, why := sz.TTL, sz.Hold, sz.Why
			o.TTL, o.Hold = ttl, hold
			sized = fmt.Sprintf("sized for %s on %s: --ttl %s --hold %s..%s (%s; set --ttl or --hold to choose)",
				strings.Join(names, ","), o.topologyOf(scheme), ttl, hold.Min, hold.Max, why)
		}
	}
	started := time.Now()
	dir, err := newRunDir(o.Store, scheme.Name, strings.Join(names, "+"), started)
	if err != nil {
		return nil, err
	}
	// Unique per run, even for runs a process starts in the same instant.
	seq := runSeq.Add(1)
	runID := "lt" + started.Format("150405") + fmt.Sprintf("%04x%02x", os.Getpid()&0xffff, seq&0xff)
	tracker, err := runstate.Open(runID, dir)
	if err != nil {
		return nil, err
	}
	defer tracker.Close()

	if err := os.MkdirAll(filepath.Join(dir, "clients"), 0o755); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), map[string]any{
		"options": o, "run_id": runID, "version": Version, "started": started.Format(time.RFC3339Nano),
		"scheme":  map[string]any{"name": scheme.Name, "topology": o.topologyOf(scheme), "lease": scheme.Lease, "fencing": scheme.Fencing, "reentrant": scheme.Reentrant},
		"nemeses": names,
	}); err != nil {
		return nil, err
	}
	say("locktest %s: lock %s, nemesis %s, %d clients, %s, seed %d", Version, o.Lock, strings.Join(names, ","), o.Clients, o.TimeLimit, o.Seed)
	say("run directory: %s", dir)
	if sized != "" {
		say("%s", sized)
	}

	// Cluster.
	t0 := time.Now()
	var backend clusters.Backend = local.Backend{}
	// Servers run with other working directories: every path they get is
	// absolute (a relative clock-shim file shifted nothing).
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	spec := clusters.Spec{Topology: o.topologyOf(scheme), Dir: absDir, Tracker: tracker, Params: o.Params, ClockShim: needsClockShim(nemeses), RunID: runID}
	switch o.Cluster {
	case "docker":
		backend = docker.Backend{Images: o.Images}
		tracker.SetDocker(os.Getenv("DOCKER_HOST"))
	case "compose":
		backend = docker.Compose{}
	}
	pooled := o.Pool.covers(o)
	if pooled {
		backend = o.Pool.backend(o, names)
	}
	var network *netns.Net
	var netID string
	if needsNet(nemeses, o.Params) && o.Cluster != "local" {
		// The container backends bring their own network (clusters.Networked).
		spec.NetID = netns.Prefix + fmt.Sprintf("%x", started.UnixNano()%0xffffff) + fmt.Sprintf("%x", os.Getpid()%0xfff)
		tracker.SetNet(spec.NetID)
	} else if needsNet(nemeses, o.Params) && !pooled {
		netID = netns.Prefix + fmt.Sprintf("%x%x%02x", started.UnixNano()%0xffffff, os.Getpid()%0xfff, seq&0xff)
		tracker.SetNet(netID)
		if network, err = netns.New(netID); err != nil {
			return nil, err
		}
		// Runs after the cluster and the clients are stopped (defers
		// run last-registered first).
		defer func() {
			_ = network.Heal(context.Background())
			_ = network.Close()
		}()
	}
	spec.Net = network
	cl, err := backend.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start %s cluster: %w", o.topologyOf(scheme), err)
	}
	if nw, ok := cl.(clusters.Networked); ok && nw.Net() != nil {
		network = nw.Net() // closed by cl.Stop
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = cl.Stop(sctx)
	}()
	startup := time.Since(t0)
	poolDir, reused := pooledRun(cl)
	if reused {
		startup = 0
	}
	say("cluster %s up in %s: %s", o.topologyOf(scheme), startup.Round(time.Millisecond), strings.Join(cl.Addrs(), " "))

	// History.
	argv := o.ClientArgv
	if o.ClientCmd != "" {
		// exec: the process the harness pauses and kills is the user's
		// program itself, not a shell around it.
		argv = []string{"sh", "-c", "exec " + o.ClientCmd}
	}
	if argv == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		argv = []string{exe, "worker"}
	}
	hello := protocol.Hello{
		Lock: scheme.Name, Servers: cl.Addrs(), Key: lockKey(cl, runID), TTLMillis: o.TTL.Milliseconds(),
		Fence: o.Fence, Wait: o.Wait, WaitTimeoutMs: o.WaitTimeout.Milliseconds(),
		OpTimeoutMs: o.OpTimeout.Milliseconds(), Seed: o.Seed, Params: o.Params,
	}
	if o.ClientCmd != "" {
		// The user's program says what its lock promises, and shows that it
		// starts at all, before the run depends on it.
		probeArgv := argv
		if network != nil {
			h, err := network.AddHost("probe")
			if err != nil {
				return nil, err
			}
			probeArgv = h.Command(argv...)
		}
		ready, err := workloads.Probe(probeArgv, hello, filepath.Join(dir, "clients", "probe.stderr"), 10*time.Second)
		if err != nil {
			return nil, ClientError{fmt.Errorf("--client-cmd %q: %w", o.ClientCmd, err)}
		}
		if li := ready.Lock; li != nil {
			scheme.Lease, scheme.Fencing, scheme.Reentrant = li.Lease, li.Fencing, li.Reentrant
			scheme.ChecksValidity, scheme.Renews, scheme.Session = li.ChecksValidity, li.Renews, li.Session
			if li.Name != "" {
				scheme.Summary = li.Name
			}
		}
		if o.Fence && !scheme.Fencing {
			return nil, ClientError{fmt.Errorf("--fence: the client program's lock (%s) hands out no fencing tokens (its ready message says fencing: false)", scheme.Name)}
		}
		say("client program: %s (lease %v, fencing %v, reentrant %v)", orDefault(scheme.Summary, o.ClientCmd), scheme.Lease, scheme.Fencing, scheme.Reentrant)
	}

	base := history.Monotonic()
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"), base, false)
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	ttl := o.TTL
	info := &history.RunInfo{
		FormatVersion: history.FormatVersion, Lock: scheme.Name, Nemeses: names, Seed: o.Seed,
		Clients: o.Clients, Lease: scheme.Lease, Fence: o.Fence, Fencing: scheme.Fencing && o.Fence, Wait: o.Wait,
		TimeLimitMs: o.TimeLimit.Milliseconds(), StartedAt: started.Format(time.RFC3339), Cluster: o.Cluster,
		Topology: o.topologyOf(scheme), Version: Version, Servers: cl.Versions(), Command: o.Command,
		DeadlockMs: (2*ttl + time.Second).Milliseconds(), BaseMonotonic: base,
		Reentrant: scheme.Reentrant, Renews: scheme.Renews, ChecksValidity: scheme.ChecksValidity, Session: scheme.Session,
		ReadWrite: scheme.ReadWrite, StartupMillis: startup.Milliseconds(), ClusterReused: reused,
	}
	if scheme.Lease {
		info.TTLMillis = ttl.Milliseconds()
	}
	if scheme.Session && !scheme.Renews && strings.HasPrefix(info.Topology, "mysql") {
		if set, err := recipe.MySQLSettingsFrom(o.Params); err == nil {
			info.IdleTimeoutMillis = int64(set.WaitTimeout) * 1000
		}
	}
	if o.Wait {
		// A blocking acquire hides failed tries inside one operation.
		info.DeadlockMs += o.WaitTimeout.Milliseconds()
	}
	rec.RecordAt(history.Event{Type: history.Run, Info: info}, 0)

	wl := workloads.NewRunner(workloads.Config{
		Clients: o.Clients, Argv: argv,
		Hello: hello,
		Hold:  o.Hold, Think: o.Think, Seed: o.Seed, Dir: dir,
		ReplyLimit: replyLimit(o),
		StartLimit: 10 * time.Second,
		ClientHost: clientHost(network),
		Tracker:    tracker, Recorder: rec, Resource: workloads.NewResource(0, o.Fence),
		Reentrant: scheme.Reentrant,
		ReadWrite: scheme.ReadWrite,
	})
	procs, err := wl.Start()
	if err != nil {
		rec.Record(history.Event{Type: history.RunEnd, Detail: "harness error: " + err.Error()}, nil)
		return nil, err
	}
	say("%d client processes started; running for %s", len(procs), o.TimeLimit)

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
	env := &nemesis.Env{Recorder: rec, Cluster: cl, Workload: wl, TTL: ttl, Seed: o.Seed, Net: network, Params: o.Params}
	nemErr := make(chan error, 1)
	go func() {
		err := nemesis.RunAll(stop, env, nemeses)
		if err != nil {
			stopNow() // a fault that failed: the run is aborted now
		}
		nemErr <- err
	}()
	if !o.Quiet {
		go progress(stop, out, rec, o.TimeLimit)
	}
	wlErr := wl.Run(ctx, stop, procs)
	stopNow()
	nErr := <-nemErr
	detected := det.finish()
	interrupted := ctx.Err() != nil
	endDetail := "time limit"
	switch {
	case stoppedEarly.Load() && wlErr == nil && nErr == nil && !interrupted:
		endDetail = history.EndedEarly
		detected.Stopped = true
	case interrupted:
		endDetail = history.EndedInterrupted
	case wlErr != nil || nErr != nil:
		endDetail = "harness error: " + errors.Join(wlErr, nErr).Error()
	}
	rec.Record(history.Event{Type: history.RunEnd, Detail: endDetail}, nil)
	if err := rec.Close(); err != nil {
		return nil, err
	}
	if wlErr != nil || nErr != nil {
		if !interrupted {
			return &Outcome{Dir: dir}, fmt.Errorf("run aborted (history kept in %s): %w", dir, errors.Join(wlErr, nErr))
		}
	}

	if detected != nil {
		stopped := ""
		if detected.Stopped {
			stopped = "; the run stopped there (--stop-early)"
		}
		say("online checker: a %s that began at %.2fs was certain at %.2fs%s", detected.Kind, detected.ViolationAt.Seconds(), detected.CertainAt.Seconds(), stopped)
	}
	res, err := CheckDir(dir, out, o.Quiet)
	if err != nil {
		return nil, err
	}
	if !interrupted {
		keepCluster(cl)
	}
	return &Outcome{Dir: dir, Result: *res, Interrupted: interrupted, Startup: startup, NetID: netID, Detected: detected, Cluster: poolDir, Reused: reused}, nil
}

// clientHost gives each client its own namespace when the run has a
// network.
func clientHost(n *netns.Net) func(int) (*netns.Host, error) {
	if n == nil {
		return nil
	}
	return func(id int) (*netns.Host, error) { return n.AddHost(fmt.Sprintf("client-%d", id)) }
}

// CheckDir checks the history in a run directory, writes results.json,
// report.html and linearization.html there and prints the summary. The
// check ends early at a second Ctrl-C or SIGTERM (the first one ends a
// run's workload): see CheckDirContext.
func CheckDir(dir string, out io.Writer, quiet bool) (*checker.Result, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return CheckDirContext(ctx, dir, out, quiet)
}

// CheckDirContext is CheckDir stopped when ctx is done: results.json is
// still written, with the properties decided by then and the others
// "interrupted" (checker.Result.CheckInterrupted), never a pass.
func CheckDirContext(ctx context.Context, dir string, out io.Writer, quiet bool) (*checker.Result, error) {
	// Loading a long history takes seconds and cannot be stopped: a check
	// interrupted meanwhile decides nothing (the load goes on until the
	// process exits).
	type loaded struct {
		h   *history.History
		err error
	}
	ch := make(chan loaded, 1)
	go func() {
		h, err := history.Load(filepath.Join(dir, "history.jsonl"))
		ch <- loaded{h, err}
	}()
	var h *history.History
	select {
	case l := <-ch:
		if l.err != nil {
			return nil, l.err
		}
		h = l.h
	case <-ctx.Done():
		h = &history.History{}
	}
	res := checker.CheckContext(ctx, h, checker.DefaultOptions())
	if err := reports.WriteResultsJSON(filepath.Join(dir, "results.json"), &res); err != nil {
		return nil, err
	}
	if res.CheckInterrupted {
		// The pages (and porcupine's view) take seconds more: not now.
		if out != nil {
			fmt.Fprintf(out, "check interrupted: %s written, pages not\n", filepath.Join(dir, "results.json"))
		}
		return &res, nil
	}
	if err := reports.WriteRunDir(dir, h, &res); err != nil {
		return nil, err
	}
	if out != nil {
		reports.WriteSummary(out, h, &res, isTerminal(out) && !quiet)
		fmt.Fprintf(out, "report: %s\n", filepath.Join(dir, "report.html"))
	}
	return &res, nil
}

func newRunDir(store, lock, nem string, t time.Time) (string, error) {
	if store == "" {
		store = "store"
	}
	parent := filepath.Join(store, lock, nem)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("create store: %w", err)
	}
	name := t.Format("20060102T150405.000")
	dir := filepath.Join(parent, name)
	for i := 1; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return "", fmt.Errorf("create run directory: %w", err)
		}
		dir = filepath.Join(parent, fmt.Sprintf("%s-%d", name, i))
	}
	latest := filepath.Join(store, "latest")
	rel, err := filepath.Rel(store, dir)
	if err == nil {
		_ = os.Remove(latest)
		_ = os.Symlink(rel, latest)
	}
	return dir, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress prints a line every few seconds while the workload runs.
func progress(ctx context.Context, out io.Writer, rec *history.Recorder, limit time.Duration) {
	start := time.Now()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			el := time.Since(start).Round(time.Second)
			fmt.Fprintf(out, "  %s / %s elapsed\n", el, limit)
		}
	}
}
