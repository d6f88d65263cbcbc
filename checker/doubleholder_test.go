package checker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestDoubleHolder(t *testing.T) {
	tests := []struct {
		name    string
		lease   bool
		renews  bool
		cause   Cause // of the first anomaly
		build   func(b *hb)
		pairs   [][2]int // clients of each anomaly, earlier holder first
		explain []string // substrings of the first explanation
	}{
		{name: "renewed lease taken after its TTL: unknown", lease: true, renews: true, cause: CauseUnknown, build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.acq(2, 3040, 3050, "b")
			b.rel(1, 5600, 5601, "a", history.Fail, "-")
		}, pairs: [][2]int{{1, 2}}, explain: []string{"renewed while its holder runs", "is unknown"}},
		{name: "renewed lease taken within its TTL: broken", lease: true, renews: true, cause: CauseLeaseBroken, build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.acq(2, 1500, 1510, "b")
			b.rel(1, 1700, 1701, "a", history.OK, "a")
		}, pairs: [][2]int{{1, 2}}},
		{name: "renewed lease of a client paused past 2/3 TTL before the grant: expired", lease: true, renews: true, cause: CauseLeaseExpired, build: func(b *hb) {
			b.faultAt("pause", "client 1", 1010, 5200)
			b.acq(1, 990, 1000, "a")
			b.acq(2, 3040, 3050, "b") // after 990 + 2000 - 5 and 1010 + 1333 - 5
			b.rel(1, 5600, 5601, "a", history.Fail, "-")
		}, pairs: [][2]int{{1, 2}}, explain: []string{"a fault on client 1 stopped the renewals"}},
		{name: "renewed lease of a client paused just before the grant: unknown", lease: true, renews: true, cause: CauseUnknown, build: func(b *hb) {
			b.faultAt("pause", "client 1", 2900, 5200)
			b.acq(1, 990, 1000, "a")
			b.acq(2, 3040, 3050, "b")
			b.rel(1, 5600, 5601, "a", history.Fail, "-")
		}, pairs: [][2]int{{1, 2}}},
		{name: "renewed lease, a fault on another client: unknown", lease: true, renews: true, cause: CauseUnknown, build: func(b *hb) {
			b.faultAt("pause", "client 3", 1010, 5200)
			b.acq(1, 990, 1000, "a")
			b.acq(2, 3040, 3050, "b")
			b.rel(1, 5600, 5601, "a", history.Fail, "-")
		}, pairs: [][2]int{{1, 2}}},
		// The lost-reply story: client 2 asked first, its grant's reply
		// came late; client 1 was granted after client 2's lease could
		// have run out, and client 2 then started using its expired lease.
		{name: "a late reply: the later hold's lease is the stale one", lease: true, cause: CauseLeaseExpired, build: func(b *hb) {
			b.acq(1, 3500, 3510, "a")
			b.acq(2, 1000, 4300, "b")
			b.rel(1, 4600, 4601, "a", history.OK, "a")
		}, pairs: [][2]int{{1, 2}}, explain: []string{"client 2 asked for the lock at 1.00 s and its answer came only at 4.30 s", "client 2 then used a lease that had already expired"}},
		{name: "a late reply, renewed: still the stale one", lease: true, renews: true, cause: CauseLeaseExpired, build: func(b *hb) {
			b.acq(1, 3500, 3510, "a")
			b.acq(2, 1000, 4300, "b")
			b.rel(1, 4600, 4601, "a", history.OK, "a")
		}, pairs: [][2]int{{1, 2}}},
		{name: "a late reply within the TTL: broken", lease: true, cause: CauseLeaseBroken, build: func(b *hb) {
			b.acq(1, 1500, 1510, "a")
			b.acq(2, 1000, 2300, "b") // 1000 + 2000 - 5 > 1510 and 1500 + 1995 > 2300
			b.rel(1, 2600, 2601, "a", history.OK, "a")
		}, pairs: [][2]int{{1, 2}}},
		{name: "within the slack of the earliest expiry: expired", lease: true, cause: CauseLeaseExpired, build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.acq(2, 2980, 2986, "b") // 990 + 2000 - 5 = 2985
			b.rel(1, 3100, 3101, "a", history.OK, "a")
		}, pairs: [][2]int{{1, 2}}},
		{name: "sequential holds", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 5, 6, "a", history.OK, "a")
			b.acq(2, 5.5, 7, "b")
			b.rel(2, 9, 10, "b", history.OK, "b")
		}},
		{name: "release call equal to the next grant's return", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 5, 6, "a", history.OK, "a")
			b.acq(2, 4, 5, "b")
		}},
		{name: "overlap", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 2, 3, "b")
			b.rel(1, 5, 6, "a", history.Fail, "-")
			b.rel(2, 7, 8, "b", history.OK, "b")
		}, pairs: [][2]int{{1, 2}}, explain: []string{"client 2 acquired the lock at 3.0 ms while client 1", "until 5.0 ms"}},
		{name: "three at once", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 2, 3, "b")
			b.acq(3, 2, 4, "c")
		}, pairs: [][2]int{{1, 2}, {1, 3}, {2, 3}}},
		{name: "indeterminate acquire holds nothing", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acqInfo(2, 2, 30)
			b.rel(1, 5, 6, "a", history.OK, "a")
		}},
		{name: "the same client never doubles", build: func(b *hb) {
			b.clientLife(1, 0, 4)
			b.acq(1, 0, 1, "a")
			b.clientLife(1, 10, -1)
			b.acq(1, 11, 12, "b")
		}},
		{name: "lease expired, holder paused", lease: true, cause: CauseLeaseExpired, build: func(b *hb) {
			b.faultAt("pause", "client 1", 1010, 5200)
			b.acq(1, 990, 1000, "a")
			b.acq(2, 3040, 3050, "b")
			b.rel(1, 5600, 5601, "a", history.Fail, "-")
		}, pairs: [][2]int{{1, 2}}, explain: []string{
			"client 2 acquired the lock at 3.05 s while client 1, which acquired it at 1.00 s (lease 2.00 s, so expired by 3.00 s at the latest), still believed it held it until 5.60 s; client 1 was paused 1.01 s–5.20 s.",
		}},
		{name: "lease still valid", lease: true, cause: CauseLeaseBroken, build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.acq(2, 1500, 1510, "b")
			b.rel(1, 1700, 1701, "a", history.OK, "a")
		}, pairs: [][2]int{{1, 2}}, explain: []string{"still valid until 2.98 s at least", "The lease broke its promise"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			if tt.lease {
				b.info.Lease, b.info.TTLMillis = true, 2000
			}
			b.info.Renews = tt.renews
			tt.build(b)
			h := b.build(t)
			p, as := checkDoubleHolder(newFacts(h), 5e6)
			require.Len(t, as, len(tt.pairs))
			require.Equal(t, len(tt.pairs), p.Count)
			if len(tt.pairs) == 0 {
				require.Equal(t, Pass, p.Status)
				return
			}
			require.Equal(t, Fail, p.Status)
			for i, a := range as {
				require.Equal(t, KindDoubleHolder, a.Kind)
				require.Equal(t, []int{tt.pairs[i][0], tt.pairs[i][1]}, a.Clients)
				require.Len(t, a.Ops, 2)
				require.Less(t, a.Start, a.End)
			}
			for _, s := range tt.explain {
				require.Contains(t, as[0].Explanation, s)
			}
			require.Equal(t, tt.cause, as[0].Cause)
		})
	}
}

func TestDoubleHolderFaults(t *testing.T) {
	b := newHB()
	b.faultAt("pause", "client 3", 1200, 4800)
	b.faultAt("partition", "redis-1", 9000, -1)
	b.acq(1, 0, 1000, "a")
	b.acq(2, 2000, 3000, "b")
	b.rel(1, 5000, 5001, "a", history.OK, "a")
	h := b.build(t)
	_, as := checkDoubleHolder(newFacts(h), 5e6)
	require.Len(t, as, 1)
	require.Equal(t, []string{"pause client 3 (1.20s–4.80s)"}, as[0].Faults)
	require.NotContains(t, as[0].Explanation, "paused", "the fault did not touch the earlier holder")
	require.Equal(t, ms(3000), as[0].Start)
	require.Equal(t, ms(5000), as[0].End)
}

func TestLeaseContract(t *testing.T) {
	info := history.RunInfo{Traits: history.Traits{Lease: true}, TTLMillis: 100}
	doubles := []Anomaly{{Cause: CauseLeaseExpired}, {Cause: CauseLeaseBroken}, {Cause: CauseUnknown}}
	p := checkLeaseContract(info, doubles)
	require.Equal(t, Fail, p.Status)
	require.Equal(t, 1, p.Count)
	require.Equal(t, "3 double holders: 1 lease-broken, 1 lease-expired (lost by design), 1 unknown (renewed lease)", p.Detail)
	p = checkLeaseContract(info, doubles[:1])
	require.Equal(t, Pass, p.Status)
	p = checkLeaseContract(history.RunInfo{}, doubles)
	require.Equal(t, Skipped, p.Status)
}

func TestDoubleHolderReadWrite(t *testing.T) {
	b := newHB()
	b.info.ReadWrite = true
	mode := func(m string) func(i, d *history.Event) {
		return func(i, d *history.Event) { i.Mode, d.Owner = m, "o"+m+fmt.Sprint(len(b.evs)) }
	}
	b.o(1, history.Acquire, 0, 1, history.OK, mode(history.ModeRead))
	b.o(2, history.Acquire, 2, 3, history.OK, mode(history.ModeRead)) // two readers: fine
	b.o(3, history.Acquire, 4, 5, history.OK, mode(history.ModeWrite))
	h := b.build(t)
	require.True(t, Holds(h)[0].Shared)
	_, as := checkDoubleHolder(newFacts(h), 5e6)
	require.Len(t, as, 2) // the writer with each reader
	for _, a := range as {
		require.Contains(t, a.Clients, 3)
	}
	// The read-write model: the writer cannot be placed while the readers
	// hold the lock.
	p, _ := checkLinearizable(newFacts(h), DefaultOptions())
	require.Equal(t, Fail, p.Status, p.Detail)
}
