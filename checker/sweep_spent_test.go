package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// TestSpentLostAcquires holds the spent rule (sweep_spent.go) to its
// conditions, on a 10 ms lease (5 ms of slack: a lease may run out 5 ms
// after its acquire was invoked). Clients 1 and 2 lost acquires at 0 and
// 1 ms; client 3 one at 28 ms (its lease may not have run out by 30 ms);
// client 4 one at 2 ms, and a clean-up release naming the lost acquire's
// owner at 50 ms (until it returns, the holder's key is not anonymous).
func TestSpentLostAcquires(t *testing.T) {
	b := newHB()
	b.info.Clients = 5
	b.info.Lease, b.info.TTLMillis = true, 10
	b.acqInfo(1, 0, -1)
	b.acqInfo(2, 1, -1)
	b.acqInfo(3, 28, -1)
	b.acqInfo(4, 2, -1)
	b.rel(4, 50, 51, "lost-4", history.Fail, "")
	b.acq(5, 60, 61, "o5")
	ops, _, m := prepareLock(b.build(t), int64(DefaultOptions().Slack))
	s := newSweep(m, 100)
	s.ops, s.look = ops, newLookahead(ops, m.ow)
	for i := range ops {
		if ops[i].ret == history.Never {
			s.addToPool(int32(i))
		}
	}
	pool := func(client int32) int32 { return s.lostAcqPools[client][0] }
	at := func(now float64, clients ...int32) *config {
		c := &config{s: lockState{now: ms(now)}, failedUpTo: ms(now)}
		for _, cl := range clients {
			c.used = withUseAt(c.used, pool(cl), 1)
		}
		return c
	}
	s.t = ms(30)
	// Which phantom, expired acquire paid does not matter: 1's or 2's.
	require.True(t, s.usedLE(at(30, 1), at(30, 2)))
	require.True(t, s.usedLE(at(30, 2), at(30, 1)))
	// Spent ones count: two used are not one.
	require.True(t, s.usedLE(at(30, 2), at(30, 1, 2)))
	require.False(t, s.usedLE(at(30, 1, 2), at(30, 2)))
	// 3's lease may not have run out by 30 ms: not spent, either way.
	require.False(t, s.usedLE(at(30, 1), at(30, 3)))
	require.False(t, s.usedLE(at(30, 3), at(30, 1)))
	// At an earlier clock 1's lease may not have run out either.
	require.False(t, s.usedLE(at(4, 1), at(4, 2)))
	// 4's release, still to come, can free its key: not spent.
	require.False(t, s.usedLE(at(30, 1), at(30, 4)))
	require.False(t, s.usedLE(at(30, 4), at(30, 1)))
	// Once it has returned, it is.
	s.t = ms(55)
	require.True(t, s.usedLE(at(55, 1), at(55, 4)))
	require.True(t, s.usedLE(at(55, 4), at(55, 1)))

	// A holder whose lease may have run out by the clock does all a free
	// lock does, with no more lost acquires used; one whose lease may not
	// have, or at a later clock, does not.
	held := func(now, acqCall float64, clients ...int32) *config {
		c := at(now, clients...)
		c.s = lockState{client: 5, owner: m.ow.id("o5"), depth: 1, acqCall: ms(acqCall), acqRet: ms(acqCall + 1), now: ms(now)}
		return c
	}
	require.True(t, s.dominates(held(55, 40), at(55, 1)))
	require.True(t, s.dominates(held(55, 40, 2), at(55, 1)))
	require.False(t, s.dominates(held(55, 40, 1, 2), at(55, 1)))
	require.False(t, s.dominates(held(55, 52), at(55)))
	require.False(t, s.dominates(held(56, 40), at(55)))
	require.False(t, s.dominates(at(55), held(55, 40)))
	// Between holders, an expired one compares by its expiry, not its
	// invocation.
	require.True(t, s.dominates(held(55, 45), held(55, 40)))
	require.False(t, s.dominates(held(55, 52), held(55, 40)))
}
