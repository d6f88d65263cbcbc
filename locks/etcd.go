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
//     watches the key just before its own until it is deleted (Mutex.Lock);
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
	deadline := time.Now().Add(m.wait)
	first := resp.Responses[1].GetResponseRange().Kvs
	for {
		if len(first) == 0 || first[0].CreateRevision == myRev {
			m.key = key
			l := Lease{Owner: owner, Acquired: start}
			if m.cfg.Fence {
				l.Token = history.Int64(myRev)
			}
			return l, nil
		}
		if m.wait <= 0 || !time.Now().Before(deadline) {
			dctx, cancel := m.opCtx(ctx)
			_, err := m.client.Delete(dctx, key)
			cancel()
			if err != nil {
				return Lease{}, fmt.Errorf("acquire: %w: held, and deleting our key failed: %w", ErrIndeterminate, err)
			}
			// The key ahead may be a waiter about to give up.
			return Lease{}, fmt.Errorf("%w (create revision %d before ours, %d)", ErrContended, first[0].CreateRevision, myRev)
		}
		// Wait for the deletion of the last key created before ours.
		if first, err = m.waitPredecessor(ctx, myRev, deadline); err != nil {
			dctx, cancel := m.opCtx(context.Background())
			_, _ = m.client.Delete(dctx, key)
			cancel()
			return Lease{}, fmt.Errorf("acquire: %w: %w", ErrIndeterminate, err)
		}
	}
}

// waitPredecessor waits until the last key under pfx created before myRev
// is deleted or the deadline passes, and returns the current first key.
func (m *etcdMutex) waitPredecessor(ctx context.Context, myRev int64, deadline time.Time) ([]*mvccpb.KeyValue, error) {
	gctx, cancel := m.opCtx(ctx)
	resp, err := m.client.Get(gctx, m.pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(myRev-1))...)
	cancel()
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) > 0 {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		wch := m.client.Watch(wctx, string(resp.Kvs[0].Key), clientv3.WithRev(resp.Header.Revision+1))
	loop:
		for w := range wch {
			for _, ev := range w.Events {
				if ev.Type == clientv3.EventTypeDelete {
					break loop
				}
			}
		}
		cancel()
	}
	gctx, cancel = m.opCtx(ctx)
	defer cancel()
	first, err := m.client.Get(gctx, m.pfx, clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, err
	}
	return first.Kvs, nil
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
