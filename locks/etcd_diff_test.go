package locks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/locktest/locktest/locks"
)

// decision is what one acquire or release decided, in terms both etcd's
// concurrency.Mutex and the etcd scheme can be read in.
type decision string

const (
	granted        decision = "granted"
	refusedLocked  decision = "refused: locked"          // ErrLocked / ErrContended
	sessionExpired decision = "refused: session expired" // ErrSessionExpired
	released       decision = "released"
)

// contender is one side of the differential test: the real library or the
// scheme written out from it.
type contender interface {
	try(ctx context.Context) decision
	lock(ctx context.Context) decision
	unlock(ctx context.Context) decision
}

// library is etcd's own concurrency.Mutex.
type library struct {
	t   *testing.T
	m   *concurrency.Mutex
	ses *concurrency.Session
}

func newLibrary(t *testing.T, cl *clientv3.Client, key string) *library {
	t.Helper()
	s, err := concurrency.NewSession(cl, concurrency.WithTTL(5))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &library{t: t, m: concurrency.NewMutex(s, "/locktest/"+key), ses: s}
}

func (l *library) read(err error) decision {
	switch {
	case err == nil:
		return granted
	case errors.Is(err, concurrency.ErrLocked):
		return refusedLocked
	case errors.Is(err, concurrency.ErrSessionExpired):
		return sessionExpired
	}
	return decision("unexpected error: " + err.Error())
}

func (l *library) try(ctx context.Context) decision  { return l.read(l.m.TryLock(ctx)) }
func (l *library) lock(ctx context.Context) decision { return l.read(l.m.Lock(ctx)) }
func (l *library) unlock(ctx context.Context) decision {
	require.NoError(l.t, l.m.Unlock(ctx))
	return released
}

// scheme is the etcd scheme, as try-lock and with --wait.
type scheme struct {
	t           *testing.T
	tryL, waitL locks.Lock
	lease       locks.Lease
}

func newScheme(t *testing.T, addrs []string, key string, params map[string]string) *scheme {
	t.Helper()
	s := lookup(t, "etcd")
	l, err := s.New(locks.Config{Addrs: addrs, Key: key, TTL: 5 * time.Second, OpTimeout: time.Second, Client: 1, Params: params})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &scheme{t: t, tryL: l, waitL: locks.Blocking(l, 50*time.Millisecond, 10*time.Second, nil)}
}

func (s *scheme) read(l locks.Lease, err error) decision {
	switch {
	case err == nil:
		s.lease = l
		return granted
	case errors.Is(err, locks.ErrContended):
		return refusedLocked
	case errors.Is(err, locks.ErrRejected) && errors.Is(err, concurrency.ErrSessionExpired):
		return sessionExpired
	}
	return decision("unexpected error: " + err.Error())
}

func (s *scheme) try(ctx context.Context) decision  { return s.read(s.tryL.Acquire(ctx)) }
func (s *scheme) lock(ctx context.Context) decision { return s.read(s.waitL.Acquire(ctx)) }
func (s *scheme) unlock(ctx context.Context) decision {
	// The waiting handle shares the try-lock's state only by value: release
	// through whichever acquired.
	for _, l := range []locks.Lock{s.waitL, s.tryL} {
		if _, err := l.Release(ctx, s.lease); err == nil {
			return released
		} else if !errors.Is(err, locks.ErrNotOwner) {
			s.t.Fatalf("scheme: release: %v", err)
		}
	}
	s.t.Fatal("scheme: release: not held")
	return ""
}

// keys lists the keys under the lock's prefix, oldest first, with their
// leases.
func keys(t *testing.T, cl *clientv3.Client, key string) []clientv3.LeaseID {
	t.Helper()
	r, err := cl.Get(context.Background(), "/locktest/"+key+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	require.NoError(t, err)
	out := make([]clientv3.LeaseID, len(r.Kvs))
	for i, kv := range r.Kvs {
		out[i] = clientv3.LeaseID(kv.Lease)
	}
	return out
}

// TestEtcdSchemeFollowsConcurrencyMutex drives etcd's own
// concurrency.Mutex (v3.5) and the etcd scheme through the same scripted
// server states on a real etcd and asserts that they decide alike; the
// pre-11456 variant decides as the client before that fix did.
func TestEtcdSchemeFollowsConcurrencyMutex(t *testing.T) {
	t.Parallel()
	cl := startEnsemble(t, "etcd3")
	addrs := cl.Addrs()
	ec, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ec.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	sides := []struct {
		name   string
		make   func(t *testing.T, key string) contender
		expiry decision // a waiter whose key expired while it waited
	}{
		{"concurrency.Mutex", func(t *testing.T, key string) contender { return newLibrary(t, ec, key) }, sessionExpired},
		{"scheme", func(t *testing.T, key string) contender { return newScheme(t, addrs, key, nil) }, sessionExpired},
		{"scheme etcd-client=pre-11456", func(t *testing.T, key string) contender {
			return newScheme(t, addrs, key, map[string]string{"etcd-client": "pre-11456"})
		}, granted},
	}
	for i, side := range sides {
		t.Run(side.name, func(t *testing.T) {
			t.Run("contended try deletes its key", func(t *testing.T) {
				key := fmt.Sprintf("diff-try-%d", i)
				holder := newLibrary(t, ec, key)
				require.Equal(t, granted, holder.lock(ctx))
				c := side.make(t, key)
				require.Equal(t, refusedLocked, c.try(ctx))
				require.Len(t, keys(t, ec, key), 1, "only the holder's key is left")
				holder.unlock(ctx)
				require.Equal(t, granted, c.try(ctx), "free once released")
				require.Equal(t, released, c.unlock(ctx))
				require.Empty(t, keys(t, ec, key))
			})
			t.Run("release of a gone key succeeds", func(t *testing.T) {
				key := fmt.Sprintf("diff-gone-%d", i)
				c := side.make(t, key)
				require.Equal(t, granted, c.try(ctx))
				ks := keys(t, ec, key)
				require.Len(t, ks, 1)
				_, err := ec.Revoke(ctx, ks[0])
				require.NoError(t, err)
				require.Equal(t, released, c.unlock(ctx))
			})
			t.Run("waiter whose key expired", func(t *testing.T) {
				key := fmt.Sprintf("diff-wait-%d", i)
				holder := newLibrary(t, ec, key)
				require.Equal(t, granted, holder.lock(ctx))
				c := side.make(t, key)
				got := make(chan decision, 1)
				go func() { got <- c.lock(ctx) }()
				var ks []clientv3.LeaseID
				require.Eventually(t, func() bool { ks = keys(t, ec, key); return len(ks) == 2 }, 5*time.Second, 20*time.Millisecond, "the waiter's key")
				// The waiter's lease runs out (as under a frozen client),
				// then the holder releases.
				_, err := ec.Revoke(ctx, ks[1])
				require.NoError(t, err)
				holder.unlock(ctx)
				select {
				case d := <-got:
					require.Equal(t, side.expiry, d)
				case <-time.After(15 * time.Second):
					t.Fatal("the waiter never returned")
				}
				require.Empty(t, keys(t, ec, key), "no key left: the lock is free, whatever the waiter believes")
			})
		})
	}
}
