package locks_test

import (
	"context"
	"io"
	"log"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/locks"
)

// The zk scheme against go-zookeeper's own lock recipe (zk.Lock, v1.0.4
// lock.go) on a real ensemble, where the two overlap: both make a
// protected EPHEMERAL_SEQUENTIAL child "_c_<guid>-lock-NNNNNNNNNN" of the
// lock path, the lowest sequence number holds, and a waiter watches the
// node just before its own. So on one path they exclude each other, and
// waiters of either kind are served in the order of their nodes.
// Where they differ, the scheme follows Curator, not go-zookeeper (so no
// step of this test asks it): go-zookeeper's Unlock of a gone node fails
// with ErrNoNode and keeps the lock, Curator's counts it as released
// (TestZKFollowsCuratorOnGoneNode); go-zookeeper has no try-lock and no timeout.
func TestZKSchemeAgreesWithGoZookeeperLock(t *testing.T) {
	t.Parallel()
	cl := startEnsemble(t, "zk3")
	ctx := context.Background()
	const key = "golock"
	conn, _, err := zk.Connect(cl.Addrs(), 4*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	theirs := zk.NewLock(conn, "/locktest/"+key, zk.WorldACL(zk.PermAll))
	s := lookup(t, "zk")
	ours := newLockKey(t, s, cl.Addrs(), key, 1, 4*time.Second, false)
	waiter := newLockKey(t, s, cl.Addrs(), key, 2, 4*time.Second, false).(locks.Waiter).Wait(10 * time.Second)

	// Ours holds: go-zookeeper's Lock waits until ours releases.
	held, err := ours.Acquire(ctx)
	require.NoError(t, err)
	theirsGot := make(chan error, 1)
	go func() { theirsGot <- theirs.Lock() }()
	select {
	case err := <-theirsGot:
		t.Fatalf("go-zookeeper's lock granted while the scheme held it (err %v)", err)
	case <-time.After(time.Second):
	}
	// A waiter of ours queues behind go-zookeeper's node.
	oursGot := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx)
		oursGot <- err
	}()
	time.Sleep(500 * time.Millisecond)
	_, err = ours.Release(ctx, held)
	require.NoError(t, err)
	select {
	case err := <-theirsGot:
		require.NoError(t, err, "go-zookeeper's waiter is next in line")
	case <-time.After(5 * time.Second):
		t.Fatal("go-zookeeper's lock not granted after the scheme released")
	}
	select {
	case err := <-oursGot:
		t.Fatalf("the scheme's waiter granted while go-zookeeper's lock held it (err %v)", err)
	case <-time.After(time.Second):
	}
	// A try of ours is refused while go-zookeeper's lock holds.
	_, err = ours.Acquire(ctx)
	requireRefused(t, err, "go-zookeeper's lock holds")
	require.NoError(t, theirs.Unlock())
	select {
	case err := <-oursGot:
		require.NoError(t, err, "the scheme's waiter is next once go-zookeeper's lock is given back")
	case <-time.After(5 * time.Second):
		t.Fatal("the scheme's waiter not granted after go-zookeeper's Unlock")
	}
	// And the other way round: go-zookeeper's Lock waits for our waiter's hold.
	go func() { theirsGot <- theirs.Lock() }()
	select {
	case err := <-theirsGot:
		t.Fatalf("go-zookeeper's lock granted while the scheme's waiter held it (err %v)", err)
	case <-time.After(time.Second):
	}
	_, err = waiter.Release(ctx, locks.Lease{})
	require.NoError(t, err)
	select {
	case err := <-theirsGot:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("go-zookeeper's lock not granted after the scheme's waiter released")
	}
	require.NoError(t, theirs.Unlock())
}
