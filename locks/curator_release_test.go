package locks_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/locks"
)

// Where the zk schemes are already faithful to Curator, kept so: a
// release whose lock node is gone counts as released (LockInternals.
// releaseLock → deleteOurPath: "catch (KeeperException.NoNodeException e)
// { // ignore - already deleted (possibly expired session, etc.) }"), and
// the lock's parent is a CONTAINER node (creatingParentContainersIfNeeded).
func TestZKFollowsCuratorOnGoneNode(t *testing.T) {
	t.Parallel()
	cl := startEnsemble(t, "zk3")
	admin, _, err := zk.Connect(cl.Addrs(), 5*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	ctx := context.Background()
	for _, name := range []string{"zk", "zk-strict"} {
		t.Run(name, func(t *testing.T) {
			key := "curator-gone-" + name
			l := newLockKey(t, lookup(t, name), cl.Addrs(), key, 1, 4*time.Second, true)
			lease, err := l.Acquire(ctx)
			require.NoError(t, err)
			dir := "/locktest/" + key
			kids, _, err := admin.Children(dir)
			require.NoError(t, err)
			require.Len(t, kids, 1)
			_, nst, err := admin.Get(dir + "/" + kids[0])
			require.NoError(t, err)
			require.Equal(t, nst.Czxid, *lease.Token, "the token is the lock node's czxid")
			require.NoError(t, admin.Delete(dir+"/"+kids[0], -1))
			res, err := l.Release(ctx, lease)
			require.NoError(t, err, "a gone node counts as released")
			require.Equal(t, "-", res.Removed)
			// The parent, now empty, is a CONTAINER node: the server
			// deletes it by itself (the members check every 200 ms); a
			// persistent parent would stay.
			require.Eventually(t, func() bool {
				ok, _, err := admin.Exists(dir)
				return err == nil && !ok
			}, 5*time.Second, 50*time.Millisecond, "the empty parent %s is reaped", dir)
			// And the next acquire makes it again.
			lease, err = l.Acquire(ctx)
			require.NoError(t, err)
			_, err = l.Release(ctx, lease)
			require.NoError(t, err)
		})
	}
}

// A container parent reaped between ensure's creates of two levels (the
// server deletes an empty container on its own schedule) is made again,
// as Curator's creatingParentContainersIfNeeded retries: the acquire does
// not fail with "node does not exist".
func TestZKEnsureRemakesAReapedParent(t *testing.T) {
	cl := startEnsemble(t, "zk3")
	admin, _, err := zk.Connect(cl.Addrs(), 5*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	key := "reaped-parent"
	reaped := 0
	locks.SetBeforeEnsureLevel(func(p string) {
		if p == "/locktest/"+key && reaped == 0 {
			// /locktest was just made (or found) and is empty: reap it.
			require.NoError(t, admin.Delete("/locktest", -1))
			reaped++
		}
	})
	t.Cleanup(func() { locks.SetBeforeEnsureLevel(nil) })
	l := newLockKey(t, lookup(t, "zk"), cl.Addrs(), key, 1, 4*time.Second, true)
	lease, err := l.Acquire(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, reaped, "the parent was reaped under the acquire")
	_, err = l.Release(context.Background(), lease)
	require.NoError(t, err)
}
