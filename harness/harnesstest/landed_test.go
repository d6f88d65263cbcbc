package harnesstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

func TestNotLanded(t *testing.T) {
	run := func(nemeses ...string) *history.History {
		return &history.History{Info: history.RunInfo{Nemeses: nemeses}}
	}
	inc := func(why string) checker.Result { return checker.Result{Verdict: checker.Inconclusive, Why: why} }
	for _, c := range []struct {
		name string
		r    checker.Result
		h    *history.History
		want bool
	}{
		{"never injected", inc(checker.NeverInjected("failover")), run("failover"), true},
		{"never injected, one nemesis of two", inc(checker.NeverInjected("kill")), run("pause", "kill"), true},
		{"a nemesis the run did not have", inc(checker.NeverInjected("pause")), run("failover"), false},
		{"none struck while its client held", inc(checker.NoneWhileHeld("partition", true)), run("partition"), true},
		{"none struck while a client held", inc(checker.NoneWhileHeld("kill", false)), run("kill"), true},
		{"and too few acquires", inc("only 6 successful acquires (at least 10 needed); " + checker.NoneWhileHeld("kill", false)), run("kill"), false},
		{"and another reason", inc(checker.NoneWhileHeld("pause", true) + "; " + checker.NeverInjected("partition")), run("pause", "partition"), false},
		{"a missed failover", inc("no failover promoted a replica"), run("failover"), false},
		{"safe", checker.Result{Verdict: checker.Safe, Why: checker.NoneWhileHeld("pause", true)}, run("pause"), false},
		{"unsafe", checker.Result{Verdict: checker.Unsafe}, run("pause"), false},
	} {
		require.Equal(t, c.want, NotLanded(c.r, c.h), c.name)
	}
}

func TestLostWhileStruck(t *testing.T) {
	h := &history.History{
		Ops:    []history.Operation{{Client: 2, Op: history.Acquire, OpID: 7, Call: 100, Return: 110}},
		Faults: []history.Fault{{Name: "partition", Client: 2, Start: 120, End: 900}},
	}
	gone := checker.Anomaly{Kind: checker.KindReleaseOKOnExpired, Clients: []int{2}, Start: 800, Ops: []int64{7, 9},
		Explanation: "client 2's release, called at 0.80 s, returned ok at 0.81 s, yet the server removed nothing: the client's key was already gone"}
	r := checker.Result{Verdict: checker.Unsafe, Anomalies: []checker.Anomaly{gone}}
	require.True(t, lostWhileStruck(r, h))

	other := gone
	other.Clients = []int{3} // the fault struck client 2
	require.False(t, lostWhileStruck(checker.Result{Anomalies: []checker.Anomaly{other}}, h))
	late := gone
	late.Explanation = "client 2's release, called at 0.80 s, returned ok at 0.81 s, but its lease (acquired at 0.11 s, TTL 0.20 s) had expired" // time-based: the server kept it
	require.False(t, lostWhileStruck(checker.Result{Anomalies: []checker.Anomaly{late}}, h))
	before := *h
	before.Faults = []history.Fault{{Name: "partition", Client: 2, Start: 50, End: 90}} // before the acquire
	require.False(t, lostWhileStruck(r, &before))
}
