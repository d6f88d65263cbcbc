package checker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// propStatus returns the status of property name in r.
func propStatus(t *testing.T, r Result, name string) string {
	t.Helper()
	for _, p := range r.Properties {
		if p.Name == name {
			return string(p.Status)
		}
	}
	t.Fatalf("no property %s", name)
	return ""
}

// A session lock (MariaDB's GET_LOCK) is freed by the server when its
// holder's process dies: the next grant, before the controller even saw the
// exit, is linearizable. The same history of a lock that outlives its
// client is not.
func TestSessionLockFreedByACrash(t *testing.T) {
	for _, session := range []bool{true, false} {
		b := newHB()
		b.info.Session = session
		b.info.Nemeses = []string{"crash-client"}
		b.clientLife(1, 0, 1000)
		b.clientLife(2, 0, -1)
		b.acq(1, 10, 11, "a")
		b.fault++
		b.add(12, history.Event{Type: history.FaultStart, Fault: "crash-client", FaultID: b.fault, Target: "client 1", Client: 1})
		b.add(14, history.Event{Type: history.FaultEnd, Fault: "crash-client", FaultID: b.fault, Target: "client 1", Client: 1})
		b.acq(2, 12.5, 13, "b") // freed as the connection closed
		b.rel(2, 20, 21, "b", history.OK, "b")
		b.cycles(10, 30)
		r := Check(b.build(t), DefaultOptions())
		p, found, _ := feed(t, b.events(), DefaultOptions())
		if session {
			require.Empty(t, found, "the incremental checker agrees")
			require.Equal(t, Pass, p.Status)
		} else {
			require.NotEmpty(t, found, "the incremental checker agrees")
		}
		if session {
			require.Equal(t, Safe, r.Verdict, r.Why)
			require.Equal(t, string(Pass), propStatus(t, r, "linearizable"))
		} else {
			require.Equal(t, Unsafe, r.Verdict, r.Why)
			require.Equal(t, string(Fail), propStatus(t, r, "linearizable"))
		}
		require.Equal(t, 1, r.Counts.FaultsOnHolder, "the crash hit the holder")
	}
}

// A session's lease was renewed up to TTL/3 before the acquire: a holder
// frozen right after acquiring loses it from 2/3 TTL after the acquire on.
// That grant is linearizable and the double holder is a session that
// expired by design; a grant with no fault that could stop the heartbeats
// is the lock service breaking its promise.
func TestRenewedSessionExpiresEarly(t *testing.T) {
	build := func(pause bool) *history.History {
		b := newHB()
		b.info.Session, b.info.Renews, b.info.Lease, b.info.TTLMillis = true, true, true, 900
		b.info.Nemeses = []string{"pause"}
		b.acq(1, 0, 1, "a")
		if pause {
			b.fault++
			b.add(2, history.Event{Type: history.FaultStart, Fault: "pause", FaultID: b.fault, Target: "client 1", Client: 1})
			b.add(2000, history.Event{Type: history.FaultEnd, Fault: "pause", FaultID: b.fault, Target: "client 1", Client: 1})
		}
		b.acq(2, 700, 701, "b") // 0.78 TTL after a's acquire
		b.rel(2, 800, 801, "b", history.OK, "b")
		b.rel(1, 2001, 2002, "a", history.Fail, "-")
		return b.build(t)
	}
	r := Check(build(true), DefaultOptions())
	require.Equal(t, string(Pass), propStatus(t, r, "linearizable"), "the session may have expired at 600 ms")
	require.Equal(t, string(Pass), propStatus(t, r, "lease-contract"))
	var causes []Cause
	for _, a := range r.Anomalies {
		if a.Kind == KindDoubleHolder {
			causes = append(causes, a.Cause)
			require.Contains(t, a.Explanation, "Lost by design")
		}
	}
	require.Equal(t, []Cause{CauseSessionExpired}, causes)
	require.Contains(t, r.Why, "1 double holder (1 session-expired)")

	r = Check(build(false), DefaultOptions())
	require.Equal(t, Unsafe, r.Verdict)
	require.Equal(t, string(Fail), propStatus(t, r, "lease-contract"))
	for _, a := range r.Anomalies {
		if a.Kind == KindDoubleHolder {
			require.Equal(t, CauseSessionAlive, a.Cause)
		}
	}
}

// The double holders of a MariaDB session lock (no heartbeats, a server
// that closes idle connections after wait_timeout) say why the lock went.
func TestSessionCauseWithoutHeartbeats(t *testing.T) {
	cases := []struct {
		name    string
		build   func(b *hb)
		cause   Cause
		explain string
	}{
		{name: "idle past wait_timeout", cause: CauseSessionExpired, explain: "sat idle from its acquire until client 2's grant, 2.50 s, longer than the server keeps an idle connection (wait_timeout 2.00 s)", build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.acq(2, 3490, 3500, "b")
			b.rel(1, 3700, 3701, "a", history.Fail, "-")
		}},
		{name: "granted within wait_timeout", cause: CauseSessionAlive, build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.acq(2, 1490, 1500, "b")
			b.rel(1, 1700, 1701, "a", history.Fail, "-")
		}},
		{name: "a failover ended the session", cause: CauseSessionExpired, explain: "the failover of primary at 1.00 s ended every session of the server", build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.fault++
			b.add(1001, history.Event{Type: history.FaultStart, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1})
			b.acq(2, 1490, 1500, "b")
			b.rel(1, 1700, 1701, "a", history.Fail, "-")
			b.add(2500, history.Event{Type: history.FaultEnd, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1})
		}},
		{name: "a frozen server keeps its sessions", cause: CauseSessionAlive, build: func(b *hb) {
			b.acq(1, 990, 1000, "a")
			b.faultAt("pause-server", "mysql-1", 1001, 1400)
			b.acq(2, 1490, 1500, "b")
			b.rel(1, 1700, 1701, "a", history.Fail, "-")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.info.Session, b.info.IdleTimeoutMillis = true, 2000
			tc.build(b)
			_, as := checkDoubleHolder(newFacts(b.build(t)), 5e6)
			require.Len(t, as, 1)
			require.Equal(t, tc.cause, as[0].Cause)
			require.Contains(t, as[0].Explanation, tc.explain)
		})
	}
}

// A session lock whose server drops idle connections is, to the
// linearizability check, a lease of the idle timeout: a grant after the
// holder's connection sat idle that long is what the lock does; one before
// is not.
func TestIdleSessionIsALease(t *testing.T) {
	for _, tc := range []struct {
		grant float64
		want  Status
	}{{3500, Pass}, {1500, Fail}} {
		b := newHB()
		b.info.Session, b.info.IdleTimeoutMillis = true, 2000
		b.acq(1, 990, 1000, "a")
		b.acq(2, tc.grant-10, tc.grant, "b")
		b.rel(1, 3700, 3701, "a", history.Fail, "-")
		b.rel(2, 3800, 3801, "b", history.OK, "b")
		p, _ := checkLinearizable(newFacts(b.build(t)), DefaultOptions())
		require.Equal(t, tc.want, p.Status, "grant at %v ms: %s", tc.grant, p.Detail)
	}
}

// A server fault that ends every session (a killed MariaDB primary
// restarts with no connection; a failover moves the clients to a server
// that never saw theirs) frees a session lock while its holder still
// believes it holds it: the next grant is what the lock does (linearizable;
// the double holder is session-expired, by design). A frozen server keeps
// its sessions, a killed replica had none of them, a fault that failed did
// nothing, and a lock kept alive by heartbeats outlives a server fault (its
// session moves to another server): there the grant is not linearizable.
func TestServerFaultEndsSessions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   string
		detail  string // of the fault's start
		end     string // of its end
		servers int    // in the run header (0: not said)
		renews  bool
		during  bool // the fault began while the holder's acquire ran
		want    Status
		cause   Cause
	}{
		{name: "kill of the only server", fault: "kill", want: Pass, cause: CauseSessionExpired},
		{name: "kill of the primary", fault: "kill", servers: 2, detail: "SIGKILL, " + history.KilledPrimary, want: Pass, cause: CauseSessionExpired},
		{name: "kill recorded while the acquire ran", fault: "kill", during: true, want: Pass, cause: CauseSessionExpired},
		{name: "failover", fault: "failover", servers: 2, want: Pass, cause: CauseSessionExpired},
		{name: "kill of a replica", fault: "kill", servers: 2, detail: "SIGKILL, " + history.KilledReplica, want: Fail, cause: CauseSessionAlive},
		{name: "kill that failed", fault: "kill", end: "failed: not running", want: Fail, cause: CauseSessionAlive},
		{name: "frozen server", fault: "pause-server", want: Fail, cause: CauseSessionAlive},
		{name: "heartbeats", fault: "kill", renews: true, want: Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.info.Session, b.info.Nemeses = true, []string{tc.fault}
			for i := range tc.servers {
				b.info.Servers = append(b.info.Servers, fmt.Sprintf("mysql-%d: mariadb", i+1))
			}
			if tc.renews {
				b.info.Renews, b.info.Lease, b.info.TTLMillis = true, true, 10_000
			} else {
				b.info.IdleTimeoutMillis = 28_800_000 // MariaDB's default wait_timeout
			}
			at := 1001.0
			if tc.during {
				at = 995
			}
			b.faultWith(tc.fault, "mysql-1", at, 1400, tc.detail, tc.end)
			b.acq(1, 990, 1000, "a")
			b.acq(2, 1490, 1500, "b")
			b.rel(1, 1700, 1701, "a", history.Fail, "-")
			b.rel(2, 1800, 1801, "b", history.OK, "b")
			b.cycles(10, 2000)
			h := b.build(t)
			r := Check(h, DefaultOptions())
			require.Equal(t, string(tc.want), propStatus(t, r, "linearizable"), r.Why)
			require.Equal(t, Unsafe, r.Verdict, "two clients held it at once either way")
			if tc.cause != "" {
				_, as := checkDoubleHolder(newFacts(h), 5e6)
				require.NotEmpty(t, as)
				require.Equal(t, tc.cause, as[0].Cause, as[0].Explanation)
			}
			if tc.end == "" {
				// The online checker cannot know yet that a fault failed.
				p, found, _ := feed(t, b.events(), DefaultOptions())
				require.Equal(t, tc.want, p.Status, "the incremental checker agrees")
				require.Equal(t, tc.want == Fail, len(found) > 0)
			}
		})
	}
}
