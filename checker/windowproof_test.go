package checker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
	"github.com/locktest/locktest/internal/lostgen"
)

// Violations of issue 17's shape that are not proven double grants
// (proof.go), injected into histgen's events at a fraction of the run.
const (
	// injStaleRelease: a release retried after its first try was lost
	// (histgen's client retries after the op timeout, 20 leases later,
	// and is told not-owner) is told ok instead, although its hold's
	// lease had surely run out: no order explains it, whatever the lost
	// operations did.
	injStaleRelease = "stale-release"
	// injForeignRelease: a successful release names the owner of another
	// client's hold: a release frees only its own client's holds.
	injForeignRelease = "foreign-release"
	// injLateDouble: a refused acquire inside another client's sure hold
	// is granted (withLateDouble): a proven double grant, for reference.
	injLateDouble = "late-double"
)

var injKinds = []string{injStaleRelease, injForeignRelease, injLateDouble}

// withViolation returns evs with a violation of kind injected at the first
// chance after frac of the run, and the operation it changed; ok is false
// when there was no chance.
func withViolation(evs []history.Event, kind string, frac float64, ttl, slack time.Duration) (out []history.Event, opID int64, ok bool) {
	if kind == injLateDouble {
		return withLateDouble(evs, frac, ttl)
	}
	out = slices.Clone(evs)
	from := out[int(float64(len(out))*frac)].Time
	type grant struct {
		client int
		call   int64
		ret    int64
	}
	calls := map[int64]int64{}
	invokeAt := map[int64]int{}
	grants := map[string]grant{} // by owner: acquires that returned ok
	last := map[int]string{}     // the last owner granted to each client
	for i := range out {
		e := &out[i]
		if e.Type == history.Invoke {
			calls[e.OpID], invokeAt[e.OpID] = e.Time, i
			continue
		}
		switch {
		case e.Op == history.Acquire && e.Type == history.OK && e.Owner != "":
			grants[e.Owner] = grant{e.Client, calls[e.OpID], e.Time}
			last[e.Client] = e.Owner
		case kind == injStaleRelease && e.Op == history.Release && e.Type == history.Fail &&
			e.Reason == history.ReasonNotOwner && e.Time >= from:
			g, found := grants[out[invokeAt[e.OpID]].Owner]
			if !found || g.client != e.Client || calls[e.OpID] <= g.ret+int64(ttl)+2*int64(slack) {
				continue
			}
			e.Type, e.Reason = history.OK, ""
			return out, e.OpID, true
		case kind == injForeignRelease && e.Op == history.Release && e.Type == history.OK && e.Time >= from:
			for c, o := range last {
				if c != e.Client {
					out[invokeAt[e.OpID]].Owner = o
					if e.Owner != "" {
						e.Owner = o
					}
					return out, e.OpID, true
				}
			}
		}
	}
	return out, 0, false
}

// injected is a history of the shape with a violation of kind at frac.
func injected(t testing.TB, seed uint64, ops, clients int, lost float64, kind string, frac float64) (*history.History, int64) {
	t.Helper()
	cfg := lostShape(seed, ops, clients, lost, 0)
	evs, id, ok := withViolation(histgen.Generate(cfg).Events, kind, frac, cfg.TTL, DefaultOptions().Slack)
	require.True(t, ok, "no chance to inject %s at %.1f", kind, frac)
	h, err := history.FromEvents(evs)
	require.NoError(t, err)
	return h, id
}

// TestWindowProofProbe prints the verdict and time of the linearizable
// property on histories of issue 17's shape with injected violations,
// without and with the window proof (LOCKTEST_PROBE=1; a measurement).
//
//	LOCKTEST_PROBE=1 go test ./checker -run TestWindowProofProbe -v -timeout 60m
func TestWindowProofProbe(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	modes := []bool{true}
	if os.Getenv("LOCKTEST_PROBE_BEFORE") != "" {
		modes = []bool{false, true}
	}
	kinds := injKinds
	if k := os.Getenv("LOCKTEST_PROBE_KIND"); k != "" {
		kinds = []string{k}
	}
	defer func() { windowProofOn = true }()
	for _, ops := range envInts(t, "LOCKTEST_PROBE_OPS", []int{10_000, 100_000}) {
		for _, lost := range []float64{0.01, 0.05} {
			for _, kind := range kinds {
				for _, frac := range []float64{0.1, 0.5, 0.9} {
					h, id := injected(t, 1, ops, 50, lost, kind, frac)
					for _, on := range modes {
						windowProofOn = on
						start := time.Now()
						p, _ := checkLinearizable(newFacts(h), DefaultOptions())
						fmt.Printf("ops=%d lost=%.2f %s@%.1f (op %d) window=%v: %s %s in %v: %s\n", ops, lost, kind, frac, id, on,
							p.Status, p.Engine, time.Since(start).Round(time.Millisecond), p.Detail)
					}
				}
			}
		}
	}
}

// windowsSound forces the window proof at definite returns of h (up to 10
// spread over the history, and where the exact sweep stops) and requires that a window that
// cannot be ordered comes only with a history porcupine does not pass
// (porc: its verdict on the whole history), and is one porcupine, on the
// relaxed window itself, does not pass either. It returns how many windows
// were swept and how many returns had one that cannot be ordered.
func windowsSound(t *testing.T, what string, h *history.History, porc porcupine.CheckResult) (tried, failed int) {
	t.Helper()
	ops, _, m := prepareLock(withSessionEnds(h, newFacts(h).holds), int64(DefaultOptions().Slack))
	if !windowProofApplies(m) {
		return 0, 0
	}
	var at []int32
	for k := range ops {
		if ops[k].ret != history.Never {
			at = append(at, int32(k))
		}
	}
	if len(at) > 10 {
		step := float64(len(at)) / 10
		var some []int32
		for i := range 10 {
			some = append(some, at[int(float64(i)*step)])
		}
		at = some
	}
	// And where the exact sweep stops (the blocker a beam would stop at).
	ex := newSweep(m, DefaultOptions().SearchBound)
	ex.mergeOrphans, ex.look = true, newLookahead(ops, m.ow)
	if !ex.runAll(ops) && ex.failed {
		at = append(at, ex.blocker)
	}
	for _, k := range at {
		p := newWindowProver(ops, m, DefaultOptions(), nil)
		wf := p.try(k)
		tried += p.tried
		if wf == nil {
			continue
		}
		failed++
		if porc == porcupine.Ok {
			for q := range wf.ops {
				o := &wf.ops[q]
				t.Logf("w %d: kind %d out %d client %d owner %d index %d call %.2f ret %.2f grantBy %.2f", q, o.kind, o.out, o.client, o.owner, o.index, float64(o.call)/1e6, float64(o.ret)/1e6, float64(o.grantBy)/1e6)
			}
			t.Logf("window blocker %d; full op %d index %d", wf.s.blocker, k, ops[k].index)
			require.Failf(t, "false FAIL", "%s: the window [%d, %d] at op %d cannot be ordered, but porcupine passes the history", what, wf.a, wf.b, k)
		}
		if failed == 1 {
			require.NotEqual(t, porcupine.Ok, porcupineVerdict(m, wf.ops, time.Second),
				"%s: the window sweep fails a relaxed window porcupine passes", what)
		}
	}
	return tried, failed
}

// TestWindowProofAgreesWithPorcupine: on small histories of issue 17's
// shape (3-8 clients; lostgen's, histgen's with clean-up releases, with
// and without double grants and mutations, and histgen's with the
// injected violations above), the window proof, forced at the histories'
// returns, never fails a history porcupine passes, and a window it fails
// is one porcupine fails on its own; and it catches violations (it is not
// vacuous).
func TestWindowProofAgreesWithPorcupine(t *testing.T) {
	t.Parallel()
	n := 40
	if testing.Short() || raceEnabled {
		n = 12
	}
	rng := rand.New(rand.NewPCG(17, 3))
	var tried, illegal, caught, failedWindows int
	check := func(what string, h *history.History) {
		ow := newOwners(0)
		porc := porcupineVerdict(newLockModel(h.Info, int64(DefaultOptions().Slack), ow), lockOps(h, ow), time.Second)
		tr, f := windowsSound(t, what, h, porc)
		tried += tr
		failedWindows += f
		if porc == porcupine.Illegal {
			illegal++
			if f > 0 {
				caught++
			}
		}
	}
	for i := range n {
		// lostgen: anonymous holders, certain and explainable doubles.
		cfg := smallLostShape(int64(i), rng)
		cfg.Clients = 3 + rng.IntN(6)
		if rng.IntN(2) == 0 {
			cfg.Double = 1 + rng.IntN(cfg.Ops/40+1)
			cfg.Mix = []lostgen.Mix{lostgen.MixCertain, lostgen.MixMixed, lostgen.MixExplainable}[rng.IntN(3)]
		}
		h, _, err := lostgen.GenerateHistory(cfg)
		require.NoError(t, err)
		check(fmt.Sprintf("lostgen %+v", cfg), h)

		// histgen's clean-up releases, doubles, mutations, injections.
		ttl := time.Duration(2+rng.IntN(4)) * time.Millisecond
		hc := histgen.Config{
			Seed: uint64(i), Clients: 3 + rng.IntN(6), Ops: 60 + rng.IntN(200),
			Indeterminate: []float64{0.03, 0.05, 0.1, 0.2}[rng.IntN(4)],
			Lease:         true, TTL: ttl, OpTimeout: time.Duration(5+rng.IntN(16)) * ttl,
		}
		if rng.IntN(3) == 0 {
			hc.DoubleHolders = 1 + rng.IntN(2)
		}
		evs := histgen.Generate(hc).Events
		switch i % 3 {
		case 1:
			for range 3 {
				evs = mutate(evs, rng)
			}
		case 2:
			if out, _, ok := withViolation(evs, injKinds[rng.IntN(len(injKinds))], rng.Float64(), ttl, DefaultOptions().Slack); ok {
				evs = out
			}
		}
		h, err = history.FromEvents(evs)
		require.NoError(t, err)
		check(fmt.Sprintf("histgen %+v (%d)", hc, i%3), h)
	}
	t.Logf("%d histories, %d windows swept, %d returns with a window that cannot be ordered; %d histories illegal by porcupine, %d of them failed by a window",
		2*n, tried, failedWindows, illegal, caught)
	require.Positive(t, caught, "the window proof failed no illegal history")
	require.Positive(t, tried)
}

// TestWindowProofWriteDirs writes run directories (history.jsonl) of the
// shape with injected violations, for measuring the whole `locktest check
// DIR` (LOCKTEST_WINDOW_DIR: where; LOCKTEST_PROBE_OPS: sizes, default
// 100k and 1M; 50 clients, 1% and 5% lost, each kind at 50% and 90%).
//
//	LOCKTEST_WINDOW_DIR=/tmp/wp go test ./checker -run TestWindowProofWriteDirs
func TestWindowProofWriteDirs(t *testing.T) {
	root := os.Getenv("LOCKTEST_WINDOW_DIR")
	if root == "" {
		t.Skip("set LOCKTEST_WINDOW_DIR")
	}
	for _, ops := range envInts(t, "LOCKTEST_PROBE_OPS", []int{100_000, 1_000_000}) {
		for _, lost := range []float64{0.01, 0.05} {
			cfg := lostShape(1, ops, 50, lost, 0)
			evs := histgen.Generate(cfg).Events
			for _, kind := range injKinds {
				for _, frac := range []float64{0.5, 0.9} {
					out, _, ok := withViolation(evs, kind, frac, cfg.TTL, DefaultOptions().Slack)
					require.True(t, ok)
					dir := filepath.Join(root, fmt.Sprintf("%dk-%.0fpct-%s-%.0f", ops/1000, lost*100, kind, frac*100))
					require.NoError(t, os.MkdirAll(dir, 0o755))
					f, err := os.Create(filepath.Join(dir, "history.jsonl"))
					require.NoError(t, err)
					w := bufio.NewWriter(f)
					enc := json.NewEncoder(w)
					for i := range out {
						require.NoError(t, enc.Encode(&out[i]))
					}
					require.NoError(t, w.Flush())
					require.NoError(t, f.Close())
				}
			}
		}
	}
}
