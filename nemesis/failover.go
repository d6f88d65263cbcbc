package nemesis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/workloads"
)

// FailoverNeeder is a nemesis that needs a topology that can fail over (a
// clusters.Failoverer); the harness refuses other topologies up front.
type FailoverNeeder interface{ NeedsFailover() bool }

// failoverLimit bounds one FailPrimary or Rejoin.
const failoverLimit = 60 * time.Second

// failover makes the primary of a replicated topology fail right after a
// grant and gets a replica promoted, each in the topology's own way
// (clusters.Failoverer): the new primary may not have the grant, which is
// then lost while its holder goes on believing in it. The fault starts when
// the grant's holder is seen, a note records the promotion when it is done,
// and the fault ends when the old primary, down for 1-2 s, has rejoined as
// a replica of the new one. The next failover waits for a grant at least
// 1-2 s after that. A topology that cannot fail over is an error.
//
// --param failover=isolate (topologies that are a clusters.Isolator:
// redis-sentinel on the local backend) fails the primary by cutting it off
// the network instead of killing it: DROP rules in its namespace, healed
// when the fault ends, so the old primary comes back with its stale data
// and is demoted by the topology.
type failover struct{}

// Failover modes (--param failover=MODE).
const (
	FailoverKill    = "kill"
	FailoverIsolate = "isolate"
)

// ParseFailover reads the failover param ("" means kill).
func ParseFailover(s string) (string, error) {
	switch m := strings.TrimSpace(s); m {
	case "", FailoverKill:
		return FailoverKill, nil
	case FailoverIsolate:
		return m, nil
	}
	return "", fmt.Errorf("unknown failover mode %q (known: %s, %s)", s, FailoverKill, FailoverIsolate)
}

func (*failover) Name() string        { return "failover" }
func (*failover) NeedsFailover() bool { return true }

// NeedsNetWith: isolating the primary needs the network layer; killing it
// does not.
func (*failover) NeedsNetWith(params map[string]string) bool {
	m, err := ParseFailover(params["failover"])
	return err == nil && m == FailoverIsolate
}

func (*failover) NetSetting() string { return "failover=" + FailoverIsolate }

func (*failover) Run(ctx context.Context, env *Env) error {
	fo, ok := env.Cluster.(clusters.Failoverer)
	if !ok {
		return fmt.Errorf("topology %s cannot fail over: it has no primary with a replica to promote", env.Cluster.Topology())
	}
	mode, err := ParseFailover(env.Params["failover"])
	if err != nil {
		return err
	}
	failPrimary, how, back := fo.FailPrimary, "fail", "rejoined as a replica"
	if mode == FailoverIsolate {
		iso, ok := env.Cluster.(clusters.Isolator)
		if !ok || env.Net == nil {
			return fmt.Errorf("failover=isolate: topology %s cannot isolate its primary (redis-sentinel with the network layer can)", env.Cluster.Topology())
		}
		failPrimary, how, back = iso.IsolatePrimary, "isolate", "healed, came back with its stale data and rejoined as a replica"
	}
	r := rng(env, "failover")
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	busy, closed := false, false
	next := time.Now().Add(between(r, 500*time.Millisecond, time.Second))
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
		// busy stays set: no more failovers on a broken topology.
	}
	env.Workload.OnAcquire(func(p *workloads.Process) {
		mu.Lock()
		if closed || busy || time.Now().Before(next) {
			mu.Unlock()
			return
		}
		busy = true
		down := between(r, time.Second, 2*time.Second)
		cool := between(r, time.Second, 2*time.Second)
		// Added under the lock that Run takes before it waits: a failover
		// begun here has rejoined before Run returns.
		wg.Add(1)
		mu.Unlock()
		end := fault(env, "failover", "primary", p.ID, fmt.Sprintf("%s the primary right after client %d's grant and promote a replica", how, p.ID))
		// The holder goes on while the topology fails over, as it would.
		go func() {
			defer wg.Done()
			fctx, cancel := context.WithTimeout(context.Background(), failoverLimit)
			line, err := failPrimary(fctx)
			cancel()
			if err != nil {
				end("failover failed: " + err.Error())
				fail(fmt.Errorf("fail primary: %w", err))
				return
			}
			env.Recorder.Record(history.Event{Type: history.Note, Client: p.ID, Detail: history.FailoverNote + line}, nil)
			// Down for a while, even when the run is ending: the cluster is
			// whole again before Run returns.
			sleep.For(ctx, down)
			rctx, cancel := context.WithTimeout(context.Background(), failoverLimit)
			err = fo.Rejoin(rctx)
			cancel()
			if err != nil {
				end(line + "; rejoin failed: " + err.Error())
				fail(fmt.Errorf("rejoin: %w", err))
				return
			}
			end(line + "; the old primary " + back)
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
	return firstErr
}
