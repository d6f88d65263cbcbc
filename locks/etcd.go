package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/locktest/locktest/history"
)

// etcdMutex is the mutex of etcd's concurrency package
// (go.etcd.io/etcd/client/v3/concurrency), written out so that the create
// revision of the client's key, the fencing token, is known without another
// round trip:
//
//   - a session: a lease with TTL = --ttl (whole seconds, rounded up) and a
//     keep-alive goroutine in the client process (a frozen process renews
//     nothing, and the lease expires);
//   - acquire: in one transaction, put pfx/<lease id> with the lease if it
//     does not exist, and read the key with the lowest create revision under
//     pfx; the lock is ours when that is our key. A try-lock (the default)
//     deletes its key and fails otherwise (Mutex.TryLock); with --wait it
//     waits until every key created before its own is deleted, then
//     re-reads its own key and fails with ErrSessionExpired when it is
//     gone (Mutex.Lock since etcd #11456; --param etcd-client=pre-11456
//     is the client before that fix, which takes the end of the wait as
//     the grant);
//   - release: delete the key (Mutex.Unlock).
//
// When the lease expired, the key is gone; a fresh session is made for the
// next acquire.
type etcdMutex struct {
	cfg    Config
	client *clientv3.Client
	sess   *concurrency.Session
	pfx    string
	ttl    int // seconds
	wait   time.Duration

	key string // our key while we hold the lock
}

var _ Waiter = (*etcdMutex)(nil)

func newEtcdMutex(c Config) (Lock, error) {
	if len(c.Addrs) == 0 {
		return nil, errors.New("etcd scheme needs server addresses")
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Second
	}
	ttl := int((c.TTL + time.Second - 1) / time.Second)
	ttl = max(ttl, 1)
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Addrs,
		DialTimeout: c.OpTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &etcdMutex{cfg: c, client: cl, pfx: "/locktest/" + c.Key + "/", ttl: ttl}, nil
}

// Wait returns the mutex with a blocking acquire up to timeout.
func (m *etcdMutex) Wait(timeout time.Duration) Lock {
	w := *m
	w.wait = timeout
	return &w
}

func (m *etcdMutex) Close() error {
	if m.sess != nil {
		m.sess.Orphan()
	}
	return m.client.Close()
}

func (m *etcdMutex) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.OpTimeout)
}

// session returns a live session, granting a new lease when the old one
// expired.
func (m *etcdMutex) session(ctx context.Context) (*concurrency.Session, error) {
	if m.sess != nil {
		select {
		case <-m.sess.Done():
			m.sess = nil
		default:
			return m.sess, nil
		}
	}
	gctx, cancel := m.opCtx(ctx)
	defer cancel()
	g, err := m.client.Grant(gctx, int64(m.ttl))
	if err != nil {
		// A lease granted but not heard of expires by itself and holds
		// nothing: no effect on the lock.
		return nil, fmt.Errorf("grant lease: %w: %w", ErrRejected, err)
	}
	s, err := concurrency.NewSession(m.client, concurrency.WithLease(g.ID), concurrency.WithTTL(m.ttl))
	if err != nil {
		return nil, fmt.Errorf("session: %w: %w", ErrRejected, err)
	}
	m.sess = s
	return s, nil
}

func (m *etcdMutex) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(m.cfg), m.cfg.clock().Now()
	if m.key != "" {
		return Lease{}, fmt.Errorf("%w: this client already holds it", ErrHeld)
	}
	s, err := m.session(ctx)
	if err != nil {
		return Lease{}, err
	}
	key := fmt.Sprintf("%s%x", m.pfx, s.Lease())
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	put := clientv3.OpPut(key, owner, clientv3.WithLease(s.Lease()))
	get := clientv3.OpGet(key)
	getOwner := clientv3.OpGet(m.pfx, clientv3.WithFirstCreate()...)
	tctx, cancel := m.opCtx(ctx)
	resp, err := m.client.Txn(tctx).If(cmp).Then(put, getOwner).Else(get, getOwner).Commit()
	cancel()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The session's lease expired (the client was frozen): the
		// transaction was refused as a whole.
		m.sess = nil
		return Lease{}, fmt.Errorf("acquire: %w: %w", ErrRejected, err)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("acquire: %w: %w", ErrIndeterminate, err)
	}
	myRev := resp.Header.Revision
	if !resp.Succeeded {
		myRev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	grant := func() (Lease, error) {
		m.key = key
		l := Lease{Owner: owner, Acquired: start}
		if m.cfg.Fence {
			l.Token = history.Int64(myRev)
		}
		return l, nil
	}
	// No key under the prefix, or ours the oldest: held.
	if first := resp.Responses[1].GetResponseRange().Kvs; len(first) == 0 || first[0].CreateRevision == myRev {
		return grant()
	}
	if m.wait <= 0 {
		// Mutex.TryLock: delete our key, ErrLocked.
		dctx, cancel := m.opCtx(ctx)
		_, err := m.client.Delete(dctx, key)
		cancel()
		if err != nil {
			return Lease{}, fmt.Errorf("acquire: %w: held, and deleting our key failed: %w", ErrIndeterminate, err)
		}
		// The key ahead may be a waiter about to give up.
		return Lease{}, fmt.Errorf("%w (a key created before ours, revision %d)", ErrContended, myRev)
	}
	// Mutex.Lock: wait until every key created before ours is deleted.
	wctx, cancel := context.WithTimeout(ctx, m.wait)
	err = m.waitDeletes(wctx, myRev-1)
	timedOut := errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	if err != nil {
		// Mutex.Lock: Unlock (delete our key), return the error.
		dctx, cancel := m.opCtx(context.Background())
		_, derr := m.client.Delete(dctx, key)
		cancel()
		switch {
		case derr != nil:
			return Lease{}, fmt.Errorf("acquire: %w: waiting: %w; deleting our key: %w", ErrIndeterminate, err, derr)
		case timedOut:
			return Lease{}, fmt.Errorf("%w: gave up waiting after %s", ErrContended, m.wait)
		}
		return Lease{}, fmt.Errorf("acquire: %w: waiting: %w", ErrIndeterminate, err)
	}
	if isVariant(m.cfg, "etcd-client", "pre-11456") {
		// The client before etcd #11456 took the end of the wait as the
		// grant, whether or not its own key (and session) still existed.
		return grant()
	}
	// Since #11456: make sure the session is not expired and our key
	// still exists.
	gctx, gcancel := m.opCtx(ctx)
	g, err := m.client.Get(gctx, key)
	gcancel()
	if err != nil {
		dctx, cancel := m.opCtx(context.Background())
		_, _ = m.client.Delete(dctx, key)
		cancel()
		return Lease{}, fmt.Errorf("acquire: %w: re-reading our key: %w", ErrIndeterminate, err)
	}
	if len(g.Kvs) == 0 {
		// concurrency.ErrSessionExpired: the lease ran out while we
		// waited, and the key with it; we hold nothing.
		m.sess = nil
		return Lease{}, fmt.Errorf("%w: %w: our key %s is gone after the wait (its lease expired)", ErrRejected, concurrency.ErrSessionExpired, key)
	}
	return grant()
}

// waitDeletes is the concurrency package's waitDeletes: until no key under
// pfx has a create revision <= maxCreateRev, wait for the deletion of the
// last one created.
func (m *etcdMutex) waitDeletes(ctx context.Context, maxCreateRev int64) error {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxCreateRev))
	for {
		gctx, cancel := m.opCtx(ctx)
		resp, err := m.client.Get(gctx, m.pfx, opts...)
		cancel()
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := m.waitDelete(ctx, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitDelete is the concurrency package's waitDelete: watch key from rev
// until it is deleted.
func (m *etcdMutex) waitDelete(ctx context.Context, key string, rev int64) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wr clientv3.WatchResponse
	for wr = range m.client.Watch(cctx, key, clientv3.WithRev(rev)) {
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := wr.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("lost watcher waiting for delete")
}

// Release deletes our key. Like Mutex.Unlock it succeeds whether or not the
// key was still there (an expired lease took it); Removed says "-" then.
func (m *etcdMutex) Release(ctx context.Context, _ Lease) (ReleaseResult, error) {
	if m.key == "" {
		return ReleaseResult{Removed: "-"}, ErrNotOwner
	}
	key := m.key
	m.key = ""
	dctx, cancel := m.opCtx(ctx)
	defer cancel()
	resp, err := m.client.Delete(dctx, key)
	if err != nil {
		return ReleaseResult{}, fmt.Errorf("release: %w: %w", ErrIndeterminate, err)
	}
	if resp.Deleted == 0 {
		return ReleaseResult{Removed: "-"}, nil
	}
	return ReleaseResult{}, nil
}
