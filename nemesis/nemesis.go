// Package nemesis injects faults. A fault (how) is kept apart from its
// schedule (when, where, how long), which draws every choice from the run's
// seeded random source. Every fault is recorded in the history as a
// fault-start and a fault-end event and is healed on every exit path: when
// Run returns, nothing it did is still in effect.
package nemesis

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/proxy"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/workloads"
)

// Env is what faults act on.
type Env struct {
	Recorder *history.Recorder
	Cluster  clusters.Cluster
	Workload *workloads.Runner
	TTL      time.Duration // the lease length: pauses are sized from it
	Seed     int64
	Net      *netns.Net        // the run's network; nil when it has none
	Links    *proxy.Set        // the proxies on the client-server links; nil when the run has none
	Params   map[string]string // --param settings (e.g. partition=isolate-holder)
	// Settings are the faults' own --param settings, parsed once
	// (ParseSettings); the zero value: every fault's defaults.
	Settings Settings
	// Wait: the clients acquire with a blocking acquire (--wait), so a
	// client fault can also strike a waiter (locks.PointWaiting).
	Wait bool
	// Traits are what the lock under test promises (a session, renewals):
	// a fault aims where it can hurt such a lock.
	Traits history.Traits
	// Replay is the schedule whose faults the run replays instead of
	// drawing them (locktest run --schedule); nil draws them.
	Replay *Schedule

	faultIDs atomic.Int64
	bookOnce sync.Once
	book     *book // the run's schedule as it goes (Schedule); see books

	nodeMu   sync.Mutex
	nodeBusy map[string]string // server name -> the fault acting on it
	nodeFree chan struct{}     // closed (and dropped) when a server is released
}

// claimNode reserves the server named name for fault, so that two server
// faults never act on one server at once (a kill of a frozen server, a
// pause of a server being restarted). It returns the release function, or
// ok false and the fault that holds the server.
func (e *Env) claimNode(name, fault string) (release func(), holder string, ok bool) {
	e.nodeMu.Lock()
	defer e.nodeMu.Unlock()
	if h, busy := e.nodeBusy[name]; busy {
		return nil, h, false
	}
	if e.nodeBusy == nil {
		e.nodeBusy = map[string]string{}
	}
	e.nodeBusy[name] = fault
	var once sync.Once
	return func() {
		once.Do(func() {
			e.nodeMu.Lock()
			delete(e.nodeBusy, name)
			if e.nodeFree != nil {
				close(e.nodeFree)
				e.nodeFree = nil
			}
			e.nodeMu.Unlock()
		})
	}, "", true
}

// settle is how long a fault that waited for a server lets pass after the
// release before it acts: the fault that held the server records its end
// right after releasing it, and the history must show the two one after
// the other.
const settle = 20 * time.Millisecond

// awaitNode is claimNode for a fault that waits its turn: while another
// fault acts on the server, it waits for it (up to limit, and not past the
// end of ctx). It returns the release function and the fault it waited for
// ("" when the server was free at once), or ok false and the fault that
// still held the server.
func (e *Env) awaitNode(ctx context.Context, name, fault string, limit time.Duration) (release func(), waitedFor string, ok bool) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		e.nodeMu.Lock()
		h, busy := e.nodeBusy[name]
		if !busy {
			e.nodeMu.Unlock()
			if waitedFor != "" && !sleep.For(ctx, settle) {
				return nil, waitedFor, false
			}
			if release, h, ok := e.claimNode(name, fault); ok {
				return release, waitedFor, true
			} else if waitedFor == "" {
				waitedFor = h
			}
			continue
		}
		waitedFor = h
		if e.nodeFree == nil {
			e.nodeFree = make(chan struct{})
		}
		freed := e.nodeFree
		e.nodeMu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return nil, h, false
		case <-ctx.Done():
			return nil, h, false
		}
	}
}

// note records a line in the history.
func note(env *Env, detail string) {
	env.Recorder.Record(history.Event{Type: history.Note, Detail: detail}, nil)
}

// skipped records in the history that fault left target alone, and why.
func skipped(env *Env, fault, target, why string) {
	env.Recorder.Record(history.Event{Type: history.Note, Detail: fmt.Sprintf("%s skipped %s: %s", fault, target, why)}, nil)
}

// Nemesis is one kind of fault with its schedule.
type Nemesis interface {
	Name() string
	// Run injects faults until ctx is done, then heals what is still in
	// effect and returns.
	Run(ctx context.Context, env *Env) error
}

// Needs is what a fault needs to be able to matter, and to run at all:
// matrix.Applicable reads it for every scheme, topology and backend.
type Needs struct {
	// Failover: a topology with a primary and a replica
	// (clusters.TopologyInfo.FailsOver).
	Failover bool
	// ClockShim: servers under the per-server clock shim.
	ClockShim bool
	// Net: the harness's network layer (namespaces, root).
	Net bool
	// IsolatesPrimary: a topology and a backend that can cut the primary
	// off the network.
	IsolatesPrimary bool
	// OwnClock: a scheme that reads its own clock (history.Traits
	// ReadsOwnClock); to any other the fault cannot matter.
	OwnClock bool
	// Proxies: a proxy on every client-server link (clusters/proxy), put
	// in place by the harness when a fault of the run needs them.
	Proxies bool
	// Setting is the --param setting these needs come from, e.g.
	// "failover=isolate"; "" for the fault's own.
	Setting string
}

// or adds the needs of m to n.
func (n Needs) or(m Needs) Needs {
	n.Failover = n.Failover || m.Failover
	n.ClockShim = n.ClockShim || m.ClockShim
	n.Net = n.Net || m.Net
	n.IsolatesPrimary = n.IsolatesPrimary || m.IsolatesPrimary
	n.OwnClock = n.OwnClock || m.OwnClock
	n.Proxies = n.Proxies || m.Proxies
	if n.Setting == "" {
		n.Setting = m.Setting
	}
	return n
}

// Param is the --param a fault takes, under the fault's own name.
type Param struct {
	// Check validates a value, before anything starts; its error is the
	// one line the user sees.
	Check func(value string) error
	// Adds are the needs some values add to the fault's own.
	Adds map[string]Needs
	// Keys are more --param keys the fault reads (e.g. delay's jitter),
	// each with the check of its values.
	Keys map[string]func(value string) error
}

// extraKey reports whether i reads the --param key besides its own.
func (i Info) extraKey(key string) bool {
	if i.Param == nil {
		return false
	}
	_, ok := i.Param.Keys[key]
	return ok
}

// NeedsProxies reports whether the nemeses ns need a proxy on every
// client-server link.
func NeedsProxies(ns []Nemesis) bool {
	for _, n := range ns {
		if info, ok := lookup(n.Name()); ok && info.Needs.Proxies {
			return true
		}
	}
	return false
}

// NeedsNet reports whether the nemeses ns need the network layer with the
// run's --param settings params.
func NeedsNet(ns []Nemesis, params map[string]string) bool {
	for _, n := range ns {
		if info, ok := lookup(n.Name()); ok && info.NeedsWith(params).Net {
			return true
		}
	}
	return false
}

// Info describes a nemesis for `locktest list`.
type Info struct {
	Name    string
	Summary string
	New     func() Nemesis
	// Needs is what the fault needs whatever its --param.
	Needs Needs
	// Param is the --param it takes (named after it), nil for none.
	Param *Param
	// Aim is the --param key that aims the fault at fault points in the
	// clients' steps (locks.Point: pause-at, crash-at), "" for none; its
	// value is a list of points (ParsePoints).
	Aim string
}

// NeedsWith is what the fault needs with the --param settings params.
func (i Info) NeedsWith(params map[string]string) Needs {
	n := i.Needs
	if i.Param != nil {
		if add, ok := i.Param.Adds[strings.TrimSpace(params[i.Name])]; ok {
			n = n.or(add)
		}
	}
	return n
}

// Lookup returns the declaration of the fault named name.
func Lookup(name string) (Info, bool) { return lookup(name) }

// ParamFault returns the fault that reads the --param key: its own
// (named after it) or its aim (pause-at, crash-at); ok false for none.
func ParamFault(key string) (fault string, ok bool) {
	for _, i := range All {
		if (i.Name == key && i.Param != nil) || (i.Aim != "" && i.Aim == key) || i.extraKey(key) {
			return i.Name, true
		}
	}
	return "", false
}

// CheckParam validates the value of the --param key a fault reads (its
// own, or its aim); ok false when no fault reads a --param of that name.
func CheckParam(name, value string) (ok bool, err error) {
	for _, i := range All {
		if i.Aim != "" && i.Aim == name {
			if _, err := ParsePoints(value); err != nil {
				return true, fmt.Errorf("--param %s: %w", name, err)
			}
			return true, nil
		}
	}
	for _, i := range All {
		if i.extraKey(name) {
			return true, i.Param.Keys[name](value)
		}
	}
	info, found := lookup(name)
	if !found || info.Param == nil {
		return false, nil
	}
	if info.Param.Check == nil {
		return true, nil
	}
	return true, info.Param.Check(value)
}

// ParamNames lists the --param keys the faults read, in registry order:
// each fault's own (named after it), then its aim.
func ParamNames() []string {
	var out []string
	for _, i := range All {
		if i.Param != nil {
			out = append(out, i.Name)
		}
		if i.Aim != "" {
			out = append(out, i.Aim)
		}
		if i.Param != nil {
			out = append(out, slices.Sorted(maps.Keys(i.Param.Keys))...)
		}
	}
	return out
}

// All is the registry of nemeses, in the order `locktest list` shows them
// (the network-speed faults, declared in netspeed.go, last).
var All = append([]Info{
	{"none", "no fault: the baseline every scheme must pass", nil, Needs{}, nil, ""},
	{"pause", "SIGSTOP a client for 1.5-3x the TTL (--param pause=LO..HI to change), then SIGCONT: a stop-the-world GC; it strikes right after a grant and at the scheme's own gaps (after-check, after-get; with --wait a waiter), drawn by the seed (--param pause-at=POINT,... to choose)", func() Nemesis { return &pause{} }, Needs{}, &Param{Check: checkPause}, "pause-at"},
	{"pause-server", "freeze a server right after a grant, for 0.5-2x the TTL (SIGSTOP, then SIGCONT; docker pause and unpause on containers) (--param pause-server=leader: the leader of zk3/etcd3)", func() Nemesis { return &pauseServer{} }, Needs{}, &Param{}, ""},
	{"kill", "right after a grant, kill -9 a server (Redlock: just enough of those that granted the lease) and restart it after 0.3-1 s (Redis comes back empty: its locks are lost; MariaDB recovers its rows but not its sessions; ZooKeeper and etcd members restart with their data); --param kill=leader kills the leader of zk3/etcd3", func() Nemesis { return &killServer{} }, Needs{}, &Param{}, ""},
	{"crash-client", "kill -9 the client that holds the lock right after it acquires, or let a client crash itself at its scheme's gap (after-setnx), drawn by the seed (--param crash-at=POINT,... to choose); a fresh client takes its place", func() Nemesis { return &crashClient{} }, Needs{}, nil, "crash-at"},
	{"clock", "jump the wall clock of just enough of the servers that granted the current lease for another client to win, by 1-3x the TTL, right after the grant; back after 1.5-3x the TTL (needs libfaketime); --param clock=back (or forward,back) jumps back instead: leases outlive their TTL until the clock is set right, which is a forward jump", func() Nemesis { return &clock{} }, Needs{ClockShim: true}, &Param{Check: checkClock}, ""},
	{"clock-client", "turn the holder's own clock back by 1-3x the TTL right after it acquires (matters for clients that check their lease validity)", func() Nemesis { return &clockClient{} }, Needs{OwnClock: true}, nil, ""},
	{"partition", "cut the network for 1.5-3x the TTL (needs root): " + strings.Join(PartitionShapes, ", ") + "; only when named: " + strings.Join(OptInShapes, ", ") + "; pick with --param partition=SHAPE,...", func() Nemesis { return &partition{} }, Needs{Net: true}, &Param{Check: checkShapes}, ""},
	{"failover", "kill -9 the primary right after a grant and promote its replica (Sentinel does, or the harness as an operator would); the old primary rejoins as a replica 1-2 s later (replicated topologies: redis-sentinel, --topology mysql-replicated); --param failover=isolate on redis-sentinel cuts the master off the network instead (needs root) and heals it 1-2 s later: it comes back with its stale data until Sentinel demotes it", func() Nemesis { return &failover{} }, Needs{Failover: true}, &Param{Check: checkFailover,
		Adds: map[string]Needs{FailoverIsolate: {Net: true, IsolatesPrimary: true, Setting: "failover=" + FailoverIsolate}}}, ""},
}, NetSpeedFaults...)

// NetUnavailable completes err, why the network layer cannot work here,
// with the faults that need it and those that still work; nil stays nil.
func NetUnavailable(err error) error {
	if err == nil {
		return nil
	}
	var need, work []string
	for _, info := range All {
		if info.New == nil {
			continue
		}
		if info.Needs.Net {
			need = append(need, info.Name)
			continue
		}
		work = append(work, info.Name)
		if info.Param != nil {
			for _, add := range info.Param.Adds {
				if add.Net {
					need = append(need, info.Name+" with --param "+add.Setting)
				}
			}
		}
	}
	return fmt.Errorf("%w: %s cannot run; %s work without it", err, strings.Join(need, ", "), strings.Join(work, ", "))
}

// Parse turns "pause,kill" into nemeses. "none" alone means no fault.
func Parse(list string) ([]Nemesis, []string, error) {
	var out []Nemesis
	var names []string
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("nemesis %q given twice", name)
		}
		seen[name] = true
		info, ok := lookup(name)
		if !ok {
			return nil, nil, fmt.Errorf("unknown nemesis %q (known: %s)", name, strings.Join(Names(), ", "))
		}
		names = append(names, name)
		if info.New != nil {
			out = append(out, info.New())
		}
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no nemesis given (use none for no fault)")
	}
	if seen["none"] && len(names) > 1 {
		return nil, nil, fmt.Errorf("none cannot be combined with other nemeses")
	}
	return out, names, nil
}

func lookup(name string) (Info, bool) {
	for _, i := range All {
		if i.Name == name {
			return i, true
		}
	}
	return Info{}, false
}

// Names lists every nemesis name.
func Names() []string {
	out := make([]string, len(All))
	for i, n := range All {
		out[i] = n.Name
	}
	return out
}

// RunAll runs every nemesis until ctx is done and returns when all healed.
func RunAll(ctx context.Context, env *Env, ns []Nemesis) error {
	// The first error ends the others: the run is aborted, and should
	// not go on to its time limit first.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	env.books() // the faults begin: "at" triggers count from now
	var wg sync.WaitGroup
	errs := make([]error, len(ns))
	for i, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(ctx, env); err != nil {
				errs[i] = fmt.Errorf("nemesis %s: %w", n.Name(), err)
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// rng returns the seeded random source of nemesis name.
func rng(env *Env, name string) *rand.Rand {
	var h uint64 = 14695981039346656037
	for _, c := range name {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(uint64(env.Seed), h))
}

// between draws a duration uniformly from [lo, hi].
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// scaled draws a multiple in [lo, hi] of base.
func scaled(r *rand.Rand, base time.Duration, lo, hi float64) time.Duration {
	return time.Duration(float64(base) * (lo + r.Float64()*(hi-lo)))
}

// fault records the start of the fault s strikes, on target, and returns
// the function that records its end, with the detail given then. client is
// the client process the fault hits (0 for a server fault). The start
// carries s's point, rule and length, and s is marked fired as this
// fault.
func fault(env *Env, s strike, target string, client int, detail string) func(string) {
	return heldFault(env, s, target, client, detail, 0)
}

// heldFault is fault for a link fault that holds every answer on the links
// it strikes back at least held (history.Event.Latency; 0 for none).
func heldFault(env *Env, s strike, target string, client int, detail string, held time.Duration) func(string) {
	id := env.faultIDs.Add(1)
	env.Recorder.Record(history.Event{Type: history.FaultStart, Fault: s.Nemesis, Target: target, Client: client, Point: s.Point,
		Rule: string(s.Target), Length: s.Length, FaultID: id, Detail: detail, Latency: int64(held)}, nil)
	env.fired(s, id)
	return func(d string) {
		env.Recorder.Record(history.Event{Type: history.FaultEnd, Fault: s.Nemesis, Target: target, Client: client, FaultID: id, Detail: d}, nil)
	}
}

// clientTarget names client process id as a fault's target.
func clientTarget(id int) string { return fmt.Sprintf("client %d", id) }

// The checks of the faults' --param values, each one line naming the
// param.
func checkPause(v string) error {
	if _, _, err := ParsePause(v); err != nil {
		return fmt.Errorf("--param pause: %w", err)
	}
	return nil
}

func checkClock(v string) error {
	_, err := ParseClockDirections(v) // its error names the param
	return err
}

func checkShapes(v string) error {
	if _, err := ParseShapes(v); err != nil {
		return fmt.Errorf("--param partition: %w", err)
	}
	return nil
}

func checkFailover(v string) error {
	if _, err := ParseFailover(v); err != nil {
		return fmt.Errorf("--param failover: %w", err)
	}
	return nil
}

// shut ends a fault's run once its context is done: it marks the run
// closed under mu, so that no new strike begins, and waits for the strikes
// under way (each healed before it calls wg.Done).
func shut(mu *sync.Mutex, closed *bool, wg *sync.WaitGroup) {
	mu.Lock()
	*closed = true
	mu.Unlock()
	wg.Wait()
}
