// Package workloads drives the client processes: what each client does
// (acquire, critical section on the guarded resource, release, think), the
// guarded resource itself, and the recording of every operation into the
// history.
package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/protocol"
)

// Range is a duration drawn uniformly from [Min, Max].
type Range struct{ Min, Max time.Duration }

// Draw picks a duration from r with rnd.
func (r Range) Draw(rnd *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rnd.Int64N(int64(r.Max-r.Min)+1))
}

// Config is the workload's shape.
type Config struct {
	Clients     int
	Argv        []string // how to start a client process
	Hello       protocol.Hello
	Hold        Range // time between read and write in the critical section
	Think       Range // time between a release (or failed acquire) and the next acquire
	Seed        int64
	Dir         string        // run directory (client stderr goes to Dir/clients/)
	ReplyLimit  time.Duration // how long a running client may take to answer
	StartLimit  time.Duration // how long a client may take to start
	Tracker     *runstate.Tracker
	Recorder    *history.Recorder
	Resource    *Resource
	ResourceKey string
	// Reentrant: every cycle takes the lock twice, nested, and releases it
	// twice (for schemes with locks.Scheme.Reentrant).
	Reentrant bool
	// ReadWrite: each cycle is a reader's (Readers of them) or a writer's,
	// on a lock with shared and exclusive holders (locks.Scheme.ReadWrite).
	// A reader acquires in read mode, reads, holds and releases; a writer
	// acquires in write mode and does the read-modify-write.
	ReadWrite bool
	Readers   float64 // share of reader cycles; 2/3 when zero
	// ClientHost, when not nil, gives each new client process its own
	// network namespace (for partitions).
	ClientHost func(id int) (*netns.Host, error)
}

// Hook runs in a client's loop right after it acquired the lock, before it
// touches the resource: the place where a fault aimed at the holder strikes.
type Hook func(p *Process)

// InvokeHook runs in a client's loop just before an operation is sent to
// the client process: the place for a fault aimed at a request in flight.
type InvokeHook func(p *Process, op history.Op)

// Stopper is a fault that strikes inside a client's own steps: it asks the
// client to stop itself at one of its fault points (protocol.Point), and
// hears whether it did.
type Stopper interface {
	// Arm is asked before op is sent to p: the point of p's to stop at
	// ("" for none) and whether the stop is a crash (else a pause).
	Arm(p *Process, op history.Op) (point string, crash bool)
	// Stopped: p announced that it stops itself at point. A paused p is
	// frozen from now on until the stopper resumes it; a crashed one is
	// about to die. Called on the goroutine reading p's output: it must
	// not wait for p.
	Stopped(p *Process, point string, crash bool)
	// Missed: the request armed with point completed without p stopping
	// there (it never got there: a check failed, a SETNX was refused).
	Missed(p *Process, point string)
}

// Runner runs the workload.
type Runner struct {
	cfg Config

	mu         sync.Mutex
	hooks      []Hook
	invHooks   []InvokeHook
	stoppers   []Stopper
	armed      map[int]Stopper // client -> the stopper that armed its request in flight
	nextClient int
	procs      map[int]*Process
	holding    map[int]bool // clients between a successful acquire and their release
	nextOp     int64
	grants     int64 // successful acquires so far (outer ones, on a reentrant lock)
}

// NewRunner prepares a workload; Run starts it.
func NewRunner(cfg Config) *Runner {
	return &Runner{cfg: cfg, procs: map[int]*Process{}, holding: map[int]bool{}, armed: map[int]Stopper{}}
}

// AddStopper registers a fault that strikes at the clients' fault points.
func (r *Runner) AddStopper(s Stopper) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stoppers = append(r.stoppers, s)
}

// arm asks the stoppers whether op, about to be sent to p, should stop at
// a point; the first that says so arms it.
func (r *Runner) arm(p *Process, op history.Op, req *protocol.Request) {
	if len(p.Points()) == 0 {
		return
	}
	r.mu.Lock()
	stoppers := append([]Stopper(nil), r.stoppers...)
	r.mu.Unlock()
	for _, s := range stoppers {
		point, crash := s.Arm(p, op)
		if point == "" {
			continue
		}
		req.StopAt, req.Stop = point, protocol.StopPause
		if crash {
			req.Stop = protocol.StopCrash
		}
		r.mu.Lock()
		r.armed[p.ID] = s
		r.mu.Unlock()
		return
	}
}

// disarm ends the arming of p's request, with stopped false when p never
// announced a stop (the stopper hears it missed).
func (r *Runner) disarm(p *Process, point string, stopped bool) {
	r.mu.Lock()
	s := r.armed[p.ID]
	delete(r.armed, p.ID)
	r.mu.Unlock()
	if s != nil && !stopped {
		s.Missed(p, point)
	}
}

// selfStopped passes p's notice that it stops itself on to the stopper that
// armed its request.
func (r *Runner) selfStopped(p *Process, point string, crash bool) {
	r.mu.Lock()
	s := r.armed[p.ID]
	delete(r.armed, p.ID)
	r.mu.Unlock()
	if s != nil {
		s.Stopped(p, point, crash)
		return
	}
	// Nobody asked for it (the client stopped on its own): go on.
	if !crash {
		_ = p.Resume()
	}
}

// OnAcquire registers a hook run after every successful acquire.
func (r *Runner) OnAcquire(h Hook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = append(r.hooks, h)
}

// OnInvoke registers a hook run before every operation is sent.
func (r *Runner) OnInvoke(h InvokeHook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invHooks = append(r.invHooks, h)
}

// Grants returns how many successful acquires the run has had so far
// (outer ones, on a reentrant lock): the numbers a fault schedule's
// after-grant triggers count (Process.GrantNo).
func (r *Runner) Grants() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grants
}

// Holders returns how many clients believe they hold the lock now.
func (r *Runner) Holders() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holding)
}

// Holding reports whether client id believes it holds the lock now.
func (r *Runner) Holding(id int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holding[id]
}

// Waits reports whether the clients' acquires block (--wait).
func (r *Runner) Waits() bool { return r.cfg.Hello.Wait }

// ReadWrite reports whether the lock has shared (read) and exclusive
// (write) holders.
func (r *Runner) ReadWrite() bool { return r.cfg.ReadWrite }

// HolderGrants returns the grants (acquire ok events) of the clients that
// believe they hold the lock now, in client order.
func (r *Runner) HolderGrants() []history.Event {
	r.mu.Lock()
	var ps []*Process
	for id := range r.holding {
		if p := r.procs[id]; p != nil {
			ps = append(ps, p)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(ps, func(a, b *Process) int { return a.ID - b.ID })
	out := make([]history.Event, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Grant())
	}
	return out
}

func (r *Runner) setHolding(id int, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.holding[id] = true
	} else {
		delete(r.holding, id)
	}
}

// Processes returns the live client processes.
func (r *Runner) Processes() []*Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Process, 0, len(r.procs))
	for _, p := range r.procs {
		out = append(out, p)
	}
	return out
}

// Start starts every client process; it fails if any cannot start.
func (r *Runner) Start() ([]*Process, error) {
	var out []*Process
	for i := 0; i < r.cfg.Clients; i++ {
		p, err := r.spawn()
		if err != nil {
			for _, q := range out {
				q.Kill()
			}
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (r *Runner) spawn() (*Process, error) {
	r.mu.Lock()
	r.nextClient++
	id := r.nextClient
	r.mu.Unlock()
	hello := r.cfg.Hello
	hello.Type, hello.Version, hello.Client = protocol.TypeHello, protocol.Version, id
	argv := r.cfg.Argv
	var host *netns.Host
	if r.cfg.ClientHost != nil {
		h, err := r.cfg.ClientHost(id)
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", id, err)
		}
		host, argv = h, h.Command(argv...)
	}
	p, err := startProcess(argv, id, filepath.Join(r.cfg.Dir, "clients", fmt.Sprintf("client-%d.stderr", id)), hello, r.cfg.StartLimit)
	if err != nil {
		return nil, err
	}
	p.Host = host
	p.mu.Lock()
	p.onStop = r.selfStopped
	p.mu.Unlock()
	r.cfg.Tracker.AddProc(p.PID(), fmt.Sprintf("client %d", id))
	r.cfg.Recorder.Record(history.Event{Type: history.ClientStart, Client: id, PID: p.PID()}, nil)
	r.mu.Lock()
	r.procs[id] = p
	r.mu.Unlock()
	return p, nil
}

// Run drives the started processes until stop is done (then every client
// finishes its cycle, releasing a lock it holds, and shuts down) or ctx is
// done (an interrupt: clients are shut down at once). A client killed on
// purpose is replaced by a new one with a new id. It returns a harness error
// when a client misbehaves (exits by itself, hangs, prints garbage).
func (r *Runner) Run(ctx, stop context.Context, procs []*Process) error {
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.slot(ctx, stop, p, i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Runner) slot(ctx, stop context.Context, p *Process, slot int) error {
	rnd := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(slot)+1))
	for {
		err := r.loop(ctx, stop, p, rnd)
		r.exit(p, err)
		if err == nil || !errors.Is(err, ErrExited) || !p.Killed() {
			return err
		}
		if stop.Err() != nil {
			return nil
		}
		// Crashed on purpose: a fresh client takes its place.
		np, serr := r.spawn()
		if serr != nil {
			return fmt.Errorf("replace crashed client %d: %w", p.ID, serr)
		}
		p = np
	}
}

// exit shuts a process down if it still runs and records its end.
func (r *Runner) exit(p *Process, err error) {
	detail := "shut down"
	select {
	case <-p.Exited():
		if p.Killed() {
			detail = "killed"
		} else {
			detail = fmt.Sprintf("exited by itself: %v", p.exitError())
		}
	default:
		p.Shutdown(2 * time.Second)
	}
	if err != nil && !errors.Is(err, ErrExited) {
		detail = err.Error()
	}
	r.cfg.Tracker.RemoveProc(p.PID())
	r.cfg.Recorder.Record(history.Event{Type: history.ClientExit, Client: p.ID, Detail: detail}, nil)
	r.mu.Lock()
	delete(r.procs, p.ID)
	r.mu.Unlock()
}

// loop is one client's life: cycles until stop (nil), ctx (nil) or an error.
func (r *Runner) loop(ctx, stop context.Context, p *Process, rnd *rand.Rand) error {
	for stop.Err() == nil && ctx.Err() == nil {
		if err := r.cycle(ctx, p, rnd); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !sleep.For(ctx, r.cfg.Think.Draw(rnd)) {
			return nil
		}
	}
	return nil
}

// cycle: acquire; if granted: hooks, read, hold, write, release.
func (r *Runner) cycle(ctx context.Context, p *Process, rnd *rand.Rand) error {
	mode := ""
	if r.cfg.ReadWrite {
		readers := r.cfg.Readers
		if readers <= 0 {
			readers = 2.0 / 3
		}
		mode = history.ModeWrite
		if rnd.Float64() < readers {
			mode = history.ModeRead
		}
	}
	acq, err := r.op(ctx, p, history.Event{Op: history.Acquire, Mode: mode})
	if err != nil || acq.Type != history.OK {
		return err
	}
	r.mu.Lock()
	r.grants++
	no := r.grants
	r.mu.Unlock()
	p.mu.Lock()
	p.grant, p.grantNo = acq, no
	p.mu.Unlock()
	r.setHolding(p.ID, true)
	defer r.setHolding(p.ID, false)
	var inner history.Event
	if r.cfg.Reentrant {
		var ok bool
		if inner, ok, err = r.reenter(ctx, p, acq); err != nil || !ok {
			return err
		}
	}
	r.mu.Lock()
	hooks := append([]Hook(nil), r.hooks...)
	r.mu.Unlock()
	for _, h := range hooks {
		h(p)
	}
	read, err := r.op(ctx, p, history.Event{Op: history.Read, Token: acq.Token})
	if err != nil {
		return err
	}
	if read.Type == history.OK && mode == history.ModeRead {
		sleep.For(ctx, r.cfg.Hold.Draw(rnd))
	} else if read.Type == history.OK {
		sleep.For(ctx, r.cfg.Hold.Draw(rnd))
		if _, err := r.op(ctx, p, history.Event{Op: history.Write, Token: acq.Token, Value: history.Int64(*read.Value + 1)}); err != nil {
			return err
		}
	}
	if r.cfg.Reentrant {
		if _, err := r.op(ctx, p, history.Event{Op: history.Release, Owner: inner.Owner}); err != nil {
			return err
		}
	}
	_, err = r.op(ctx, p, history.Event{Op: history.Release, Owner: acq.Owner})
	return err
}

// reenter takes the lock a second time, nested in the hold that acq began:
// each acquire and release of a reentrant lock is its own operation. When
// the nested acquire does not succeed, the outer hold is released at once
// and ok is false.
func (r *Runner) reenter(ctx context.Context, p *Process, acq history.Event) (history.Event, bool, error) {
	inner, err := r.op(ctx, p, history.Event{Op: history.Acquire})
	if err != nil || inner.Type == history.OK {
		return inner, err == nil, err
	}
	_, err = r.op(ctx, p, history.Event{Op: history.Release, Owner: acq.Owner})
	return inner, false, err
}

// op records the invocation of inv, asks the client, and records the
// completion. Resource reads and writes take effect at the moment the
// client's answer arrives, in the same step as their completion event.
func (r *Runner) op(ctx context.Context, p *Process, inv history.Event) (history.Event, error) {
	r.mu.Lock()
	r.nextOp++
	inv.OpID = r.nextOp
	r.mu.Unlock()
	inv.Type, inv.Client = history.Invoke, p.ID
	start := r.cfg.Recorder.Record(inv, nil)
	r.mu.Lock()
	invHooks := append([]InvokeHook(nil), r.invHooks...)
	r.mu.Unlock()
	for _, h := range invHooks {
		h(p, inv.Op)
	}

	type result struct {
		rep protocol.Reply
		err error
	}
	done := make(chan result, 1)
	req := protocol.Request{Op: string(inv.Op), Owner: inv.Owner, Mode: inv.Mode}
	r.arm(p, inv.Op, &req)
	stops := p.selfStops.Load()
	go func() {
		rep, err := p.DoRequest(req, r.cfg.ReplyLimit)
		if req.StopAt != "" {
			r.disarm(p, req.StopAt, p.selfStops.Load() != stops)
		}
		done <- result{rep, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		// Interrupted: the outcome is unknown.
		p.Kill()
		res = <-done
		c := history.Event{Type: history.Info, Client: p.ID, Op: inv.Op, OpID: inv.OpID, Error: "interrupted"}
		return r.cfg.Recorder.Record(c, nil), ctx.Err()
	}
	c := history.Event{Client: p.ID, Op: inv.Op, OpID: inv.OpID, Mode: inv.Mode}
	if res.err != nil {
		c.Type, c.Error = history.Info, res.err.Error()
		r.cfg.Recorder.Record(c, nil)
		return c, res.err
	}
	rep := res.rep
	switch rep.Outcome {
	case string(history.OK), string(history.Fail), string(history.Info):
		c.Type = history.Type(rep.Outcome)
	default:
		c.Type, c.Error = history.Info, fmt.Sprintf("bad outcome %q", rep.Outcome)
		r.cfg.Recorder.Record(c, nil)
		return c, fmt.Errorf("client %d answered %s with outcome %q (want ok, fail or info)", p.ID, inv.Op, rep.Outcome)
	}
	c.Reason, c.Error, c.Removed = rep.Reason, rep.Error, rep.Removed
	c.Latency = r.cfg.Recorder.Now() - start.Time
	switch inv.Op {
	case history.Acquire:
		if c.Type == history.OK {
			if rep.Owner == "" {
				c.Type, c.Error = history.Info, "acquire ok without an owner id"
				r.cfg.Recorder.Record(c, nil)
				return c, fmt.Errorf("client %d: acquire ok without an owner id", p.ID)
			}
			c.Owner, c.Token, c.Nodes = rep.Owner, rep.Token, rep.Nodes
			if rep.ValidMs > 0 {
				c.Valid = rep.ValidMs * int64(time.Millisecond)
			}
		}
		return r.cfg.Recorder.Record(c, nil), nil
	case history.Read:
		return r.cfg.Recorder.Record(c, func(e *history.Event) {
			if e.Type == history.OK {
				r.cfg.Resource.read(e, inv.Token)
			}
		}), nil
	case history.Write:
		return r.cfg.Recorder.Record(c, func(e *history.Event) {
			if e.Type == history.OK {
				r.cfg.Resource.write(e, *inv.Value, inv.Token)
			}
		}), nil
	}
	return r.cfg.Recorder.Record(c, nil), nil
}

// Resource is the guarded resource: one integer, outside every fault. With
// fencing on it remembers the highest token it has seen, on reads and
// writes alike, and rejects a write whose token is lower: so of two holders
// that both read, the one with the older token cannot overwrite the other's
// increment, whichever writes first. Its state changes only inside the recorder's lock (Record's hook),
// so the history orders its accesses exactly.
type Resource struct {
	Fence    bool
	value    int64
	maxToken *int64
}

// NewResource returns a resource holding start.
func NewResource(start int64, fence bool) *Resource {
	return &Resource{Fence: fence, value: start}
}

func (res *Resource) read(e *history.Event, token *int64) {
	res.see(token)
	e.Value = history.Int64(res.value)
}

func (res *Resource) see(token *int64) {
	if token != nil && (res.maxToken == nil || *token > *res.maxToken) {
		res.maxToken = history.Int64(*token)
	}
}

func (res *Resource) write(e *history.Event, v int64, token *int64) {
	if res.Fence {
		if token == nil {
			e.Type, e.Reason, e.Error = history.Fail, history.ReasonStaleToken, "write without a fencing token"
			return
		}
		if res.maxToken != nil && *token < *res.maxToken {
			e.Type, e.Reason = history.Fail, history.ReasonStaleToken
			e.Error = fmt.Sprintf("token %d is lower than %d, already seen", *token, *res.maxToken)
			return
		}
	}
	res.see(token)
	e.Prev = history.Int64(res.value)
	res.value = v
	e.Value = history.Int64(v)
}

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0)) }
