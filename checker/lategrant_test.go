package checker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// A grant whose answer a delay fault held back longer than the lease is
// named as used after it expired, with the grant's latest time on the
// harness's clock; without the fault's hold (or with a hold shorter than
// the lease, or an answer that came after the healing let it out early)
// the explanation says only that the grant could have come first.
func TestLateGrantNamed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		held, end  float64 // ms
		named      bool
		explaining string
	}{
		{"held past the lease", 2250, 6000, true, "client 2 was granted the lock at 1.20 s at the latest (the delay fault held its answers back 2.25 s), answer arrived at 3.45 s, lease 2.00 s: used after it expired, 0.25 s after its lease ran out."},
		{"held less than the lease", 1500, 6000, false, "client 2 asked for the lock at 1.00 s and its answer came only at 3.45 s"},
		{"answer after the healing", 2250, 3000, false, "client 2 asked for the lock at 1.00 s and its answer came only at 3.45 s"},
		{"no hold recorded", 0, 6000, false, "client 2 asked for the lock at 1.00 s and its answer came only at 3.45 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.info.Lease, b.info.TTLMillis = true, 2000
			b.fault++
			b.add(990, history.Event{Type: history.FaultStart, Fault: "delay", FaultID: b.fault, Target: "client 2 | redis-1", Client: 2, Latency: int64(tc.held * 1e6)})
			b.add(tc.end, history.Event{Type: history.FaultEnd, Fault: "delay", FaultID: b.fault, Target: "client 2 | redis-1", Client: 2, Detail: "healed"})
			b.acq(1, 3300, 3310, "a")
			b.acq(2, 1000, 3450, "b")
			b.rel(1, 3600, 3601, "a", history.OK, "a")
			_, as := checkDoubleHolder(newFacts(b.build(t)), 5e6)
			require.Len(t, as, 1)
			require.Equal(t, CauseLeaseExpired, as[0].Cause)
			require.Contains(t, as[0].Explanation, tc.explaining)
			require.Equal(t, tc.named, strings.Contains(as[0].Explanation, "used after it expired"))
		})
	}
}

// A link fault on the holder of a session lock holds its heartbeats back
// as a pause would: a grant to another client 2/3 of the session timeout
// after it began is the session expiring (by design), not the lock service
// breaking its promise; one sooner, or with the link fault on another
// client, still is. Without heartbeats (MariaDB), a stall or a reset ends
// the holder's connection, and with it the session; a delay does not.
func TestLinkFaultsExpireSessions(t *testing.T) {
	for _, tc := range []struct {
		name          string
		renews        bool
		fault, target string
		client        int
		grant         float64
		want          Cause
	}{
		{"zk, holder's link delayed", true, "delay", "client 1 | zk-1,zk-2,zk-3", 1, 2500, CauseSessionExpired},
		{"zk, holder's link lossy", true, "loss", "client 1 | zk-1,zk-2,zk-3", 1, 2500, CauseSessionExpired},
		{"zk, delayed too briefly", true, "delay", "client 1 | zk-1,zk-2,zk-3", 1, 1500, CauseSessionAlive},
		{"zk, another client's link", true, "delay", "client 3 | zk-1,zk-2,zk-3", 3, 2500, CauseSessionAlive},
		{"zk, a slow server", true, "slow-node", "zk-2 (every client's link)", 0, 2500, CauseSessionExpired},
		{"mysql, holder's link stalled", false, "stall", "client 1 | mysql-1", 1, 1500, CauseSessionExpired},
		{"mysql, holder's link delayed", false, "delay", "client 1 | mysql-1", 1, 1500, CauseSessionAlive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.info.Session, b.info.Renews, b.info.TTLMillis = true, tc.renews, 2000
			if !tc.renews {
				b.info.TTLMillis, b.info.IdleTimeoutMillis = 0, 60000
			}
			b.acq(1, 990, 1000, "a")
			b.fault++
			b.add(1010, history.Event{Type: history.FaultStart, Fault: tc.fault, FaultID: b.fault, Target: tc.target, Client: tc.client})
			b.add(4000, history.Event{Type: history.FaultEnd, Fault: tc.fault, FaultID: b.fault, Target: tc.target, Client: tc.client, Detail: "healed"})
			b.acq(2, tc.grant-10, tc.grant, "b")
			b.rel(1, 4500, 4501, "a", history.Fail, "-")
			_, as := checkDoubleHolder(newFacts(b.build(t)), 5e6)
			require.Len(t, as, 1)
			require.Equal(t, tc.want, as[0].Cause)
		})
	}
}

// A link fault aimed at an acquire in flight struck when that acquire was
// granted (or may have been), as a lost-reply partition does; one aimed at
// a holder when its client held the lock.
func TestLinkFaultStruck(t *testing.T) {
	const inFlight, holder = "in-flight: delay 1.8s on the answers for 4.1s", "holder: delay 1.8s both ways for 4.1s"
	delay := func(b *hb, client int, detail string, start, end float64) {
		b.fault++
		target := fmt.Sprintf("client %d | redis-1", client)
		b.add(start, history.Event{Type: history.FaultStart, Fault: "delay", FaultID: b.fault, Target: target, Client: client, Detail: detail})
		b.add(end, history.Event{Type: history.FaultEnd, Fault: "delay", FaultID: b.fault, Target: target, Client: client, Detail: "healed"})
	}
	for _, tc := range []struct {
		name  string
		build func(b *hb)
		want  int
	}{
		{"in flight, granted", func(b *hb) {
			delay(b, 2, inFlight, 995, 5000)
			b.acq(2, 1000, 3000, "b")
		}, 1},
		{"in flight, invoked just before the fault began, granted", func(b *hb) {
			b.acq(2, 994, 3000, "b")
			delay(b, 2, inFlight, 995, 5000)
		}, 1},
		{"in flight, refused", func(b *hb) {
			b.acq(1, 980, 990, "a")
			delay(b, 2, inFlight, 995, 5000)
			b.o(2, history.Acquire, 1000, 3000, history.Fail, func(_, d *history.Event) { d.Reason = history.ReasonHeld })
			b.rel(1, 3500, 3510, "a", history.OK, "a")
		}, 0},
		{"holder, held", func(b *hb) {
			b.acq(1, 980, 990, "a")
			delay(b, 1, holder, 995, 5000)
			b.rel(1, 1500, 1510, "a", history.OK, "a")
		}, 1},
		{"holder, another client held", func(b *hb) {
			b.acq(1, 980, 990, "a")
			delay(b, 3, holder, 995, 5000)
			b.rel(1, 1500, 1510, "a", history.OK, "a")
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.info.Lease, b.info.TTLMillis = true, 2000
			tc.build(b)
			r := Check(b.build(t), DefaultOptions())
			require.Equal(t, tc.want, r.Counts.FaultsOnHolder)
		})
	}
}

// The late grant named when its holder is the earlier of the two: its
// answer arrived after its lease was over, and another client, granted
// later, overlapped it.
func TestLateGrantNamedOnTheEarlierHolder(t *testing.T) {
	b := newHB()
	b.info.Lease, b.info.TTLMillis = true, 2000
	b.fault++
	b.add(990, history.Event{Type: history.FaultStart, Fault: "delay", FaultID: b.fault, Target: "client 1 | redis-1", Client: 1, Latency: 2250e6})
	b.add(6000, history.Event{Type: history.FaultEnd, Fault: "delay", FaultID: b.fault, Target: "client 1 | redis-1", Client: 1, Detail: "healed"})
	b.acq(1, 1000, 3450, "a")
	b.acq(2, 3500, 3510, "b")
	b.rel(1, 3600, 3601, "a", history.OK, "a")
	_, as := checkDoubleHolder(newFacts(b.build(t)), 5e6)
	require.Len(t, as, 1)
	require.Equal(t, CauseLeaseExpired, as[0].Cause)
	require.Contains(t, as[0].Explanation, "client 1 was granted the lock at 1.20 s at the latest (the delay fault held its answers back 2.25 s), answer arrived at 3.45 s, lease 2.00 s: used after it expired")
}
