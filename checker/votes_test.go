package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// Grants that name their granters and lack a server that granted another
// one are counted, with how often each server's vote was missing; grants
// that name no server (a single-server lock) count for nothing.
func TestMissingVotes(t *testing.T) {
	b := newHB()
	grant := func(c int, call float64, nodes ...string) {
		b.o(c, history.Acquire, call, call+1, history.OK, func(_, d *history.Event) { d.Owner, d.Nodes = "o", nodes })
	}
	grant(1, 0, "a", "b", "c", "d", "e")
	grant(2, 10, "a", "c", "d", "e")
	grant(3, 20, "a", "c", "d")
	grant(1, 30, "a", "b", "c", "d", "e")
	short, missing := missingVotes(b.build(t))
	require.Equal(t, 2, short)
	require.Equal(t, map[string]int{"b": 2, "e": 1}, missing)

	b = newHB()
	b.acq(1, 0, 1, "a")
	b.acq(2, 10, 11, "b")
	short, missing = missingVotes(b.build(t))
	require.Zero(t, short)
	require.Nil(t, missing)
}
