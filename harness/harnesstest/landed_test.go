package harnesstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

func TestNotLanded(t *testing.T) {
	none := &history.History{}
	one := &history.History{Faults: []history.Fault{{Name: "failover"}}}
	inc := func(why string) checker.Result { return checker.Result{Verdict: checker.Inconclusive, Why: why} }
	for _, c := range []struct {
		name string
		r    checker.Result
		h    *history.History
		nem  string
		want bool
	}{
		{"never injected, none recorded", inc("nemesis failover never injected a fault"), none, "failover", true},
		{"never injected, yet the history holds one", inc("nemesis failover never injected a fault"), one, "failover", false},
		{"another nemesis never injected", inc("nemesis pause never injected a fault"), none, "failover", false},
		{"none struck while its client held", inc("no partition fault started while its client held the lock"), none, "partition", true},
		{"none struck while a client held", inc("only 6 successful acquires (at least 10 needed); no kill fault started while a client held the lock"), none, "kill", true},
		{"a missed failover is not a fault that did not land", inc("no failover promoted a replica"), one, "failover", false},
		{"too few acquires", inc("only 6 successful acquires (at least 10 needed)"), none, "kill", false},
		{"safe", checker.Result{Verdict: checker.Safe, Why: "no pause fault started while its client held the lock"}, none, "pause", false},
		{"unsafe", checker.Result{Verdict: checker.Unsafe}, none, "pause", false},
	} {
		require.Equal(t, c.want, NotLanded(c.r, c.h, c.nem), c.name)
	}
}
