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
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/recipe"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
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
	// Schedule is a schedule.json whose faults the run replays instead of
	// drawing them (--schedule); Nemesis, when set, must name each fault
	// it holds, and the run injects only those.
	Schedule string `json:"schedule,omitempty"`
	// Machine, when not nil, is what the run takes this machine to be able
	// to do, instead of probing it (tests).
	Machine *matrix.Machine `json:"-"`
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
// request, plus a blocking wait, plus slack. A request of a session lock
// may wait as long as the session (the ZooKeeper client learns of a dead
// connection only after 2/3 of its timeout): the deadline is the longer of
// the op timeout and the TTL.
func replyLimit(o Options) time.Duration {
	d := max(o.OpTimeout, o.TTL) + 5*time.Second
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

// Plan is a run the options describe, validated: the scheme, the faults,
// the servers and where they run.
type Plan struct {
	Scheme   locks.Scheme
	Nemeses  []nemesis.Nemesis
	Names    []string         // the faults' names, as --nemesis gave them
	Settings nemesis.Settings // the faults' --param settings, parsed
	Topology string
	Backend  clusters.BackendInfo
	// Machine is what this machine can do, probed (or Options.Machine).
	Machine matrix.Machine
	// Replay is the schedule the faults are replayed from (--schedule),
	// nil when they are drawn.
	Replay *nemesis.Schedule
}

// Cell is the plan's cell, for matrix.Applicable.
func (p Plan) Cell(params map[string]string) matrix.Cell {
	return matrix.Cell{Scheme: p.Scheme, Topology: p.Topology, Faults: p.Names, Params: params}
}

// Validate checks the options and returns the run they describe: a
// UsageError (one line) when they are wrong or name a cell that
// matrix.Applicable refuses.
func (o *Options) Validate() (Plan, error) {
	s, ok := locks.Lookup(o.Lock)
	if o.ClientCmd != "" {
		if o.Topology == "" {
			return Plan{}, usage("--client-cmd needs --topology (the servers your client uses, e.g. redis)")
		}
		name := o.Lock
		if name == "" {
			name = "client-cmd"
		}
		// What the lock promises comes from the program's ready message;
		// until then assume a lease lock that may have tokens and may read
		// its own clock: Run asks matrix.Applicable again once it knows.
		s, ok = locks.Scheme{Name: name, Topology: o.Topology, Traits: history.Traits{Lease: true, Fencing: true, ChecksValidity: true}}, true
	}
	if !ok {
		return Plan{}, usage("unknown lock %q (known: %s)", o.Lock, strings.Join(locks.Names(), ", "))
	}
	ns, names, replay, err := o.faults()
	if err != nil {
		return Plan{}, UsageError{err}
	}
	switch {
	case o.Clients < 1:
		return Plan{}, usage("--clients must be at least 1 (got %d)", o.Clients)
	case o.Clients > 200:
		return Plan{}, usage("--clients must be at most 200 (got %d)", o.Clients)
	case o.TimeLimit <= 0:
		return Plan{}, usage("--time-limit must be positive (got %s)", o.TimeLimit)
	case o.TTL <= 0:
		return Plan{}, usage("--ttl must be positive (got %s)", o.TTL)
	case o.Hold.Min < 0 || o.Hold.Max < o.Hold.Min:
		return Plan{}, usage("--hold must be MIN..MAX with 0 <= MIN <= MAX")
	case o.OpTimeout <= 0:
		return Plan{}, usage("--op-timeout must be positive")
	case o.Wait && o.WaitTimeout <= 0:
		return Plan{}, usage("--wait-timeout must be positive")
	case o.Fence && !s.Fencing:
		return Plan{}, usage("lock %s cannot hand out fencing tokens", s.Name)
	}
	backend, err := clusters.ParseBackend(o.Cluster)
	if err != nil {
		return Plan{}, UsageError{err}
	}
	p := Plan{Scheme: s, Nemeses: ns, Names: names, Topology: o.topologyOf(s), Backend: backend, Machine: o.machine(backend.Name), Replay: replay}
	if a := matrix.Applicable(p.Cell(o.Params), p.Machine); a.Status != matrix.Applies {
		return Plan{}, UsageError{a.Err}
	}
	for kind := range o.Images {
		if backend.Name != clusters.Docker {
			return Plan{}, usage("--image applies to --cluster docker only")
		}
		if !slices.Contains(docker.Kinds, kind) {
			return Plan{}, usage("--image %s=...: unknown kind of server (known: %s)", kind, strings.Join(docker.Kinds, ", "))
		}
	}
	if err := o.validateParams(s, p.Topology, names); err != nil {
		return Plan{}, err
	}
	if p.Settings, err = nemesis.ParseSettings(o.Params); err != nil {
		return Plan{}, UsageError{err}
	}
	if err := nemesis.CheckJitter(o.Params, o.TTL); err != nil {
		return Plan{}, UsageError{err}
	}
	if err := o.validatePoints(s, p.Settings); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// validatePoints checks --param pause-at and crash-at (parsed in st):
// known points of the scheme, or after-grant. A --client-cmd run's points
// are the program's, known only once it runs: a point it does not declare
// is never struck.
func (o *Options) validatePoints(s locks.Scheme, st nemesis.Settings) error {
	for _, aim := range []struct {
		key    string
		points []string
	}{{"pause-at", st.PauseAt}, {"crash-at", st.CrashAt}} {
		key, points := aim.key, aim.points
		if o.ClientCmd != "" {
			// The waiter point is the controller's own, known now.
			if slices.Contains(points, locks.PointWaiting) && (key != "pause-at" || !o.Wait) {
				return usage("--param %s=%s: %q is a point of pause with --wait only", key, o.Params[key], locks.PointWaiting)
			}
			continue
		}
		known := []string{locks.PointAfterGrant}
		if o.Wait && key == "pause-at" {
			// The controller freezes a waiter; crash-client never
			// strikes one (a crashed waiter only drops its request).
			known = append(known, locks.PointWaiting)
		}
		for _, p := range s.Points {
			known = append(known, p.Name)
		}
		for _, p := range points {
			if !slices.Contains(known, p) {
				return usage("--param %s=%s: lock %s has no fault point %q (it has: %s)", key, o.Params[key], s.Name, p, strings.Join(known, ", "))
			}
		}
	}
	return nil
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
//
// A kill of the MariaDB server holding a lock that lives in a session
// (traits: Session without Lease) gives the lock away only if the server
// is back and grants it to another client while the holder still holds:
// MariaDB is back 0.5-1.5 s after the kill, when holds of 50-250 ms are
// over (the checker then says inconclusive, see checker's sessionKill).
// A zero TTL in the Sizing keeps the run's own.
func FaultSizing(cluster clusters.BackendName, topology string, nemeses []string, traits history.Traits) (Sizing, bool) {
	if slices.Contains(nemeses, "kill") && !slices.Contains(nemeses, "failover") && traits.Session && !traits.Lease {
		return Sizing{
			Hold: workloads.Range{Min: 2 * time.Second, Max: 3 * time.Second}, TimeLimit: 30 * time.Second,
			Why: "the killed server's sessions end with it and it is back 0.5-1.5 s later: the holds outlive that, so it can grant the lock again while its holder still holds it",
		}, true
	}
	if !slices.Contains(nemeses, "failover") {
		return Sizing{}, false
	}
	switch {
	case topology == "redis-sentinel":
		return Sizing{
			TTL: 6 * time.Second, Hold: workloads.Range{Min: 3 * time.Second, Max: 4 * time.Second}, TimeLimit: 12 * time.Second,
			Why: "Sentinel promotes a replica about 2.3 s after the master fails: the lease and the holds outlive that",
		}, true
	case topology == "mysql-replicated" && cluster != clusters.Local && cluster != "":
		return Sizing{
			TTL: 3 * time.Second, Hold: workloads.Range{Min: time.Second, Max: 1500 * time.Millisecond}, TimeLimit: 10 * time.Second,
			Why: "on containers the replica is promoted 0.25-0.3 s after the primary is killed: the holds outlive that, the lease the holds",
		}, true
	}
	return Sizing{}, false
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
		known, applies, for_ := matrix.KnownParam(k, s.Name, topology, nemeses)
		isFault, err := nemesis.CheckParam(k, o.Params[k])
		switch {
		case applies && err != nil:
			return UsageError{err}
		case applies:
		case isFault && o.Schedule != "" && err != nil:
			return UsageError{err}
		case isFault && o.Schedule != "":
			// A replay whose schedule lost every fault of this kind
			// (a shrinker deleted them): the setting sets nothing.
		case isFault:
			f, _ := nemesis.ParamFault(k)
			verb := "sets"
			if info, _ := nemesis.Lookup(f); info.Aim == k {
				verb = "aims"
			}
			return usage("--param %s %s the %s fault, which this run does not inject (--nemesis %s)", k, verb, f, strings.Join(nemeses, ","))
		case o.ClientCmd != "":
		case !known:
			return usage("unknown --param %s (known: %s)", k, strings.Join(matrix.ParamNames(), ", "))
		default:
			return usage("--param %s applies to %s, not to lock %s on topology %s", k, for_, s.Name, topology)
		}
	}
	if o.ClientCmd == "" {
		// A variant's value too (the scheme's own client reads it).
		if _, err := locks.MirrorOf(s.Name, o.Params); err != nil {
			return UsageError{err}
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

// machine is what this machine can do for a run on backend: probed, or
// the one a test set (Options.Machine).
func (o *Options) machine(backend clusters.BackendName) matrix.Machine {
	var m matrix.Machine
	if o.Machine != nil {
		m = *o.Machine
	} else {
		m = matrix.Probe()
	}
	m.Cluster = string(backend)
	return m
}

// topologyOf is the topology a run of s starts: --topology, else the
// scheme's own.
func (o *Options) topologyOf(s locks.Scheme) string {
	if o.Topology != "" {
		return o.Topology
	}
	return s.Topology
}

// needsFailover: the faults ns need a topology that fails over.
func needsFailover(ns []nemesis.Nemesis) bool {
	return slices.ContainsFunc(ns, func(n nemesis.Nemesis) bool { return needs(n).Failover })
}

// needsClockShim: the faults ns need servers under the clock shim.
func needsClockShim(ns []nemesis.Nemesis) bool {
	return slices.ContainsFunc(ns, func(n nemesis.Nemesis) bool { return needs(n).ClockShim })
}

// needs is what fault n needs whatever its --param (its declaration).
func needs(n nemesis.Nemesis) nemesis.Needs {
	info, _ := nemesis.Lookup(n.Name())
	return info.Needs
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
	return checkDir(ctx, dir, out, quiet, false)
}

// checkDir is CheckDirContext; verdictOnly prints the verdict lines of the
// summary alone (reports.WriteVerdict: a `locktest run --quiet`), not its
// counts, properties and anomalies.
func checkDir(ctx context.Context, dir string, out io.Writer, quiet, verdictOnly bool) (*checker.Result, error) {
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
	witnessed, err := writeWitnesses(ctx, dir, h, &res)
	if err != nil {
		return nil, err
	}
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
		if verdictOnly {
			reports.WriteVerdict(out, h, &res, isTerminal(out) && !quiet)
		} else {
			reports.WriteSummary(out, h, &res, isTerminal(out) && !quiet)
		}
		fmt.Fprintf(out, "report: %s\n", filepath.Join(dir, "report.html"))
		if witnessed != "" {
			fmt.Fprintln(out, witnessed)
		}
		if cmd := reports.ShrinkCommand(dir); cmd != "" && res.Verdict == checker.Unsafe {
			fmt.Fprintf(out, "shrink this run: %s\n", cmd)
		}
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
