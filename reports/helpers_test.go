package reports

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// ns converts seconds to history time.
func ns(sec float64) int64 { return int64(sec * 1e9) }

// builder writes histories by hand. Times are seconds.
type builder struct {
	t      *testing.T
	events []history.Event
	opID   int64
	fault  int64
}

func newBuilder(t *testing.T, info history.RunInfo) *builder {
	t.Helper()
	info.FormatVersion = history.FormatVersion
	return &builder{t: t, events: []history.Event{{Type: history.Run, Info: &info}}}
}

func defaultInfo() history.RunInfo {
	return history.RunInfo{
		Lock: "redis-single", Nemeses: []string{"pause"}, Seed: 42, Clients: 2,
		TTLMillis: 2000, Traits: history.Traits{Lease: true}, Fencing: true, TimeLimitMs: 5000,
		StartedAt: "2025-01-02T03:04:05Z", Cluster: "local", Topology: "redis x1",
		Version: "v0.0.0-test", Servers: []string{"redis-server 7.0.15"},
		Command: "locktest run --lock redis-single --nemesis pause --seed 42", DeadlockMs: 5000,
	}
}

func (b *builder) add(e history.Event) { b.events = append(b.events, e) }

func (b *builder) start(client, pid int, at float64) {
	b.add(history.Event{Type: history.ClientStart, Time: ns(at), Client: client, PID: pid})
}

func (b *builder) exit(client int, at float64, detail string) {
	b.add(history.Event{Type: history.ClientExit, Time: ns(at), Client: client, Detail: detail})
}

// op records an operation; done may adjust the completion event. typ ""
// leaves the operation without a completion.
func (b *builder) op(client int, op history.Op, call, ret float64, typ history.Type, done func(inv, comp *history.Event)) int64 {
	b.opID++
	inv := history.Event{Type: history.Invoke, Time: ns(call), Client: client, Op: op, OpID: b.opID}
	comp := history.Event{Type: typ, Time: ns(ret), Client: client, Op: op, OpID: b.opID}
	if done != nil {
		done(&inv, &comp)
	}
	b.add(inv)
	if typ != "" {
		b.add(comp)
	}
	return b.opID
}

func (b *builder) faultAt(name, target string, from, to float64) {
	b.fault++
	b.add(history.Event{Type: history.FaultStart, Time: ns(from), Fault: name, FaultID: b.fault, Target: target})
	if to >= 0 {
		b.add(history.Event{Type: history.FaultEnd, Time: ns(to), Fault: name, FaultID: b.fault, Target: target})
	}
}

func (b *builder) build(end float64) *history.History {
	b.t.Helper()
	b.add(history.Event{Type: history.RunEnd, Time: ns(end), Detail: "time limit"})
	ev := append([]history.Event(nil), b.events...)
	sort.SliceStable(ev[1:], func(i, j int) bool { return ev[1+i].Time < ev[1+j].Time })
	for i := range ev {
		ev[i].Seq = int64(i)
	}
	h, err := history.FromEvents(ev)
	require.NoError(b.t, err)
	return h
}

func withToken(tok int64) func(inv, comp *history.Event) {
	return func(_, comp *history.Event) { comp.Token = history.Int64(tok); comp.Owner = "owner-" + itoa(tok) }
}

func withReason(reason string) func(inv, comp *history.Event) {
	return func(_, comp *history.Event) { comp.Reason = reason }
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// opAt finds the operation of client with the given kind called at call
// seconds.
func opAt(t *testing.T, h *history.History, client int, op history.Op, call float64) int64 {
	t.Helper()
	for _, o := range h.Ops {
		if o.Client == client && o.Op == op && o.Call == ns(call) {
			return o.OpID
		}
	}
	require.FailNow(t, "no such operation", "client %d %s at %.2fs", client, op, call)
	return 0
}

// sampleHistory is the Kleppmann double holder: client 1 takes the lock,
// is paused past its TTL, client 2 takes it, then client 1 wakes up, writes
// without fencing and its release fails.
func sampleHistory(t *testing.T) *history.History {
	t.Helper()
	b := newBuilder(t, defaultInfo())
	b.start(1, 4101, 0.01)
	b.start(2, 4102, 0.01)
	b.op(1, history.Acquire, 0.40, 0.50, history.OK, withToken(1))
	b.op(1, history.Read, 0.55, 0.56, history.OK, func(_, c *history.Event) { c.Value = history.Int64(0) })
	for t0 := 0.45; t0 < 2.5; t0 += 0.05 {
		b.op(2, history.Acquire, t0, t0+0.004, history.Fail, withReason(history.ReasonHeld))
	}
	b.op(2, history.Acquire, 1.30, 1.90, history.Info, func(_, c *history.Event) { c.Error = "i/o timeout" })
	b.faultAt("pause", "client 1", 0.60, 4.00)
	b.op(2, history.Acquire, 2.55, 2.60, history.OK, withToken(2))
	b.op(2, history.Read, 2.62, 2.63, history.OK, func(_, c *history.Event) { c.Value = history.Int64(0) })
	b.op(2, history.Write, 2.80, 2.81, history.OK, func(inv, c *history.Event) {
		inv.Token = history.Int64(2)
		c.Value, c.Prev = history.Int64(1), history.Int64(0)
	})
	b.op(2, history.Release, 3.50, 3.52, history.OK, func(inv, _ *history.Event) { inv.Owner = "owner-2" })
	b.op(1, history.Write, 4.05, 4.06, history.OK, func(inv, c *history.Event) {
		inv.Token = history.Int64(1)
		c.Value, c.Prev = history.Int64(1), history.Int64(1)
	})
	b.op(1, history.Release, 4.10, 4.12, history.Fail, func(inv, c *history.Event) {
		inv.Owner = "owner-1"
		c.Reason = history.ReasonNotOwner
	})
	for i, t0 := range []float64{4.2, 4.5, 4.8} {
		b.op(1, history.Acquire, t0, t0+0.01, history.OK, withToken(int64(3+i)))
		b.op(1, history.Release, t0+0.1, t0+0.11, history.OK, nil)
	}
	b.exit(1, 5.0, "run over")
	b.exit(2, 5.0, "run over")
	return b.build(5.0)
}

// sampleResult is what the checker would say about sampleHistory.
func sampleResult(t *testing.T, h *history.History) *checker.Result {
	t.Helper()
	acq1 := opAt(t, h, 1, history.Acquire, 0.40)
	acq2 := opAt(t, h, 2, history.Acquire, 2.55)
	rel2 := opAt(t, h, 2, history.Release, 3.50)
	w2 := opAt(t, h, 2, history.Write, 2.80)
	w1 := opAt(t, h, 1, history.Write, 4.05)
	rel1 := opAt(t, h, 1, history.Release, 4.10)
	return &checker.Result{
		Verdict: checker.Unsafe,
		Why:     "2 clients held the lock at the same time: clients 2 and 1 from 2.60s to 3.50s, while client 1 was paused",
		Lock:    "redis-single", Nemeses: []string{"pause"}, Seed: 42,
		Counts: checker.Counts{
			Ops: len(h.Ops), Acquires: 46, AcquiresOK: 4, AcquiresFail: 41, AcquiresInfo: 1,
			Releases: 4, ReleasesOK: 3, ReleasesFail: 1, Writes: 2, WritesAccepted: 2,
			Faults: 1, FaultsOnHolder: 1, ClientsAcquired: 2, ResourceFinal: 1,
			DurationNs: h.End, HeldNs: ns(3.8),
		},
		Properties: []checker.Property{
			{Name: "mutual-exclusion", Status: checker.Fail, Engine: "interval sweep", Count: 1, Millis: 0.05},
			{Name: "release-correctness", Status: checker.Fail, Engine: "interval sweep", Count: 1, Millis: 0.02},
			{Name: "linearizability", Status: checker.Unknown, Engine: "porcupine", Detail: "search timed out after 10s", Millis: 10000},
			{Name: "resource", Status: checker.Fail, Engine: "resource replay", Count: 1, Millis: 0.01},
			{Name: "lease-contract", Status: checker.Pass, Engine: "interval sweep", Millis: 0.01},
			{Name: "liveness", Status: checker.Skipped, Detail: "no deadlock threshold"},
		},
		Anomalies: []checker.Anomaly{
			{
				Kind: checker.KindDoubleHolder, Severity: "violation", Clients: []int{2, 1},
				Start: ns(2.60), End: ns(3.50), Ops: []int64{acq1, acq2, rel2},
				Faults:      []string{"pause client 1 (0.60s-4.00s)"},
				Explanation: "Client 1 acquired the lock at 0.50s and was paused from 0.60s to 4.00s, past its 2s TTL. The lease expired and client 2 acquired the lock at 2.60s while client 1 still believed it held it.",
			},
			{
				Kind: checker.KindLostUpdate, Severity: "violation", Clients: []int{1, 2},
				Start: ns(2.81), End: ns(4.06), Ops: []int64{w2, w1},
				Faults:      []string{"pause client 1 (0.60s-4.00s)"},
				Explanation: "Client 1 wrote 1 over client 2's 1 based on the value 0 it read before its pause: client 2's update was lost. Fencing was off, so the resource accepted the stale token 1.",
			},
			{
				Kind: checker.KindReleaseOKOnExpired, Severity: "info", Clients: []int{1},
				Start: ns(4.10), End: ns(4.12), Ops: []int64{rel1},
				Explanation: "Client 1's release failed: its key was gone (not-owner), as expected after the lease expired.",
			},
		},
		FirstViolation: ns(2.60),
	}
}

// bigHistory generates a 60 s run of n operations by clients clients
// hammering one lock with try-acquire, a write and a release, with a fault
// every 2 s, a crashed and replaced client, some timeouts and a few double
// holders.
func bigHistory(t *testing.T, n, clients int) (*history.History, *checker.Result) {
	t.Helper()
	info := defaultInfo()
	info.Clients = clients
	info.Fence = true
	b := newBuilder(t, info)
	rng := rand.New(rand.NewPCG(1, 2))
	const runSec = 60.0
	step := runSec / float64(n)
	for c := 1; c <= clients; c++ {
		b.start(c, 1000+c, 0)
	}
	for f := 1.0; f < runSec; f += 2 {
		b.faultAt([]string{"pause", "partition", "clock"}[int(f)%3], "client "+string(rune('1'+int(f)%clients)), f, f+0.7)
	}
	b.exit(3, 30, "killed by nemesis")
	b.start(3, 2003, 30.5)
	holder := 0
	holdLeft := 0
	var token int64
	var anomalies []checker.Anomaly
	for i := 0; i < n; i++ {
		at := float64(i) * step
		c := 1 + rng.IntN(clients)
		if c == 3 && at > 30 && at < 30.5 {
			continue
		}
		switch {
		case c == holder && holdLeft > 0:
			holdLeft--
			tok := token
			b.op(c, history.Write, at, at+step/2, history.OK, func(inv, comp *history.Event) {
				inv.Token = history.Int64(tok)
				comp.Value, comp.Prev = history.Int64(tok), history.Int64(tok-1)
			})
		case c == holder:
			b.op(c, history.Release, at, at+step/2, history.OK, nil)
			holder = 0
		case holder == 0:
			token++
			b.op(c, history.Acquire, at, at+step/2, history.OK, withToken(token))
			holder, holdLeft = c, 1+rng.IntN(3)
		case rng.IntN(200) == 0:
			b.op(c, history.Acquire, at, at+0.3, history.Info, func(_, comp *history.Event) { comp.Error = "timeout" })
		case rng.IntN(500) == 0:
			b.op(c, history.Write, at, at+step/2, history.Fail, func(inv, comp *history.Event) {
				inv.Token = history.Int64(1)
				comp.Reason = history.ReasonStaleToken
			})
		default:
			b.op(c, history.Acquire, at, at+step/2, history.Fail, withReason(history.ReasonHeld))
		}
		if i%(n/20) == 7 {
			anomalies = append(anomalies, checker.Anomaly{
				Kind: checker.KindDoubleHolder, Severity: "violation", Clients: []int{c, 1 + c%clients},
				Start: ns(at), End: ns(at + 0.05), Ops: []int64{b.opID, b.opID - 1, b.opID - 2},
				Faults:      []string{"pause client 1 (1.00s-1.70s)"},
				Explanation: "generated",
			})
		}
	}
	h := b.build(runSec)
	r := &checker.Result{Verdict: checker.Unsafe, Why: "generated", Anomalies: anomalies, FirstViolation: 0}
	return h, r
}
