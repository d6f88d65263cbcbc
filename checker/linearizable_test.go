package checker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

func TestLockModelStep(t *testing.T) {
	const ttl, slack = 100, 5
	free := lockState{}
	at := func(now int64) lockState { return lockState{now: now} }
	ow := newOwners(0)
	for _, o := range []string{"a", "b"} {
		ow.known[ow.id(o)] = true // owners of acquires; "x" is nobody's
	}
	held := func(c int32, owner string, call, ret, now int64) lockState {
		if owner == "?" { // taken by a lost acquire of unknown owner
			return lockState{client: c, owner: ownerFresh, acqCall: call, acqRet: ret, now: now, depth: 1}
		}
		return lockState{client: c, owner: ow.id(owner), acqCall: call, acqRet: ret, now: now, depth: 1}
	}
	deep := func(s lockState, depth int32) lockState { s.depth = depth; return s }
	acq := func(c int32, owner string, call, ret int64) *lockOp {
		return &lockOp{kind: linAcquire, client: c, owner: ow.id(owner), call: call, ret: ret}
	}
	rel := func(c int32, owner string, call, ret int64) *lockOp {
		return &lockOp{kind: linRelease, client: c, owner: ow.id(owner), call: call, ret: ret}
	}
	never := history.Never
	tests := []struct {
		name  string
		lease bool
		reent bool
		s     lockState
		in    *lockOp
		out   linOutcome
		want  []lockState // nil: impossible
	}{
		{"acquire ok when free", true, false, free, acq(1, "a", 10, 20), outOK, []lockState{held(1, "a", 10, 20, 10)}},
		{"acquire ok when held", false, false, held(2, "b", 0, 0, 0), acq(1, "a", 10, 20), outOK, nil},
		{"acquire ok, lease may have expired", true, false, held(2, "b", 0, 5, 0), acq(1, "a", 90, 95), outOK, []lockState{held(1, "a", 90, 95, 95)}},
		{"acquire ok, lease surely valid", true, false, held(2, "b", 0, 5, 0), acq(1, "a", 80, 94), outOK, nil},
		{"no times kept without a lease", false, false, free, acq(1, "a", 10, 20), outOK, []lockState{held(1, "a", 0, 0, 0)}},
		{"an operation cannot end before the clock", true, false, at(30), acq(1, "a", 10, 20), outOK, nil},
		{"the clock moves to the call", true, false, at(15), acq(1, "a", 10, 20), outOK, []lockState{held(1, "a", 10, 20, 15)}},
		{"acquire held when held", true, false, held(2, "b", 0, 5, 0), acq(1, "", 1, 2), outHeld, []lockState{held(2, "b", 0, 5, 1)}},
		{"acquire held when free", true, false, free, acq(1, "", 1, 2), outHeld, nil},
		{"indeterminate acquire when free", false, false, free, acq(1, "", 1, never), outUnknown, []lockState{free, held(1, "?", 0, 0, 0)}},
		{"a lost acquire's key: freed by a release naming nobody's owner", false, false, held(1, "?", 0, 0, 0), rel(1, "x", 50, 51), outOK, []lockState{free}},
		{"a lost acquire's key: not by one naming an acquired owner", false, false, held(1, "?", 0, 0, 0), rel(1, "a", 50, 51), outOK, nil},
		{"a lost acquire's key: a release naming nobody's owner is not refused", false, false, held(1, "?", 0, 0, 0), rel(1, "x", 50, 51), outNotOwner, nil},
		{"indeterminate acquire when held, no lease", false, false, held(2, "b", 0, 0, 0), acq(1, "", 1, never), outUnknown, []lockState{held(2, "b", 0, 0, 0)}},
		{"indeterminate acquire takes over only after the lease", true, false, held(2, "b", 0, 5, 3), acq(1, "", 1, never), outUnknown, []lockState{held(2, "b", 0, 5, 3), held(1, "?", 1, never, 95)}},
		{"indeterminate acquire granted at an unknown time", true, false, at(40), acq(1, "", 1, never), outUnknown, []lockState{at(40), held(1, "?", 1, never, 40)}},
		{"indeterminate nested acquire", true, true, held(1, "a", 0, 2, 1), acq(1, "", 4, never), outUnknown,
			[]lockState{held(1, "a", 0, 2, 1), held(1, "", 4, never, 95), deep(held(1, "a", 0, never, 4), 2)}},
		{"release ok by the owner", false, false, held(1, "a", 0, 0, 0), rel(1, "a", 50, 51), outOK, []lockState{free}},
		{"release ok by another owner of the same client", false, false, held(1, "a", 0, 0, 0), rel(1, "x", 50, 51), outOK, nil},
		{"release ok by another client", false, false, held(1, "a", 0, 0, 0), rel(2, "a", 50, 51), outOK, nil},
		{"release ok, owner unknown on either side", false, false, held(1, "", 0, 0, 0), rel(1, "a", 50, 51), outOK, []lockState{free}},
		{"release ok within the lease", true, false, held(1, "a", 0, 10, 0), rel(1, "a", 115, 120), outOK, []lockState{at(115)}},
		{"release ok after the lease", true, false, held(1, "a", 0, 10, 0), rel(1, "a", 116, 120), outOK, nil},
		{"release ok after the lease by the clock", true, false, held(1, "a", 0, 10, 117), rel(1, "a", 100, 120), outOK, nil},
		{"release ok, lease granted at an unknown time", true, false, held(1, "", 0, never, 0), rel(1, "a", 5000, 5001), outOK, []lockState{at(5000)}},
		{"release not-owner by a non-holder", false, false, held(2, "b", 0, 0, 0), rel(1, "a", 50, 51), outNotOwner, []lockState{held(2, "b", 0, 0, 0)}},
		{"release not-owner when free", true, false, free, rel(1, "a", 50, 51), outNotOwner, []lockState{at(50)}},
		{"release not-owner by the holder, no lease", false, false, held(1, "a", 0, 0, 0), rel(1, "a", 50, 51), outNotOwner, nil},
		{"release not-owner by the holder, lease may have expired", true, false, held(1, "a", 0, 10, 0), rel(1, "a", 90, 96), outNotOwner, []lockState{at(95)}},
		{"release not-owner by the holder, lease valid", true, false, held(1, "a", 0, 10, 0), rel(1, "a", 80, 94), outNotOwner, nil},
		{"indeterminate release by the holder", false, false, held(1, "a", 0, 0, 0), rel(1, "a", 50, never), outUnknown, []lockState{held(1, "a", 0, 0, 0), free}},
		{"indeterminate release by another", false, false, held(1, "a", 0, 0, 0), rel(2, "b", 50, never), outUnknown, []lockState{held(1, "a", 0, 0, 0)}},
		{"renewed lease: release ok long after the grant", true, false, held(1, "a", 0, 10, 0), rel(1, "a", 5000, 5001), outOK, []lockState{at(5000)}},
		{"reentrant acquire by the holder", false, true, held(1, "a", 0, 0, 0), acq(1, "a", 10, 20), outOK, []lockState{deep(held(1, "a", 0, 0, 0), 2)}},
		{"reentrant acquire by another owner", false, true, held(1, "a", 0, 0, 0), acq(1, "b", 10, 20), outOK, nil},
		{"reentrant acquire, not a reentrant lock", false, false, held(1, "a", 0, 0, 0), acq(1, "a", 10, 20), outOK, nil},
		{"reentrant acquire, lease may have expired: fresh or nested", true, true, held(1, "a", 0, 5, 0), acq(1, "a", 90, 96), outOK,
			[]lockState{held(1, "a", 90, 96, 95), deep(held(1, "a", 0, 96, 90), 2)}},
		{"inner release", true, true, deep(held(1, "a", 0, 5, 0), 2), rel(1, "a", 50, 60), outOK, []lockState{held(1, "a", 0, 60, 50)}},
		{"indeterminate inner release", false, true, deep(held(1, "a", 0, 0, 0), 2), rel(1, "a", 50, never), outUnknown,
			[]lockState{deep(held(1, "a", 0, 0, 0), 2), held(1, "a", 0, 0, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := lockModel{lease: tt.lease, reentrant: tt.reent, renews: strings.HasPrefix(tt.name, "renewed"), ttl: ttl, slack: slack, ow: ow}
			require.Equal(t, tt.want, m.step(tt.s, tt.in, tt.out))
		})
	}
}

func TestLinearizable(t *testing.T) {
	tests := []struct {
		name    string
		lease   bool
		ttl     int64 // ms; default 1000
		build   func(b *hb)
		status  Status
		ops     []int64 // must be named by the anomaly
		explain string
	}{
		{name: "sequential", status: Pass, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acqFail(2, 2, 3, history.ReasonHeld)
			b.rel(1, 5, 6, "a", history.OK, "a")
			b.acq(2, 7, 8, "b")
			b.rel(2, 9, 10, "b", history.OK, "b")
		}},
		{name: "concurrent acquires, one wins", status: Pass, build: func(b *hb) {
			b.acq(1, 0, 3, "a")
			b.acqFail(2, 1, 2, history.ReasonHeld) // linearized after 1's grant
			b.rel(1, 5, 6, "a", history.OK, "a")
		}},
		{name: "double holder", status: Fail, ops: []int64{1, 2}, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 2, 3, "b")
			b.rel(1, 5, 6, "a", history.OK, "a")
		}, explain: "client 2's acquire (ok, 2.0 ms–3.0 ms) cannot be placed because the lock was held by client 1 (a), acquired at 1.0 ms"},
		{name: "held while free", status: Fail, ops: []int64{3}, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 5, 6, "a", history.OK, "a")
			b.acqFail(2, 7, 8, history.ReasonHeld)
		}, explain: "because the lock was free"},
		{name: "indeterminate acquire explains a held failure", status: Pass, build: func(b *hb) {
			b.acqInfo(1, 0, 50)
			b.acqFail(2, 7, 8, history.ReasonHeld)
			b.rel(1, 60, 61, "", history.OK, "")
		}},
		{name: "acquire never answered", status: Pass, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.o(2, history.Acquire, 2, -1, history.Info, nil)
			b.rel(1, 5, 6, "a", history.OK, "a")
		}},
		{name: "a stale indeterminate release cannot free a later hold", status: Fail, build: func(b *hb) {
			b.acq(1, 0, 1, "a1")
			b.rel(1, 2, 20, "a1", history.Info, "")
			b.acq(1, 30, 31, "a2")
			b.acq(2, 40, 41, "b")
			b.rel(1, 50, 51, "a2", history.Fail, "-")
		}},
		{name: "errors are dropped", status: Pass, build: func(b *hb) {
			b.acqFail(2, 0, 1, history.ReasonError)
			b.acq(1, 0, 1, "a")
			b.o(1, history.Release, 2, 3, history.Fail, func(_, d *history.Event) { d.Reason = history.ReasonError })
			b.rel(1, 5, 6, "a", history.OK, "a")
		}},
		{name: "lease takeover after expiry", lease: true, status: Pass, build: func(b *hb) {
			b.acq(1, 0, 10, "a")
			b.acq(2, 1000, 1010, "b")
			b.rel(1, 1500, 1501, "a", history.Fail, "-")
			b.rel(2, 1600, 1601, "b", history.OK, "b")
		}},
		{name: "lease takeover before expiry", lease: true, status: Fail, build: func(b *hb) {
			b.acq(1, 0, 10, "a")
			b.acq(2, 500, 510, "b")
		}},
		{name: "a release before its deadline, then a failed acquire after it", lease: true, ttl: 10, status: Pass, build: func(b *hb) {
			// Client 1's release must come before its lease surely
			// expires (16 ms), and client 2's grant before client 3's
			// failure: placing the failure first, where the lock is
			// still client 1's, leaves the release no room.
			b.acq(1, 0, 1, "a")
			b.acq(2, 14, 31, "b")
			b.rel(1, 15, 30, "a", history.OK, "a")
			b.acqFail(3, 20, 21, history.ReasonHeld)
			b.rel(2, 40, 41, "b", history.OK, "b")
		}},
		{name: "the same without the room for the grant", lease: true, ttl: 10, status: Fail, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 17, 31, "b")
			b.rel(1, 17, 30, "a", history.OK, "a")
			b.acqFail(3, 20, 21, history.ReasonHeld)
			b.rel(2, 40, 41, "b", history.OK, "b")
		}},
		{name: "lease release ok after expiry", lease: true, status: Fail, build: func(b *hb) {
			b.acq(1, 0, 10, "a")
			b.rel(1, 2000, 2001, "a", history.OK, "")
		}},
	}
	for _, tt := range tests {
		for _, engine := range []string{"lock", "verbose", "bisect"} {
			verbose := engine != "bisect"
			t.Run(tt.name+"/"+engine, func(t *testing.T) {
				opts := DefaultOptions()
				if engine != "lock" {
					opts.Engine = EnginePorcupine
				}
				if !verbose {
					old := verboseMaxOps
					verboseMaxOps = 0
					t.Cleanup(func() { verboseMaxOps = old })
				}
				b := newHB()
				if tt.lease {
					b.info.Lease, b.info.TTLMillis = true, 1000
					if tt.ttl > 0 {
						b.info.TTLMillis = tt.ttl
					}
				}
				tt.build(b)
				h := b.build(t)
				p, as := checkLinearizable(newFacts(h), opts)
				require.Equal(t, tt.status, p.Status, p.Detail)
				if tt.status != Fail {
					require.Empty(t, as)
					return
				}
				require.Len(t, as, 1)
				require.Equal(t, KindNonLinearizable, as[0].Kind)
				for _, id := range tt.ops {
					require.Contains(t, as[0].Ops, id)
				}
				if verbose && tt.explain != "" {
					require.Contains(t, as[0].Explanation, tt.explain)
				}
			})
		}
	}
}

func TestLinearizableUnknown(t *testing.T) {
	t.Run("too large", func(t *testing.T) {
		h, err := histgen.Generate(histgen.Config{Seed: 1, Clients: 3, Ops: 300}).History()
		require.NoError(t, err)
		p, as := checkLinearizable(newFacts(h), Options{Engine: EnginePorcupine, PorcupineMaxOps: 100}.withDefaults())
		require.Equal(t, Unknown, p.Status)
		require.Contains(t, p.Detail, "too large")
		require.Empty(t, as)
	})
	t.Run("timeout", func(t *testing.T) {
		// Many clients and lost answers: the search needs far longer than
		// this (no verdict in 20 s when measured).
		h, err := histgen.Generate(histgen.Config{Seed: 1, Clients: 50, Ops: 20000, Indeterminate: 0.01}).History()
		require.NoError(t, err)
		p, _ := checkLinearizable(newFacts(h), Options{Engine: EnginePorcupine, PorcupineTimeout: 20 * time.Millisecond}.withDefaults())
		require.Equal(t, Unknown, p.Status)
		require.Contains(t, p.Detail, "timed out")
	})
}

// TestLinearizableReadWrite: Check decides the linearizable property of a
// read-write run (readers share, a writer excludes) with the lock sweep:
// generated valid histories pass, and one with a reader granted under a
// writer, or a writer granted over a holder, fails at that grant.
func TestLinearizableReadWrite(t *testing.T) {
	failed := 0
	for seed := range uint64(20) {
		cfg := histgen.Config{Seed: seed, Clients: 2 + int(seed%8), Ops: 1500, ReadWrite: true,
			Lease: seed%2 == 0, Indeterminate: []float64{0, 0.01}[seed%4/2]}
		if seed%3 == 0 {
			cfg.ReadersUnderWriter, cfg.DoubleHolders = 1, int(seed%2)
		}
		out := histgen.Generate(cfg)
		h, err := out.History()
		require.NoError(t, err)
		r := Check(h, DefaultOptions())
		var lin Property
		for _, p := range r.Properties {
			if p.Name == "linearizable" {
				lin = p
			}
		}
		if out.Injected.Total() == 0 {
			require.Equal(t, Pass, lin.Status, "seed %d: %s", seed, lin.Detail)
			require.Equal(t, EngineLock, lin.Engine)
			continue
		}
		require.Equal(t, Fail, lin.Status, "seed %d: %s", seed, lin.Detail)
		failed++
		var a *Anomaly
		for k := range r.Anomalies {
			if r.Anomalies[k].Kind == KindNonLinearizable {
				a = &r.Anomalies[k]
			}
		}
		require.NotNil(t, a)
		first := slices.Min(append(slices.Clone(out.Injected.ReadersUnderWriter), out.Injected.DoubleHolders...))
		require.Contains(t, a.Ops, first, "seed %d: %s", seed, a.Explanation)
	}
	require.Positive(t, failed)
}
