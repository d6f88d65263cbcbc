package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/workloads"
)

// pause freezes the lock holder right after it acquires, for longer than
// its lease, then lets it go on believing it still holds the lock.
type pause struct{}

func (*pause) Name() string { return "pause" }

// ParsePause reads the pause param, "LO..HI": pause lengths as multiples of
// the TTL (default 1.5..3, longer than the lease; e.g. 0.1..0.3 for pauses a
// lease renewal should survive).
func ParsePause(s string) (lo, hi float64, err error) {
	if strings.TrimSpace(s) == "" {
		return 1.5, 3, nil
	}
	a, b, found := strings.Cut(s, "..")
	if !found {
		b = a
	}
	lo, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	hi, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("%q: want LO..HI, multiples of the TTL (e.g. 0.1..0.3)", s)
	case lo <= 0 || hi < lo || hi > 20:
		return 0, 0, fmt.Errorf("%q: want 0 < LO <= HI <= 20", s)
	}
	return lo, hi, nil
}

func (*pause) Run(ctx context.Context, env *Env) error {
	r := rng(env, "pause")
	lo, hi, err := ParsePause(env.Params["pause"])
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	busy, closed := false, false
	next := time.Now().Add(between(r, 500*time.Millisecond, time.Second))
	env.Workload.OnAcquire(func(p *workloads.Process) {
		mu.Lock()
		if closed || busy || time.Now().Before(next) {
			mu.Unlock()
			return
		}
		d := scaled(r, env.TTL, lo, hi)
		cool := scaled(r, env.TTL, 0.5, 1.5)
		busy = true
		// Added under the lock that Run takes before it waits: a pause
		// begun here is always healed before Run returns.
		wg.Add(1)
		mu.Unlock()
		if err := p.Pause(); err != nil {
			mu.Lock()
			busy = false
			mu.Unlock()
			wg.Done()
			return
		}
		end := fault(env, "pause", fmt.Sprintf("client %d", p.ID), p.ID, fmt.Sprintf("SIGSTOP for %s", d.Round(time.Millisecond)))
		go func() {
			defer wg.Done()
			detail := "SIGCONT"
			if !sleepCtx(ctx, d) {
				detail = "SIGCONT (run ending)"
			}
			_ = p.Resume()
			end(detail)
			mu.Lock()
			busy = false
			next = time.Now().Add(cool)
			mu.Unlock()
		}()
	})
	<-ctx.Done()
	mu.Lock()
	closed = true
	mu.Unlock()
	wg.Wait()
	return nil
}

// crashClient kills the lock holder right after it acquires.
type crashClient struct{}

func (*crashClient) Name() string { return "crash-client" }

func (*crashClient) Run(ctx context.Context, env *Env) error {
	r := rng(env, "crash-client")
	var mu sync.Mutex
	closed := false
	next := time.Now().Add(between(r, 500*time.Millisecond, time.Second))
	env.Workload.OnAcquire(func(p *workloads.Process) {
		// The whole fault runs under the lock Run takes before it
		// returns: no crash starts after Run returned.
		mu.Lock()
		defer mu.Unlock()
		if closed || time.Now().Before(next) {
			return
		}
		next = time.Now().Add(scaled(r, env.TTL, 2, 4))
		end := fault(env, "crash-client", fmt.Sprintf("client %d", p.ID), p.ID, "SIGKILL while holding the lock")
		p.Kill()
		end("process gone")
	})
	<-ctx.Done()
	mu.Lock()
	closed = true
	mu.Unlock()
	return nil
}

// pauseServer freezes a server for a while.
type pauseServer struct{}

func (*pauseServer) Name() string { return "pause-server" }

func (*pauseServer) Run(ctx context.Context, env *Env) error {
	r := rng(env, "pause-server")
	nodes := env.Cluster.Nodes()
	for sleepCtx(ctx, between(r, time.Second, 3*time.Second)) {
		n, err := target(ctx, env, r, nodes, env.Params["pause-server"])
		if err != nil {
			if ctx.Err() != nil {
				return nil // the run ended while an election was under way
			}
			return err
		}
		d := scaled(r, env.TTL, 0.5, 2)
		if err := n.Pause(); err != nil {
			return err
		}
		end := fault(env, "pause-server", n.Name(), 0, fmt.Sprintf("SIGSTOP for %s", d.Round(time.Millisecond)))
		sleepCtx(ctx, d)
		err = n.Resume()
		end("SIGCONT")
		if err != nil {
			return err
		}
	}
	return nil
}

// killServer kills a server and restarts it empty.
type killServer struct{}

func (*killServer) Name() string { return "kill" }

func (*killServer) Run(ctx context.Context, env *Env) error {
	r := rng(env, "kill")
	nodes := env.Cluster.Nodes()
	for sleepCtx(ctx, between(r, time.Second, 3*time.Second)) {
		n, err := target(ctx, env, r, nodes, env.Params["kill"])
		if err != nil {
			if ctx.Err() != nil {
				return nil // the run ended while an election was under way
			}
			return err
		}
		down := between(r, 300*time.Millisecond, time.Second)
		if err := n.Kill(); err != nil {
			return err
		}
		end := fault(env, "kill", n.Name(), 0, fmt.Sprintf("SIGKILL, restart after %s", down.Round(time.Millisecond)))
		sleepCtx(ctx, down)
		// Restart even when the run is ending: the cluster must be whole
		// for a clean stop. A fresh context bounds the restart.
		rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err = n.Restart(rctx)
		cancel()
		if err != nil {
			end("restart failed: " + err.Error())
			return errors.Join(fmt.Errorf("restart %s", n.Name()), err)
		}
		if k, ok := n.(interface{ KeepsData() bool }); ok && k.KeepsData() {
			end("restarted with its data")
		} else {
			end("restarted")
		}
	}
	return nil
}

// target picks the server a server fault hits: a random one, or with
// --param kill=leader (pause-server=leader) the current leader of a
// topology that elects one (clusters.Leader).
func target(ctx context.Context, env *Env, r *rand.Rand, nodes []clusters.Node, param string) (clusters.Node, error) {
	n := nodes[r.IntN(len(nodes))]
	if param != "leader" {
		return n, nil
	}
	l, ok := env.Cluster.(clusters.Leader)
	if !ok {
		return nil, fmt.Errorf("topology %s has no leader to aim at", env.Cluster.Topology())
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leader, err := l.Leader(lctx)
	if err != nil {
		return nil, fmt.Errorf("find the leader: %w", err)
	}
	return leader, nil
}
