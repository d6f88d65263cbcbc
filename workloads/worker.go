package workloads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/recipe"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/protocol"
)

// Serve is the body of a built-in client process (`locktest worker`): it
// speaks the client side of the pipe protocol on in/out with one of the
// reference schemes, until shutdown or the end of its input.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	dec := protocol.NewDecoder(in)
	enc := protocol.NewEncoder(out)
	var hello protocol.Hello
	if err := dec.Next(&hello); err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	ready := protocol.Ready{Type: protocol.TypeReady, Version: protocol.Version, PID: os.Getpid()}
	lock, scheme, clock, err := openLock(hello)
	if err != nil {
		ready.Error = err.Error()
		_ = enc.Send(ready)
		return err
	}
	defer lock.Close()
	// Fencing in a ready message: this run hands out tokens.
	ready.Lock = &protocol.LockInfo{Name: scheme.Name, Traits: scheme.Traits, Points: scheme.Points}
	ready.Lock.Fencing = scheme.Fencing && hello.Fence
	if err := enc.Send(ready); err != nil {
		return err
	}
	// leases holds the client's leases, innermost last: more than one only
	// while a reentrant lock is held nested. lease is the innermost.
	var leases []locks.Lease
	var lease locks.Lease
	for {
		var req protocol.Request
		if err := dec.Next(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		rep := protocol.Reply{ID: req.ID, Outcome: string(history.OK)}
		ctx := ctx
		if req.StopAt != "" {
			ctx = locks.WithGap(ctx, req.StopAt, stopSelf(enc, req))
		}
		switch req.Op {
		case protocol.OpAcquire:
			var l locks.Lease
			var err error
			if ml, ok := lock.(locks.ModeLock); ok && req.Mode != "" {
				l, err = ml.AcquireMode(ctx, req.Mode)
			} else {
				l, err = lock.Acquire(ctx)
			}
			fill(&rep, err)
			if err == nil {
				leases = append(leases, l)
				lease = l
				rep.Owner, rep.Token, rep.Nodes = l.Owner, l.Token, l.Nodes
				if scheme.ChecksValidity && !l.ValidUntil.IsZero() {
					rep.ValidMs = max(1, l.Left(clock).Milliseconds())
				}
			}
		case protocol.OpRelease:
			// The innermost lease with the owner asked for (any owner
			// when none is named).
			i := len(leases) - 1
			for req.Owner != "" && i >= 0 && leases[i].Owner != req.Owner {
				i--
			}
			if req.Owner != "" && i < 0 {
				rep.Outcome, rep.Reason = string(history.Fail), history.ReasonError
				rep.Error = fmt.Sprintf("no lease %q in this client", req.Owner)
				break
			}
			var l locks.Lease
			if i >= 0 {
				l = leases[i]
				leases = append(leases[:i], leases[i+1:]...)
			}
			res, err := lock.Release(ctx, l)
			fill(&rep, err)
			rep.Removed = res.Removed
			lease = locks.Lease{}
			if len(leases) > 0 {
				lease = leases[len(leases)-1]
			}
		case protocol.OpRead, protocol.OpWrite:
			// Most reference schemes keep using the resource whatever
			// their lease says, as most user code does; those that check
			// their validity stop once it has passed on their clock.
			if left := lease.Left(clock); scheme.ChecksValidity && !lease.ValidUntil.IsZero() && left < 0 {
				rep.Outcome, rep.Reason = string(history.Fail), history.ReasonNotHeld
				rep.Error = fmt.Sprintf("lease validity ended %s ago", (-left).Round(time.Millisecond))
			}
			// A client told by its lock that the lock is lost (zk-strict:
			// the session was suspended) stops using the resource too.
			if lo, ok := lock.(locks.Loser); ok && rep.Reason == "" {
				if lost, why := lo.Lost(); lost {
					rep.Outcome, rep.Reason, rep.Error = string(history.Fail), history.ReasonNotHeld, "lock lost: "+why
				}
			}
			// The check passed (or there was none): the resource changes
			// when this answer arrives, so a stop here is the gap between
			// the check and the act.
			if req.Op == protocol.OpWrite && rep.Reason == "" {
				locks.Gap(ctx, locks.PointAfterCheck)
			}
		case protocol.OpClock:
			clock.SetOffset(time.Duration(req.OffsetMs) * time.Millisecond)
		case protocol.OpShutdown:
			return enc.Send(rep)
		default:
			rep.Outcome, rep.Reason = string(history.Fail), history.ReasonError
			rep.Error = fmt.Sprintf("unknown op %q", req.Op)
		}
		if err := enc.Send(rep); err != nil {
			return err
		}
	}
}

// stopSelf returns the function that stops this client at a fault point,
// as req asks: it announces the stop (a notice with req's id), then freezes
// its own process group (SIGSTOP; the controller sends SIGCONT after the
// fault's length, and the client goes on from there) or kills it (a crash).
func stopSelf(enc *protocol.Encoder, req protocol.Request) func(string) {
	return func(point string) {
		how := req.Stop
		if how == "" {
			how = protocol.StopPause
		}
		if err := enc.Send(protocol.Reply{ID: req.ID, Stopped: point, Stop: how}); err != nil {
			return // the controller is gone: nobody would resume us
		}
		sig := syscall.SIGSTOP
		if how == protocol.StopCrash {
			sig = syscall.SIGKILL
		}
		// The signal goes to this very thread: sent to the process (or its
		// group), the kernel may hand it to another thread, and this one
		// could answer the request before the stop takes hold. A stop or
		// a kill of one thread stops or kills the whole process.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
	}
}

func fill(rep *protocol.Reply, err error) {
	t, reason := locks.Classify(err)
	rep.Outcome, rep.Reason = string(t), reason
	if err != nil {
		rep.Error = err.Error()
	}
}

// ServerSettings are what the topologies set up for a scheme's clients
// besides the addresses (the MySQL account, the Sentinel master's name):
// the worker hands them to every scheme in locks.Config.Server.
func ServerSettings() locks.ServerSettings {
	return locks.ServerSettings{
		MySQLUser:      recipe.MySQLUser,
		MySQLPassword:  recipe.MySQLPassword,
		MySQLDatabase:  recipe.MySQLDatabase,
		SentinelMaster: clusters.SentinelMaster,
	}
}

func openLock(h protocol.Hello) (locks.Lock, locks.Scheme, *locks.SkewClock, error) {
	clock := &locks.SkewClock{}
	if h.Version != protocol.Version {
		return nil, locks.Scheme{}, clock, fmt.Errorf("protocol version %d, this client speaks %d", h.Version, protocol.Version)
	}
	s, ok := locks.Lookup(h.Lock)
	if !ok {
		return nil, s, clock, fmt.Errorf("unknown lock scheme %q", h.Lock)
	}
	r := rand.New(rand.NewPCG(uint64(h.Seed), uint64(h.Client)))
	l, err := s.New(locks.Config{
		Addrs:     h.Servers,
		Key:       h.Key,
		TTL:       time.Duration(h.TTLMillis) * time.Millisecond,
		Fence:     h.Fence,
		OpTimeout: time.Duration(h.OpTimeoutMs) * time.Millisecond,
		Client:    h.Client,
		Clock:     clock,
		Rand:      r,
		Params:    h.Params,
		Server:    ServerSettings(),
	})
	if err != nil {
		return nil, s, clock, err
	}
	if h.Wait {
		l = locks.Blocking(l, 100*time.Millisecond, time.Duration(h.WaitTimeoutMs)*time.Millisecond, r)
	}
	return l, s, clock, nil
}
