package locks

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

// zk-strict hears of a lost connection as a Curator listener does: the
// ZooKeeper client's callback only queues the state (it never blocks, even
// when the queue is full), and the client believes its lock until the
// event goroutine has delivered it.
func TestZKStrictHearsThroughEventGoroutine(t *testing.T) {
	t.Parallel()
	s := &zkSession{closed: make(chan struct{}), events: make(chan zk.State, 1)}
	s.lost.Store("")
	queued := make(chan struct{})
	go func() {
		s.queue(zk.StateConnected)
		s.queue(zk.StateDisconnected) // the queue is full: handed over from a goroutine
		s.queue(zk.StateHasSession)
		close(queued)
	}()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection loop blocked on a full event queue")
	}
	lost, why := s.lostNow()
	require.False(t, lost, "not delivered yet, yet the client already knew: %s", why)

	go s.deliver()
	deadline := time.Now().Add(5 * time.Second)
	for !lost && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		lost, why = s.lostNow()
	}
	require.True(t, lost, "the event goroutine delivered nothing")
	require.Contains(t, why, "suspended")
	close(s.closed)
}

func TestZKLostBy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   zk.State
		want string
	}{
		{zk.StateDisconnected, "connection to ZooKeeper lost (suspended)"},
		{zk.StateExpired, "ZooKeeper session expired"},
		{zk.StateConnecting, ""},
		{zk.StateConnected, ""},
		{zk.StateHasSession, ""},
	} {
		require.Equal(t, tc.want, lostBy(tc.st), "%v", tc.st)
	}
}
