package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

func TestVerdict(t *testing.T) {
	tests := []struct {
		name    string
		build   func(b *hb)
		opts    Options
		verdict Verdict
		why     string
	}{
		{name: "safe", verdict: Safe, why: "12 acquires by 2 clients, no faults: no anomaly", build: func(b *hb) {
			b.cycles(12, 0)
		}},
		{name: "faults on holders", verdict: Safe, why: "12 acquires by 2 clients, 1 fault while the lock was held: no anomaly", build: func(b *hb) {
			b.info.Nemeses = []string{"pause"}
			b.faultAt("pause", "client 1", 2, 3)
			b.faultAt("pause", "client 2", 7, 8) // client 2 does not hold then
			b.cycles(12, 0)
		}},
		{name: "a server fault during a hold", verdict: Safe, why: "12 acquires by 2 clients, 1 fault while the lock was held: no anomaly", build: func(b *hb) {
			b.info.Nemeses = []string{"partition"}
			b.faultAt("partition", "redis-1", 2, 3)
			b.cycles(12, 0)
		}},
		{name: "a server fault while nobody held the lock", verdict: Inconclusive, why: "no kill fault started while a client held the lock", build: func(b *hb) {
			b.info.Nemeses = []string{"kill"}
			b.faultAt("kill", "redis-1", 7, 8)
			b.cycles(12, 0)
		}},
		// A lost reply is aimed at the acquire its client sends next: it
		// matters when that acquire is granted (or may have been).
		{name: "a lost reply aimed at an acquire that was refused", verdict: Inconclusive, why: "no partition fault started while its client held the lock", build: func(b *hb) {
			b.info.Nemeses = []string{"partition"}
			t := b.cycles(6, 0)
			lostReply(b, 3, t, t+50)
			b.acq(1, t+0.1, t+0.5, "h") // got in first
			b.acqFail(3, t+1, t+60, history.ReasonHeld)
			b.rel(1, t+70, t+71, "h", history.OK, "h")
			b.cycles(6, t+100)
		}},
		{name: "a lost reply aimed at an acquire that was granted", verdict: Safe, why: "1 fault while the lock was held", build: func(b *hb) {
			b.info.Nemeses = []string{"partition"}
			t := b.cycles(6, 0)
			lostReply(b, 3, t, t+50)
			b.acq(3, t+1, t+60, "late")
			b.rel(3, t+70, t+71, "late", history.OK, "late")
			b.cycles(6, t+100)
		}},
		// A failover matters only if the replica is promoted while the
		// holder whose grant it followed still holds a live lease, the
		// promotion lost that grant, and the promoted replica could grant
		// the lock again before the holder let go.
		{name: "a failover whose promoted replica granted the lock again", verdict: Unsafe, why: "double holder", build: func(b *hb) {
			failoverCells(b, 30, 40, history.OK, func(b *hb, t float64) { b.acq(2, t+32, t+33, "g") })
		}},
		{name: "a fenced failover whose second grant was contained", verdict: Safe, why: "1 fault while the lock was held: 1 double holder (1 lease-broken), 1 non-linearizable history contained by fencing", build: func(b *hb) {
			failoverCells(b, 30, 40, history.OK, func(b *hb, t float64) {
				b.info.Fence, b.info.Fencing = true, true
				b.o(2, history.Acquire, t+32, t+33, history.OK, func(_, d *history.Event) { d.Owner, d.Token = "g", history.Int64(100) })
				b.write(2, t+34, t+35, history.OK, 1, 0, 100)
				b.rel(2, t+36, t+37, "g", history.OK, "g")
				b.write(1, t+38, t+39, history.Fail, 1, 0, 1)
			})
		}},
		{name: "a failover nobody was granted after before the holder let go", verdict: Inconclusive,
			why: "no failover's promoted replica granted the lock while a holder whose lock the failover lost still held it: the first grant after the promotion came 41.0 ms after the holder let go", build: func(b *hb) {
				failoverCells(b, 30, 40, history.OK)
			}},
		// An acquire on its way when the holder let go, granted after,
		// may have been granted before or after: it shows nothing (a
		// starved local run said safe, "1 fault while the lock was held").
		{name: "a failover with an acquire granted across the holder's release", verdict: Inconclusive,
			why: "the first grant after the promotion came 5.0 ms after the holder let go", build: func(b *hb) {
				failoverCells(b, 30, 40, history.OK, func(b *hb, t float64) {
					b.acq(2, t+35, t+45, "late")
					b.rel(2, t+46, t+47, "late", history.OK, "late")
				})
			}},
		{name: "a failover with an acquire whose answer was lost", verdict: Inconclusive, why: "no failover's promoted replica granted the lock", build: func(b *hb) {
			failoverCells(b, 30, 40, history.OK, func(b *hb, t float64) { b.o(2, history.Acquire, t+20, t+45, history.Info, nil) })
		}},
		{name: "a failover promoted after the lease ran out", verdict: Inconclusive, why: "no failover promoted a replica while a client held the lock and its lease (TTL 0.10 s) live: the promotion came 0.15 s after the failure", build: func(b *hb) {
			failoverCells(b, 152, 160, history.Fail)
		}},
		// The primary failed and the topology promoted no replica (Sentinel
		// refused a stale one): the run proves nothing, and says why.
		{name: "a failover the topology promoted no replica for", verdict: Inconclusive,
			why: "no failover promoted a replica (the topology promoted none: the fault table says how its servers stood)", build: func(b *hb) {
				t := unpromotedFailover(b, "")
				b.rel(1, t+50, t+51, "f", history.OK, "f")
				b.cycles(6, t+70)
			}},
		// The topology promoted a replica after the failover stopped
		// waiting (a late promotion note after the failed one): a
		// promotion, not none, but timed when it was seen, so it never
		// counts as striking, even with a second grant after it that
		// fencing contained.
		{name: "a failover the topology promoted late", verdict: Inconclusive,
			why: "a failover's replica was promoted only after the failover had stopped waiting for a promotion: when it came is not known, only when it was seen", build: func(b *hb) {
				t := unpromotedFailover(b, "; a replica was promoted late; the old primary rejoined as a replica")
				b.add(t+42, history.Event{Type: history.Note, Client: 1, Detail: history.FailoverNote + history.PromotedLate + "sentinels named redis-2 the master after FailPrimary stopped waiting for a promotion"})
				b.acq(2, t+44, t+45, "g")
				b.info.Fence = true
				b.cycles(6, t+70)
			}},
		// mysql-replicated: the promotion note says whether the promoted
		// replica had every write the primary had committed. A lock in
		// rows survives a failover that lost none; one in a session never
		// does.
		{name: "a failover that lost no write of a lock in rows", verdict: Inconclusive,
			why: "no failover lost a live holder's lock: the promoted replica had applied every write the primary had committed", build: func(b *hb) {
				failoverCells(b, 30, 40, history.OK, func(b *hb, t float64) {
					b.note = "; " + history.PromotedWithEveryWrite
					b.acqFail(2, t+32, t+33, history.ReasonHeld) // the promoted replica has the row
				})
			}},
		{name: "a failover that lost the grant of a lock in rows", verdict: Unsafe, why: "double holder", build: func(b *hb) {
			failoverCells(b, 30, 40, history.OK, func(b *hb, t float64) {
				b.note = "; " + history.PromotedLackingWrites
				b.acq(2, t+32, t+33, "g")
			})
		}},
		{name: "a failover that lost no write of a lock in a session", verdict: Unsafe, why: "double holder", build: func(b *hb) {
			failoverCells(b, 30, 40, history.OK, func(b *hb, t float64) {
				b.note = "; " + history.PromotedWithEveryWrite
				b.info.Session = true
				b.acq(2, t+32, t+33, "g")
			})
		}},
		// A fault that never took effect (the clock shim was not in
		// effect) proves nothing.
		{name: "a fault that failed to take effect", verdict: Inconclusive, why: "every clock fault failed to take effect", build: func(b *hb) {
			b.info.Nemeses = []string{"clock"}
			b.faultWith("clock", "redis-1", 2, 3, "", "failed: the clock shim did not take effect")
			b.cycles(12, 0)
		}},
		{name: "a kill of a replica", verdict: Inconclusive, why: "every kill took down a replica, never the primary whose sessions hold the lock", build: func(b *hb) {
			b.info.Nemeses = []string{"kill"}
			b.faultWith("kill", "mysql-2", 2, 3, "SIGKILL, "+history.KilledReplica, "restarted")
			b.cycles(12, 0)
		}},
		// A lock in a MySQL session ends with the server's sessions: a kill
		// of that server matters only when the restarted server grants the
		// lock to another client before the holder lets go.
		{name: "a kill of the server holding a session lock, nobody granted before the holder let go", verdict: Inconclusive,
			why: "no kill gave the lock away twice: the sessions holding the lock end with the server, and no other client was granted it by the restarted server while its holder still held it (the first grant after it came 6.0 ms after the holder let go)", build: func(b *hb) {
				sessionKillCell(b, 45)
			}},
		{name: "a kill of the server holding a session lock, granted again while held", verdict: Unsafe, why: "double holder", build: func(b *hb) {
			sessionKillCell(b, 35)
		}},
		// A ZooKeeper or etcd session is a lease the ensemble keeps: a
		// kill of one server while the lock is held strikes, and the lock
		// outliving it is evidence.
		{name: "a kill of a server while a session lease is held", verdict: Safe, why: "1 fault while the lock was held: no anomaly", build: func(b *hb) {
			b.info.Lease, b.info.Renews = true, true
			sessionKillCell(b, 45)
		}},
		{name: "too few acquires", verdict: Inconclusive, why: "only 4 successful acquires (at least 10 needed)", build: func(b *hb) {
			b.cycles(4, 0)
		}},
		{name: "MinAcquires option", verdict: Safe, opts: Options{MinAcquires: 4}, build: func(b *hb) {
			b.cycles(4, 0)
		}},
		{name: "one client", verdict: Inconclusive, why: "only 1 client acquired the lock (at least 2 needed)", build: func(b *hb) {
			for i := range 12 {
				t := float64(10 * i)
				b.acq(1, t, t+1, "a")
				b.rel(1, t+5, t+6, "a", history.OK, "a")
			}
		}},
		{name: "nobody acquired", verdict: Inconclusive, why: "only 0 successful acquires (at least 10 needed); no client acquired the lock (at least 2 needed)", build: func(b *hb) {
			b.acqFail(1, 0, 1, history.ReasonError)
		}},
		{name: "empty history", verdict: Inconclusive, why: "only 0 successful acquires", build: func(b *hb) {}},
		{name: "nemesis never fired", verdict: Inconclusive, why: "nemesis clock never injected a fault", build: func(b *hb) {
			b.info.Nemeses = []string{"none", "clock"}
			b.cycles(12, 0)
		}},
		{name: "crash never hit a holder", verdict: Inconclusive, why: "no crash-client fault started while its client held the lock", build: func(b *hb) {
			b.info.Nemeses = []string{"crash-client"}
			b.faultAt("crash-client", "client 2", 2, 3) // client 1 holds then
			b.cycles(12, 0)
		}},
		{name: "search unknown", verdict: Inconclusive, opts: Options{Engine: EnginePorcupine, PorcupineMaxOps: 5}, why: "linearizable unknown: history too large", build: func(b *hb) {
			b.cycles(12, 0)
		}},
		{name: "violations outrank everything", verdict: Unsafe, why: "1 double holder, 1 non-linearizable history", build: func(b *hb) {
			b.info.Nemeses = []string{"partition"}
			b.acq(1, 0, 1, "a")
			b.acq(2, 2, 3, "b")
		}},
		{name: "deadlock with other violations", verdict: Unsafe, why: "1 double holder, 1 non-linearizable history; liveness: deadlock of 8.00 s", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 2, 3, "b")
			b.clientLife(1, 0, 4)
			b.clientLife(2, 0, 5)
			for t := 10.0; t <= 8010; t += 1000 {
				b.acqFail(3, t, t, history.ReasonHeld)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			tt.build(b)
			r := Check(b.build(t), tt.opts)
			require.Equal(t, tt.verdict, r.Verdict, r.Why)
			require.Contains(t, r.Why, tt.why)
			// A gap alone is the whole reason, word for word as
			// NeverInjected and NoneWhileHeld say it: the harness's tests
			// read it so (harnesstest.NotLanded).
			for _, gap := range []string{NeverInjected("clock"), NoneWhileHeld("crash-client", true), NoneWhileHeld("kill", false), NoneWhileHeld("partition", true)} {
				if tt.why == gap {
					require.Equal(t, gap, r.Why)
				}
			}
		})
	}
}

func TestSeverities(t *testing.T) {
	tests := []struct {
		name     string
		fence    bool
		damage   bool
		want     Severity // severity of the double holder
		verdict  Verdict
		firstVio bool
	}{
		{name: "unfenced", want: SeverityViolation, verdict: Unsafe, firstVio: true},
		{name: "fenced, no damage", fence: true, want: SeverityContained, verdict: Safe},
		{name: "fenced, damage", fence: true, damage: true, want: SeverityViolation, verdict: Unsafe, firstVio: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.info.Fence = tt.fence
			end := b.cycles(12, 0)
			b.acq(1, end, end+1, "a")
			b.acq(2, end+2, end+3, "b")
			b.write(2, end+4, end+5, history.OK, 1, 0, 2)
			if tt.damage {
				b.write(1, end+6, end+7, history.OK, 1, 1, 1) // stale, accepted, overwrites
			} else {
				b.write(1, end+6, end+7, history.Fail, 0, 0, 1)
			}
			r := Check(b.build(t), Options{})
			require.Equal(t, tt.verdict, r.Verdict, r.Why)
			for _, a := range r.Anomalies {
				switch a.Kind {
				case KindDoubleHolder, KindNonLinearizable:
					require.Equal(t, tt.want, a.Severity, a.Kind)
				case KindStaleWriteRejected:
					require.Equal(t, SeverityInfo, a.Severity)
				default:
					require.Equal(t, SeverityViolation, a.Severity, a.Kind)
				}
			}
			require.Equal(t, tt.firstVio, r.FirstViolation >= 0)
		})
	}
}

func TestCheckFillsResult(t *testing.T) {
	b := newHB()
	b.info.Lock, b.info.Seed, b.info.Nemeses = "etcd", 42, []string{"pause"}
	b.faultAt("pause", "client 1", 2, 3)
	b.cycles(12, 0)
	b.noEnd = true
	r := Check(b.build(t), DefaultOptions())
	require.Equal(t, "etcd", r.Lock)
	require.Equal(t, int64(42), r.Seed)
	require.Equal(t, []string{"pause"}, r.Nemeses)
	require.True(t, r.Truncated)
	require.Contains(t, r.Why, "(history truncated)")
	require.Equal(t, 1, r.Counts.FaultsOnHolder)
	require.Equal(t, 1, r.Counts.Faults)
	require.Equal(t, ms(12*4), r.Counts.HeldNs)
	var names []string
	for _, p := range r.Properties {
		names = append(names, p.Name)
		require.GreaterOrEqual(t, p.Millis, 0.0)
		require.NotEmpty(t, p.Engine)
	}
	require.Equal(t, []string{"double-holder", "lease-contract", "foreign-release", "release-ok-on-expired", "used-after-validity", "lost-update", "fencing", "token-order", "deadlock", "linearizable"}, names)
	require.NotNil(t, r.Anomalies)
}

func TestDefaultOptions(t *testing.T) {
	require.Equal(t, DefaultOptions(), Options{}.withDefaults())
	require.Equal(t, Options{Engine: EngineLock, SearchBound: 4096, SearchBudget: time.Minute, LostHorizon: 10 * time.Millisecond, PorcupineTimeout: 10 * time.Second, PorcupineMaxOps: 50000, MinAcquires: 10, Slack: 5 * time.Millisecond}, DefaultOptions())
	o := Options{MinAcquires: 3}.withDefaults()
	require.Equal(t, 3, o.MinAcquires)
}

// TestLargeHistory runs Check on a generated history too large for
// porcupine: the lock sweep decides it, and porcupine, forced, is honest
// about not being able to.
func TestLargeHistory(t *testing.T) {
	h, err := histgen.Generate(histgen.Config{Seed: 9, Clients: 10, Ops: 60000, Resource: true, Indeterminate: 0.01, DoubleHolders: 2}).History()
	require.NoError(t, err)
	r := Check(h, Options{PorcupineMaxOps: 1000})
	require.Equal(t, Unsafe, r.Verdict, r.Why)
	requireProperty(t, r, "linearizable", Fail)
	p := r.Properties[len(r.Properties)-1]
	require.Equal(t, EngineLock, p.Engine)
	require.NotNil(t, p.Search)
	require.GreaterOrEqual(t, kinds(r.Anomalies)[KindDoubleHolder], 2)

	r = Check(h, Options{Engine: EnginePorcupine, PorcupineMaxOps: 1000})
	requireProperty(t, r, "linearizable", Unknown)
	require.Equal(t, Unsafe, r.Verdict, r.Why)
}

// A run stopped early for a violation that the full check does not find
// vouches for nothing: inconclusive, saying the checkers disagree.
func TestStoppedEarlyWithoutViolationIsInconclusive(t *testing.T) {
	b := newHB()
	b.cycles(20, 0)
	h := b.build(t)
	h.Ended = history.EndedEarly
	r := Check(h, DefaultOptions())
	require.Equal(t, Inconclusive, r.Verdict)
	require.Contains(t, r.Why, "stopped early for a violation the online checker saw")
	h.Ended = "time limit"
	require.Equal(t, Safe, Check(h, DefaultOptions()).Verdict)
}

// lostReply adds a lost-reply partition aimed at client c's next acquire,
// as the partition nemesis records it.
func lostReply(b *hb, c int, start, end float64) {
	b.fault++
	target := fmt.Sprintf("redis-1 -> client %d", c)
	b.add(start, history.Event{Type: history.FaultStart, Fault: "partition", FaultID: b.fault, Target: target, Client: c, Detail: "lost-reply for 50ms"})
	b.add(end, history.Event{Type: history.FaultEnd, Fault: "partition", FaultID: b.fault, Target: target, Client: c, Detail: "healed"})
}

// failoverCells: sequential cycles, then client 1 granted a 100 ms lease
// and a failover right after, its replica promoted promote ms after the
// grant; client 1 releases release ms after it (relType: the release's
// outcome), and more cycles follow.
// failoverCells builds a failover right after client 1's grant, the
// replica promoted promote ms and the holder's release release ms after
// it; during, if given, adds what else happens from the grant's time t on
// (and may set b.note, the end of the promotion note).
// sessionKillCell: a session lock (mysql-for-update), the server killed
// (restarted 28 ms later) while client 1 holds it, released 38 ms after
// the kill; client 2 then acquires at regrant ms after client 1's grant.
func sessionKillCell(b *hb, regrant float64) {
	b.info.Nemeses, b.info.Session = []string{"kill"}, true
	t := b.cycles(6, 0)
	b.acq(1, t, t+1, "f")
	b.faultWith("kill", "mysql-1", t+2, t+30, "SIGKILL", "restarted")
	b.rel(1, t+40, t+41, "f", history.OK, "f")
	b.acq(2, t+regrant, t+regrant+1, "g")
	b.rel(2, t+regrant+5, t+regrant+6, "g", history.OK, "g")
	b.cycles(6, t+60)
}

func failoverCells(b *hb, promote, release float64, relType history.Type, during ...func(b *hb, t float64)) {
	b.info.Nemeses, b.info.Lease, b.info.TTLMillis = []string{"failover"}, true, 100
	t := b.cycles(6, 0)
	b.acq(1, t, t+1, "f")
	for _, d := range during {
		d(b, t)
	}
	b.fault++
	b.add(t+2, history.Event{Type: history.FaultStart, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1})
	b.add(t+promote, history.Event{Type: history.Note, Client: 1, Detail: history.FailoverNote + "promoted redis-2" + b.note})
	removed := "f"
	if relType != history.OK {
		removed = "-"
	}
	b.rel(1, t+release, t+release+1, "f", relType, removed)
	b.add(t+release+30, history.Event{Type: history.FaultEnd, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1})
	b.cycles(6, t+release+40)
}

// unpromotedFailover builds a failover cell whose FailPrimary gave up: 6
// cycles, client 1's grant "f" at t, the failover from t+2 to t+60 (its end
// saying end after the failure), its failover-failed note at t+40. It
// returns t.
func unpromotedFailover(b *hb, end string) float64 {
	b.info.Nemeses, b.info.Lease, b.info.TTLMillis = []string{"failover"}, true, 100
	t := b.cycles(6, 0)
	b.acq(1, t, t+1, "f")
	b.fault++
	failed := history.FailoverFailed + "no sentinel named a new master within 30s"
	b.add(t+2, history.Event{Type: history.FaultStart, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1})
	b.add(t+60, history.Event{Type: history.FaultEnd, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1, Detail: failed + end})
	b.add(t+40, history.Event{Type: history.Note, Client: 1, Detail: failed})
	return t
}
