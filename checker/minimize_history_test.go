package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// witnessCase is a history that shows some anomalies, and what its
// witnesses must show between them.
type witnessCase struct {
	name  string
	load  func(t *testing.T) *history.History
	kinds []Kind  // every one of these kinds gets a witness
	cause []Cause // and every one of these causes
}

func fromTestdata(file string) func(t *testing.T) *history.History {
	return func(t *testing.T) *history.History {
		h, err := history.Load(filepath.Join("testdata", file))
		require.NoError(t, err)
		return h
	}
}

func built(setup func(b *hb)) func(t *testing.T) *history.History {
	return func(t *testing.T) *history.History {
		b := newHB()
		setup(b)
		return b.build(t)
	}
}

// witnessCases: a history for every kind the checker reports, and every
// cause of a double holder.
func witnessCases() []witnessCase {
	acqTok := func(b *hb, c int, call, ret float64, owner string, tok int64) {
		b.o(c, history.Acquire, call, ret, history.OK, func(_, d *history.Event) { d.Owner, d.Token = owner, &tok })
	}
	return []witnessCase{
		{name: "double holder", load: fromTestdata("bad-double-holder.jsonl"), kinds: []Kind{KindDoubleHolder, KindNonLinearizable}},
		{name: "foreign release", load: fromTestdata("bad-foreign-release.jsonl"), kinds: []Kind{KindForeignRelease, KindDoubleHolder}, cause: []Cause{CauseLeaseExpired}},
		{name: "lease pause", load: fromTestdata("bad-lease-pause.jsonl"), kinds: []Kind{KindLostUpdate}},
		{name: "lost update", load: fromTestdata("bad-lost-update.jsonl"), kinds: []Kind{KindLostUpdate}},
		{name: "non-linearizable", load: fromTestdata("bad-nonlinearizable.jsonl"), kinds: []Kind{KindNonLinearizable}},
		{name: "release ok on expired", load: fromTestdata("bad-release-ok-on-expired.jsonl"), kinds: []Kind{KindReleaseOKOnExpired}},
		{name: "renewed lease broken", load: fromTestdata("bad-renewing-broken.jsonl"), kinds: []Kind{KindDoubleHolder}, cause: []Cause{CauseLeaseBroken}},
		{name: "stale write accepted", load: fromTestdata("bad-stale-write-accepted.jsonl"), kinds: []Kind{KindStaleWriteAccepted}},
		{name: "used after validity", load: fromTestdata("bad-used-after-validity.jsonl"), kinds: []Kind{KindUsedAfterValidity}},
		{name: "crash deadlock", load: fromTestdata("crash-deadlock.jsonl"), kinds: []Kind{KindDeadlock}},
		{name: "fenced, contained", load: fromTestdata("fenced-contained.jsonl"), kinds: []Kind{KindStaleWriteRejected, KindDoubleHolder}},
		{name: "check-then-act", kinds: []Kind{KindCheckThenAct}, load: built(func(b *hb) {
			b.info.Lease, b.info.TTLMillis, b.info.ChecksValidity = true, 100, true
			b.checkThenActGap()
			b.cycles(4, 500)
		})},
		{name: "tokens", kinds: []Kind{KindTokenReused, KindTokenRegressed}, load: built(func(b *hb) {
			b.info.Fencing = true
			b.add(0.5, history.Event{Type: history.Note, Detail: "online checker: a note no witness needs"})
			acqTok(b, 1, 0, 1, "a", 7)
			b.rel(1, 2, 3, "a", history.OK, "a")
			acqTok(b, 2, 4, 5, "b", 7)
			b.rel(2, 6, 7, "b", history.OK, "b")
			acqTok(b, 3, 8, 9, "c", 3)
			b.rel(3, 10, 11, "c", history.OK, "c")
		})},
		{name: "rw-exclusion", kinds: []Kind{KindRWExclusion}, load: built(func(b *hb) {
			b.info.ReadWrite = true
			b.acqMode(1, 0, 1, "r1", history.ModeRead)
			b.acqMode(2, 2, 3, "r2", history.ModeRead)
			b.rel(2, 4, 5, "r2", history.OK, "")
			b.acqMode(3, 6, 7, "w3", history.ModeWrite)
			b.rel(1, 10, 11, "r1", history.OK, "")
			b.rel(3, 12, 13, "w3", history.OK, "")
		})},
		{name: "renewed lease, unknown", kinds: []Kind{KindDoubleHolder}, cause: []Cause{CauseUnknown}, load: built(func(b *hb) {
			b.info.Lease, b.info.Renews, b.info.TTLMillis = true, true, 2000
			b.faultAt("pause", "client 3", 1010, 5200)
			b.acq(1, 990, 1000, "a")
			b.acq(2, 3040, 3050, "b")
			b.rel(1, 5600, 5601, "a", history.Fail, "-")
		})},
		{name: "session ended by a failover, and alive", kinds: []Kind{KindDoubleHolder}, cause: []Cause{CauseSessionExpired, CauseSessionAlive}, load: built(func(b *hb) {
			b.info.Session, b.info.IdleTimeoutMillis = true, 2000
			b.info.Nemeses = []string{"failover"}
			b.acq(1, 990, 1000, "a")
			b.fault++
			b.add(1001, history.Event{Type: history.FaultStart, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1})
			b.add(1200, history.Event{Type: history.Note, Client: 1, Detail: history.FailoverNote + "promoted mysql-2"})
			b.acq(2, 1490, 1500, "b")
			b.rel(1, 1700, 1701, "a", history.Fail, "-")
			b.add(2500, history.Event{Type: history.FaultEnd, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 1})
			b.rel(2, 2600, 2601, "b", history.OK, "b")
			b.acq(3, 3000, 3010, "c")
			b.acq(1, 3100, 3110, "d") // 0.1 s into c's session: alive
			b.rel(3, 3200, 3201, "c", history.OK, "c")
			b.rel(1, 3300, 3301, "d", history.OK, "d")
		})},
	}
}

// TestWitnessEveryKind: for a history of every kind and cause, each
// anomaly's witness is a history (it survives encoding and parsing) that
// the whole check fails with the same kind, cause, severity (unsafe for a
// violation) and clients, with the anomaly's operations in it; removing
// any one of its operations, faults or processes loses the anomaly.
func TestWitnessEveryKind(t *testing.T) {
	seenKinds, seenCauses := map[Kind]bool{}, map[Cause]bool{}
	for _, tc := range witnessCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.load(t)
			r := Check(h, DefaultOptions())
			ws := Witnesses(context.Background(), h, &r, WitnessOptions{})
			require.Len(t, ws, len(r.Anomalies), "every anomaly has a witness")
			for _, w := range ws {
				a := r.Anomalies[w.Anomaly]
				requireWitness(t, h, a, w)
				seenKinds[a.Kind], seenCauses[a.Cause] = true, true
			}
			for _, k := range tc.kinds {
				require.True(t, slices.ContainsFunc(ws, func(w HistoryWitness) bool { return r.Anomalies[w.Anomaly].Kind == k }), "no witness of a %s", k)
			}
			for _, c := range tc.cause {
				require.True(t, slices.ContainsFunc(ws, func(w HistoryWitness) bool { return r.Anomalies[w.Anomaly].Cause == c }), "no witness of cause %s", c)
			}
		})
	}
	for _, k := range []Kind{KindDoubleHolder, KindForeignRelease, KindReleaseOKOnExpired, KindLostUpdate, KindStaleWriteAccepted,
		KindStaleWriteRejected, KindDeadlock, KindNonLinearizable, KindUsedAfterValidity, KindCheckThenAct, KindTokenReused,
		KindTokenRegressed, KindRWExclusion} {
		require.True(t, seenKinds[k], "no case has a %s", k)
	}
	for _, c := range []Cause{CauseLeaseExpired, CauseLeaseBroken, CauseUnknown, CauseSessionExpired, CauseSessionAlive} {
		require.True(t, seenCauses[c], "no case has cause %s", c)
	}
}

// requireWitness holds w, the witness of anomaly a of h, to its promises.
func requireWitness(t *testing.T, h *history.History, a Anomaly, w HistoryWitness) {
	t.Helper()
	what := fmt.Sprintf("%s %s of clients %v", a.Kind, a.Cause, a.Clients)
	require.True(t, w.Minimal, "%s: minimised to the end", what)
	var buf bytes.Buffer
	for _, e := range w.Events {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		buf.Write(append(b, '\n'))
	}
	wh, err := history.Parse(&buf)
	require.NoError(t, err, "%s: the witness is a history", what)
	require.True(t, IsWitness(wh))
	require.Equal(t, h.Info.Lock, wh.Info.Lock, "the header is kept")
	require.Equal(t, h.Truncated, wh.Truncated, "the run's end is kept")
	require.Equal(t, w.Ops, len(wh.Ops))
	require.Equal(t, w.Faults, len(wh.Faults))
	for _, id := range a.Ops {
		if slices.ContainsFunc(h.Ops, func(o history.Operation) bool { return o.OpID == id }) {
			require.True(t, slices.ContainsFunc(wh.Ops, func(o history.Operation) bool { return o.OpID == id }), "%s: its operation %d is kept", what, id)
		}
	}
	r := Check(wh, DefaultOptions())
	require.True(t, slices.ContainsFunc(r.Anomalies, func(b Anomaly) bool { return sameAnomaly(a, b) }), "%s: the check of the witness finds it: %+v", what, r.Anomalies)
	if a.Severity != SeverityInfo {
		require.Equal(t, string(Fail), propStatus(t, r, propertyOf(a.Kind)), what)
	}
	if a.Severity == SeverityViolation {
		require.Equal(t, Unsafe, r.Verdict, "%s: %s", what, r.Why)
	}
	// 1-minimal: every operation, fault, process and note removed in
	// turn (grouped here as the test reads the format, not by unitsOf),
	// the whole check no longer finds it.
	groups := map[string][]int{}
	var keys []string
	for i, e := range wh.Events {
		var key string
		switch {
		case e.Type == history.Run || e.Type == history.RunEnd || (e.Type == history.Note && strings.HasPrefix(e.Detail, WitnessNote)):
			continue
		case e.OpID != 0:
			key = fmt.Sprint("op ", e.OpID)
		case e.FaultID != 0:
			key = fmt.Sprint("fault ", e.FaultID)
		case e.Type == history.Note && strings.HasPrefix(e.Detail, history.FailoverNote):
			key = fmt.Sprint("fault ", wh.Faults[slices.IndexFunc(wh.Faults, func(f history.Fault) bool { return f.Name == "failover" && f.Client == e.Client })].ID)
		case e.Type == history.ClientStart || e.Type == history.ClientExit:
			key = fmt.Sprint("process ", e.Client)
		default:
			key = fmt.Sprint("event ", i)
		}
		if groups[key] == nil {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], i)
	}
	for _, key := range keys {
		var rest []history.Event
		for i, e := range wh.Events {
			if !slices.Contains(groups[key], i) {
				rest = append(rest, e)
			}
		}
		sub, err := history.FromEvents(rest)
		require.NoError(t, err)
		r := Check(sub, DefaultOptions())
		require.False(t, slices.ContainsFunc(r.Anomalies, func(b Anomaly) bool { return sameAnomaly(a, b) }),
			"%s: still found without %s of the witness", what, key)
	}
}
