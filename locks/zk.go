package locks

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/history"
)

// The ZooKeeper schemes follow Apache Curator's recipes over a plain
// session (github.com/go-zookeeper/zk), with the session timeout set from
// the run's TTL:
//
//   - zk (InterProcessMutex): an EPHEMERAL_SEQUENTIAL child under the lock
//     path, created with a protected name (a GUID prefix) so that a create
//     retried after a connection loss finds the node it made; the lowest
//     sequence number holds; a waiter watches its immediate predecessor.
//     Reentrant per client. The node vanishes when the session expires,
//     but the client keeps believing it holds the lock until told otherwise.
//   - zk-strict: the same, but it treats a connection loss (Curator's
//     SUSPENDED) or an expired session as "lock lost" and stops using the
//     resource, as Curator's tech note advises. It hears of them as a
//     Curator listener does: the ZooKeeper client's own goroutines notice
//     the loss (no answer for 2/3 of the session timeout) and an event
//     goroutine delivers it, so a client resumed from a pause may use the
//     resource before it has heard.
//   - zk-semaphore (InterProcessSemaphoreMutex): a one-lease semaphore; an
//     internal mutex under locks/ serializes the lease count under leases/.
//     Not reentrant.
//   - zk-rw (InterProcessReadWriteLock): __READ__ and __WRIT__ children; a
//     writer holds when its node is the lowest, a reader when no writer's
//     node comes before its own.
//
// Parents are CONTAINER nodes, as Curator creates them. The fencing token is
// the lock node's czxid (the zxid that created it): it grows with every
// transaction of the ensemble, so a later grant has a larger token, even
// after the server reaped the empty parent and it was made again.
// --param zk-token=sequence fences with the node's sequence number
// instead, which starts again from 0 in a new parent.

// Lock modes for schemes with shared and exclusive holders (ModeLock).
const (
	ModeRead  = "read"
	ModeWrite = "write"
)

// ModeLock is a lock with shared (read) and exclusive (write) holders.
type ModeLock interface {
	AcquireMode(ctx context.Context, mode string) (Lease, error)
}

// Loser is a lock whose client can learn, between acquire and release,
// that it lost the lock (zk-strict: the session was suspended or expired).
// A client that lost it answers read and write with fail/not-held.
type Loser interface {
	// Lost reports whether the lease the client holds is lost, and why.
	Lost() (bool, string)
}

// zkSession is one client's ZooKeeper session.
type zkSession struct {
	cfg     Config
	conn    *zk.Conn
	root    string
	timeout time.Duration // the session timeout
	opLimit time.Duration // one request's deadline

	lost      atomic.Value  // string: why the session was suspended, "" if not
	events    chan zk.State // session states, for the event goroutine
	made      map[string]bool
	closed    chan struct{}
	closeOnce sync.Once
}

func newZKSession(c Config) (*zkSession, error) {
	if len(c.Addrs) == 0 {
		return nil, errors.New("zookeeper scheme needs server addresses")
	}
	if c.TTL <= 0 {
		c.TTL = 2 * time.Second
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Second
	}
	s := &zkSession{cfg: c, timeout: c.TTL, made: map[string]bool{}, closed: make(chan struct{}), events: make(chan zk.State, stateQueue), root: "/locktest/" + strings.NewReplacer("/", "_", ":", "_").Replace(c.Key)}
	// The client learns of a dead connection after 2/3 of the session
	// timeout; a request waits at least that long.
	s.opLimit = max(c.OpTimeout, c.TTL)
	s.lost.Store("")
	go s.deliver()
	conn, _, err := zk.Connect(c.Addrs, c.TTL,
		zk.WithLogger(log.New(io.Discard, "", 0)),
		zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession {
				s.queue(ev.State)
			}
		}))
	if err != nil {
		s.closeOnce.Do(func() { close(s.closed) })
		return nil, fmt.Errorf("zookeeper connect: %w", err)
	}
	s.conn = conn
	return s, nil
}

// stateQueue is how many session states wait for the event goroutine
// before queue hands them over from a goroutine of their own.
const stateQueue = 64

// queue hands a session state from the ZooKeeper client's goroutine (it
// calls back from its connection loop when it notices the change) to the
// event goroutine, as Curator's ConnectionStateManager.addStateChange puts
// it on its queue: the connection loop never blocks on a listener.
func (s *zkSession) queue(st zk.State) {
	select {
	case s.events <- st:
	default:
		go func() {
			select {
			case s.events <- st:
			case <-s.closed:
			}
		}()
	}
}

// deliver is the session's event goroutine (Curator's
// ConnectionStateManager.processEvents thread): it takes the states in
// order and tells the listener, here the strict client's "lost" flag.
// Until it has, the client goes on as if connected: a client resumed from
// a pause races its own library to learn that it was cut off.
func (s *zkSession) deliver() {
	for {
		select {
		case st := <-s.events:
			if why := lostBy(st); why != "" {
				s.lost.Store(why)
			}
		case <-s.closed:
			return
		}
	}
}

// lostBy is why session state st means a strict client's lock is lost
// (Curator's SUSPENDED and LOST), "" when it does not.
func lostBy(st zk.State) string {
	switch st {
	case zk.StateDisconnected:
		return "connection to ZooKeeper lost (suspended)"
	case zk.StateExpired:
		return "ZooKeeper session expired"
	}
	return ""
}

func (s *zkSession) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	s.conn.Close()
	return nil
}

// call runs f with the request deadline, retrying it after a connection
// loss while the deadline allows, as Curator's RetryLoop does (every f given
// is idempotent: a create that ignores NodeExists, a read, or the delete of
// the client's own node, where NoNode after a retry may mean the first try
// worked). A request that may have been sent and was never answered is
// indeterminate; one that could not be sent (no server) had no effect.
func (s *zkSession) call(ctx context.Context, what string, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opLimit)
	defer cancel()
	sent := false
	for {
		done := make(chan error, 1)
		go func() { done <- f() }()
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w: no answer within %s", what, ErrIndeterminate, s.opLimit)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrConnectionClosed):
			sent = sent || errors.Is(err, zk.ErrConnectionClosed)
			select {
			case <-ctx.Done():
				if !sent {
					return fmt.Errorf("%s: %w: %w", what, ErrRejected, err)
				}
				return fmt.Errorf("%s: %w: %w", what, ErrIndeterminate, err)
			case <-time.After(50 * time.Millisecond):
			}
			continue
		case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrSessionMoved):
			return fmt.Errorf("%s: %w: %w", what, ErrIndeterminate, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
}

// ensure creates path and its parents as CONTAINER nodes, as Curator's
// creatingParentContainersIfNeeded does: the server deletes a container
// once its last child is gone (znode.container.checkIntervalMs later), and
// the next create makes it again.
//
// A parent that existed a moment ago may be reaped before its child is
// made (the child's create then finds no node): the whole path is made
// again from the top, a few times, as Curator's retry does.
func (s *zkSession) ensure(ctx context.Context, path string) error {
	var err error
	for try := 0; try < ensureTries; try++ {
		if err = s.ensureOnce(ctx, path); !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return err
}

// ensureTries bounds how often ensure makes a path again after a parent
// was reaped under it.
const ensureTries = 5

// beforeEnsureLevel, when set (tests only), is called before ensure makes
// each level of a path: a test reaps a parent there, as the server can.
var beforeEnsureLevel atomic.Pointer[func(path string)]

func (s *zkSession) ensureOnce(ctx context.Context, path string) error {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := range parts {
		p := "/" + strings.Join(parts[:i+1], "/")
		if f := beforeEnsureLevel.Load(); f != nil {
			(*f)(p)
		}
		err := s.call(ctx, "create "+p, func() error {
			_, err := s.conn.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// create makes a protected EPHEMERAL_SEQUENTIAL node
// dir/_c_<guid>-name-NNNNNNNNNN holding data, as Curator's protected mode
// does: after a connection loss the create may have happened, so the
// client looks for a child carrying its GUID and, if there is one, takes it
// as created; otherwise it tries again, until the request deadline. When it
// gives up, a background search deletes the node if it appears (Curator's
// findAndDeleteProtectedNodeInBackground): a node the client does not know
// of would hold the lock for the whole life of the session.
func (s *zkSession) create(ctx context.Context, dir, name string, data []byte) (string, error) {
	if !s.made[dir] {
		if err := s.ensure(ctx, dir); err != nil {
			return "", err
		}
		s.made[dir] = true
	}
	var g [16]byte
	if _, err := crand.Read(g[:]); err != nil {
		return "", err
	}
	guid := hex.EncodeToString(g[:])
	deadline := time.Now().Add(s.opLimit)
	var lastErr error
	for time.Now().Before(deadline) {
		type result struct {
			path string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			p, err := s.conn.Create(dir+"/"+protectedPrefix+guid+"-"+name, data, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			done <- result{p, err}
		}()
		var res result
		select {
		case res = <-done:
		case <-time.After(time.Until(deadline)):
			// Still in flight: it may yet create the node.
			go func() {
				<-done
				s.findAndDelete(dir, guid)
			}()
			return "", fmt.Errorf("create: %w: no answer within %s", ErrIndeterminate, s.opLimit)
		case <-ctx.Done():
			go func() {
				<-done
				s.findAndDelete(dir, guid)
			}()
			return "", fmt.Errorf("create: %w: %w", ErrIndeterminate, ctx.Err())
		}
		switch {
		case res.err == nil:
			return res.path, nil
		case errors.Is(res.err, zk.ErrNoServer):
			return "", fmt.Errorf("create: %w: %w", ErrRejected, res.err)
		case errors.Is(res.err, zk.ErrConnectionClosed):
			// Maybe created: look for our GUID.
			lastErr = res.err
			if p, ok := s.findProtected(dir, guid); ok {
				return p, nil
			}
		case errors.Is(res.err, zk.ErrSessionExpired):
			// An ephemeral node of an expired session is gone: try again
			// on the new session.
			lastErr = res.err
		case errors.Is(res.err, zk.ErrNoNode):
			// The server reaped the empty container parent: make it
			// again and retry (Curator's creatingParentContainersIfNeeded).
			lastErr = res.err
			if err := s.ensure(ctx, dir); err != nil {
				return "", err
			}
			continue
		default:
			return "", fmt.Errorf("create: %w", res.err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	go s.findAndDelete(dir, guid)
	return "", fmt.Errorf("create: %w: %w", ErrIndeterminate, lastErr)
}

const protectedPrefix = "_c_"

// findProtected looks for dir's child carrying guid, waiting at most the
// request deadline.
func (s *zkSession) findProtected(dir, guid string) (string, bool) {
	var kids []string
	err := s.call(context.Background(), "children", func() error {
		var err error
		kids, _, err = s.conn.Children(dir)
		return err
	})
	if err != nil {
		return "", false
	}
	for _, k := range kids {
		if strings.HasPrefix(k, protectedPrefix+guid) {
			return dir + "/" + k, true
		}
	}
	return "", false
}

// findAndDelete deletes dir's child carrying guid, if there is one, trying
// until a listing succeeds or the session is closed.
func (s *zkSession) findAndDelete(dir, guid string) {
	for {
		kids, _, err := s.conn.Children(dir)
		if err == nil {
			for _, k := range kids {
				if strings.HasPrefix(k, protectedPrefix+guid) {
					s.deleteInBackground(dir + "/" + k)
				}
			}
			return
		}
		select {
		case <-s.closed:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// releaseNode deletes path, the node of a lock the client released and
// already forgot: a node already gone removed nothing ("-"); a delete that
// failed is retried in the background (deleteInBackground).
func (s *zkSession) releaseNode(ctx context.Context, path string) (ReleaseResult, error) {
	err := s.delete(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return ReleaseResult{Removed: "-"}, nil
	}
	if err != nil {
		s.deleteInBackground(path)
		return ReleaseResult{}, fmt.Errorf("release: %w", err)
	}
	return ReleaseResult{}, nil
}

// deleteInBackground deletes path, trying until it is gone or the session
// is closed (Curator's guaranteed delete).
func (s *zkSession) deleteInBackground(path string) {
	go func() {
		for {
			err := s.conn.Delete(path, -1)
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				return
			}
			select {
			case <-s.closed:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// children lists dir's children sorted by their sequence numbers.
func (s *zkSession) children(ctx context.Context, dir string) ([]string, error) {
	var kids []string
	err := s.call(ctx, "children", func() error {
		var err error
		kids, _, err = s.conn.Children(dir)
		return err
	})
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(seqOf(a), seqOf(b)) })
	return kids, err
}

func (s *zkSession) delete(ctx context.Context, path string) error {
	return s.call(ctx, "delete", func() error { return s.conn.Delete(path, -1) })
}

// waitGone waits until path is deleted or the deadline passes. It returns
// true when the node is gone.
func (s *zkSession) waitGone(ctx context.Context, path string, deadline time.Time) (bool, error) {
	var exists bool
	var ch <-chan zk.Event
	err := s.call(ctx, "watch", func() error {
		var err error
		exists, _, ch, err = s.conn.ExistsW(path)
		return err
	})
	if err != nil || !exists {
		return !exists, err
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return true, nil // deleted, or the watch fired for another reason: look again
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// lostNow reports whether a strict client has heard that its lock is lost:
// the event goroutine delivered a suspended connection or an expired
// session since the acquire. The ZooKeeper client declares the connection
// lost after 2/3 of the session timeout without an answer, on its own
// goroutine; nothing is worked out at the moment of use, as with Curator.
func (s *zkSession) lostNow() (bool, string) {
	if why := s.lost.Load().(string); why != "" {
		return true, why
	}
	return false, ""
}

// tokenOf is the fencing token of the lock node at path: its czxid, the
// zxid of the transaction that created it, which a Curator user reads
// with checkExists() and which only grows, even when the parent container
// was reaped and made again; with --param zk-token=sequence, its sequence
// number, which then starts again from 0. Without --fence, 0.
func (s *zkSession) tokenOf(ctx context.Context, path string) (int64, error) {
	switch {
	case !s.cfg.Fence:
		return 0, nil
	case isVariant(s.cfg, "zk-token", "sequence"):
		return seqNum(baseName(path)), nil
	}
	var st *zk.Stat
	err := s.call(ctx, "exists "+path, func() error {
		var ok bool
		var err error
		ok, st, err = s.conn.Exists(path)
		if err == nil && !ok {
			return fmt.Errorf("%w: our node %s is gone", ErrIndeterminate, path)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return st.Czxid, nil
}

// seqOf returns the sequence suffix of a sequential node's name.
func seqOf(name string) string {
	if len(name) < 10 {
		return name
	}
	return name[len(name)-10:]
}

func seqNum(name string) int64 {
	n, _ := strconv.ParseInt(seqOf(name), 10, 64)
	return n
}

func baseName(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// zkMutex is the zk, zk-strict and zk-rw scheme.
type zkMutex struct {
	*zkSession
	dir       string // the lock path
	strict    bool
	rw        bool
	reentrant bool
	wait      time.Duration // > 0: blocking acquire (Waiter)

	node  string // our node while we hold the lock
	owner string // the owner id of the outer acquire
	mode  string
	depth int
	token int64
}

var (
	_ ModeLock = (*zkMutex)(nil)
	_ Loser    = (*zkMutex)(nil)
	_ Waiter   = (*zkMutex)(nil)
)

func newZKMutex(c Config) (Lock, error) {
	s, err := newZKSession(c)
	if err != nil {
		return nil, err
	}
	return &zkMutex{zkSession: s, dir: s.root, reentrant: true}, nil
}

func newZKStrict(c Config) (Lock, error) {
	s, err := newZKSession(c)
	if err != nil {
		return nil, err
	}
	return &zkMutex{zkSession: s, dir: s.root, strict: true, reentrant: true}, nil
}

func newZKRW(c Config) (Lock, error) {
	s, err := newZKSession(c)
	if err != nil {
		return nil, err
	}
	return &zkMutex{zkSession: s, dir: s.root, rw: true}, nil
}

// Wait returns the lock with a blocking acquire: a waiter watches the node
// before its own and looks again when it goes, up to timeout; then it
// deletes its node and gives up.
func (m *zkMutex) Wait(timeout time.Duration) Lock {
	w := *m
	w.wait = timeout
	return &w
}

func (m *zkMutex) Lost() (bool, string) {
	if !m.strict || m.node == "" {
		return false, ""
	}
	return m.lostNow()
}

func (m *zkMutex) Acquire(ctx context.Context) (Lease, error) {
	return m.AcquireMode(ctx, ModeWrite)
}

func (m *zkMutex) lease(owner string, start time.Time) Lease {
	l := Lease{Owner: owner, Acquired: start}
	if m.cfg.Fence {
		l.Token = history.Int64(m.token)
	}
	return l
}

// AcquireMode takes the lock shared (ModeRead, zk-rw only) or exclusive.
func (m *zkMutex) AcquireMode(ctx context.Context, mode string) (Lease, error) {
	owner, start := newOwner(m.cfg), m.cfg.clock().Now()
	if mode != ModeRead {
		mode = ModeWrite
	}
	if mode == ModeRead && !m.rw {
		return Lease{}, fmt.Errorf("%w: this lock has no read mode", ErrRejected)
	}
	if m.node != "" {
		if !m.reentrant || mode != m.mode {
			return Lease{}, fmt.Errorf("%w: this client already holds it and the lock is not reentrant", ErrHeld)
		}
		// A nested acquire is part of the outer hold: same owner id, as
		// redisson's (the checker pairs them by it).
		m.depth++
		return m.lease(m.owner, start), nil
	}
	m.lost.Store("")
	name := "lock-"
	if m.rw {
		name = "__WRIT__"
		if mode == ModeRead {
			name = "__READ__"
		}
	}
	path, err := m.create(ctx, m.dir, name, []byte(owner))
	if err != nil {
		return Lease{}, fmt.Errorf("acquire: %w", err)
	}
	ours := baseName(path)
	deadline := time.Now().Add(m.wait)
	for {
		kids, err := m.children(ctx, m.dir)
		if err != nil {
			// Our node is there and may yet be granted the lock: give it
			// up, or the client could not know whether it holds it.
			m.deleteInBackground(path)
			return Lease{}, fmt.Errorf("acquire: %w", err)
		}
		watch, ok := blocker(kids, ours, mode)
		if ok {
			token, err := m.tokenOf(ctx, path)
			if err != nil {
				m.deleteInBackground(path)
				return Lease{}, fmt.Errorf("acquire: %w", err)
			}
			m.node, m.mode, m.depth, m.token, m.owner = path, mode, 1, token, owner
			return m.lease(owner, start), nil
		}
		if watch == "" {
			// Our node is gone: the session expired while we waited.
			return Lease{}, fmt.Errorf("acquire: %w: our node vanished", ErrIndeterminate)
		}
		if m.wait <= 0 || !time.Now().Before(deadline) {
			if err := m.delete(ctx, path); err != nil && !errors.Is(err, zk.ErrNoNode) {
				m.deleteInBackground(path)
				return Lease{}, fmt.Errorf("acquire: held, and giving back our node failed: %w", err)
			}
			// The node ahead may be a trier about to give up: a
			// try-lock cannot tell it from a holder.
			return Lease{}, fmt.Errorf("%w (by %s)", ErrContended, watch)
		}
		if _, err := m.waitGone(ctx, m.dir+"/"+watch, deadline); err != nil {
			m.deleteInBackground(path)
			return Lease{}, fmt.Errorf("acquire: %w", err)
		}
	}
}

// blocker returns whether the node ours may hold the lock in mode among the
// sorted kids and, when not, the node it waits for: its immediate
// predecessor for a writer, the last writer before it for a reader. It
// returns "", false when ours is not among kids.
func blocker(kids []string, ours, mode string) (string, bool) {
	i := slices.Index(kids, ours)
	if i < 0 {
		return "", false
	}
	if mode != ModeRead {
		if i == 0 {
			return "", true
		}
		return kids[i-1], false
	}
	for j := i - 1; j >= 0; j-- {
		if strings.Contains(kids[j], "__WRIT__") {
			return kids[j], false
		}
	}
	return "", true
}

// Release deletes our node when the outermost hold ends. Like Curator, it
// treats a node that is already gone (the session expired) as released:
// Removed says "-" then.
func (m *zkMutex) Release(ctx context.Context, _ Lease) (ReleaseResult, error) {
	if m.node == "" {
		return ReleaseResult{Removed: "-"}, ErrNotOwner
	}
	if m.depth > 1 {
		m.depth--
		return ReleaseResult{}, nil
	}
	path := m.node
	// Like Curator, the client forgets the lock whatever the delete
	// says, and a delete that failed is retried in the background.
	m.node, m.depth = "", 0
	return m.releaseNode(ctx, path)
}

// zkSemaphore is Curator's InterProcessSemaphoreMutex: a semaphore with one
// lease. An internal mutex (locks/) serializes the count of leases/.
type zkSemaphore struct {
	*zkSession
	wait  time.Duration
	lease string // our lease node while we hold it
	token int64
}

var _ Waiter = (*zkSemaphore)(nil)

func newZKSemaphore(c Config) (Lock, error) {
	s, err := newZKSession(c)
	if err != nil {
		return nil, err
	}
	return &zkSemaphore{zkSession: s}, nil
}

// Wait returns the semaphore with a blocking acquire up to timeout.
func (m *zkSemaphore) Wait(timeout time.Duration) Lock {
	w := *m
	w.wait = timeout
	return &w
}

func (m *zkSemaphore) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(m.cfg), m.cfg.clock().Now()
	if m.lease != "" {
		return Lease{}, fmt.Errorf("%w: this client already holds it and the semaphore mutex is not reentrant", ErrHeld)
	}
	deadline := time.Now().Add(m.wait)
	// The internal mutex lives on the same session, under locks/.
	inner := &zkMutex{zkSession: m.zkSession, dir: m.root + "/locks", wait: m.wait}
	retries := 0
	for {
		if _, err := inner.Acquire(ctx); err != nil {
			return Lease{}, err
		}
		path, err := m.create(ctx, m.root+"/leases", "lease-", []byte(owner))
		if err != nil {
			_, _ = inner.Release(context.Background(), Lease{})
			return Lease{}, fmt.Errorf("acquire: %w", err)
		}
		kids, err := m.children(ctx, m.root+"/leases")
		step := semaphoreStep(kids, baseName(path), 1)
		if err == nil && step == semMissing {
			// Curator: RETRY_DUE_TO_MISSING_NODE (the session expired
			// between the create and the listing): start again while the
			// retry policy allows, else NoNodeException.
			_, _ = inner.Release(context.Background(), Lease{})
			if retries++; retries > semaphoreRetries {
				return Lease{}, fmt.Errorf("acquire: %w: sequential path not found - possible session loss (%s, %d retries)", ErrRejected, path, semaphoreRetries)
			}
			continue
		}
		if err == nil && step == semGranted {
			_, _ = inner.Release(context.Background(), Lease{})
			token, terr := m.tokenOf(ctx, path)
			if terr != nil {
				m.deleteInBackground(path)
				return Lease{}, fmt.Errorf("acquire: %w", terr)
			}
			m.lease, m.token = path, token
			l := Lease{Owner: owner, Acquired: start}
			if m.cfg.Fence {
				l.Token = history.Int64(m.token)
			}
			return l, nil
		}
		if derr := m.delete(context.Background(), path); derr != nil && !errors.Is(derr, zk.ErrNoNode) {
			m.deleteInBackground(path)
		}
		_, _ = inner.Release(context.Background(), Lease{})
		if err != nil {
			return Lease{}, fmt.Errorf("acquire: %w", err)
		}
		if m.wait <= 0 || !time.Now().Before(deadline) {
			return Lease{}, fmt.Errorf("%w: %d leases taken", ErrContended, len(kids)-1)
		}
		// Curator waits for the leases to change; the holder's lease is
		// the other node.
		for _, k := range kids {
			if k != baseName(path) {
				if _, err := m.waitGone(ctx, m.root+"/leases/"+k, deadline); err != nil {
					return Lease{}, fmt.Errorf("acquire: %w", err)
				}
				break
			}
		}
	}
}

// semaphoreRetries is how often a semaphore acquire starts again when its
// lease node is missing (Curator's RetryPolicy; locktest gives it 3, as
// the usual ExponentialBackoffRetry(1000, 3)).
const semaphoreRetries = 3

// semStep is what InterProcessSemaphoreV2.internalAcquire1Lease decides
// from the lease listing.
type semStep int

const (
	semGranted semStep = iota // our node is there and at most maxLeases are
	semMissing                // our node is not listed: RETRY_DUE_TO_MISSING_NODE
	semFull                   // more than maxLeases: wait, or delete ours and fail
)

// semaphoreStep decides as internalAcquire1Lease does on the children of
// leases/: first that ours is among them ("Sequential path not found"),
// then that they are at most maxLeases.
func semaphoreStep(kids []string, ours string, maxLeases int) semStep {
	if !slices.Contains(kids, ours) {
		return semMissing
	}
	if len(kids) <= maxLeases {
		return semGranted
	}
	return semFull
}

func (m *zkSemaphore) Release(ctx context.Context, _ Lease) (ReleaseResult, error) {
	if m.lease == "" {
		return ReleaseResult{Removed: "-"}, ErrNotOwner
	}
	path := m.lease
	m.lease = ""
	return m.releaseNode(ctx, path)
}
