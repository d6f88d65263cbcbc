package checker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

// verdicts of one history by every engine.
type verdicts struct {
	porcupine porcupine.CheckResult // the oracle, on every lock operation
	exact     int                   // exact sweep on every lock operation: 1 ok, 0 illegal, -1 bound
	sweep     int                   // runLockSweep as Check runs it (held windows dropped, two passes)
	property  Status                // the linearizable property (porcupine where the sweep gives up)
	engine    string
}

func (v verdicts) String() string {
	return fmt.Sprintf("porcupine %s, exact sweep %d, sweep %d, property %s by %s", v.porcupine, v.exact, v.sweep, v.property, v.engine)
}

func sweepOutcome(s *sweep) int {
	switch {
	case s.stats.Exceeded:
		return -1
	case s.failed:
		return 0
	}
	return 1
}

// judge runs the engines on h. The oracle gets no held-window drops and no
// lookahead: only the model.
func judge(h *history.History, timeout time.Duration) verdicts {
	opts := DefaultOptions()
	ow := newOwners(0)
	ops := lockOps(h, ow)
	m := newLockModel(h.Info, int64(opts.Slack), ow)
	var v verdicts
	v.porcupine = porcupineVerdict(m, ops, timeout)
	ex := newSweep(m, opts.SearchBound)
	ex.runAll(ops)
	v.exact = sweepOutcome(ex)
	kept, dropped, m2 := prepareLock(h, int64(opts.Slack))
	v.sweep = sweepOutcome(runLockSweep(kept, dropped, m2, opts).s)
	if v.sweep == -1 {
		p, _ := checkLinearizable(newFacts(h), opts)
		v.property, v.engine = p.Status, p.Engine
	}
	return v
}

// fallbacks counts the histories on which the sweep exceeded its bound and
// porcupine decided instead.
var fallbacks atomicCounter

func requireAgree(t *testing.T, what string, h *history.History, v verdicts) bool {
	t.Helper()
	want := 1
	switch v.porcupine {
	case porcupine.Unknown:
		return false
	case porcupine.Illegal:
		want = 0
	}
	ok := (v.exact == want || v.exact == -1) && (v.sweep == want || v.sweep == -1)
	if v.sweep == -1 {
		// Beyond its bound the sweep hands over to porcupine: the
		// property must still be porcupine's verdict.
		fallbacks.add()
		ok = ok && v.property == [2]Status{Fail, Pass}[want]
	}
	if !ok {
		dumpHistory(t, h)
		require.Failf(t, "engines disagree", "%s: %s", what, v)
	}
	return true
}

// agreeCount is requireAgree counting: 1 decided when porcupine decided,
// and 1 illegal when it found the history illegal.
func agreeCount(t *testing.T, what string, h *history.History, v verdicts) (decided, illegal int) {
	t.Helper()
	if !requireAgree(t, what, h, v) {
		return 0, 0
	}
	if v.porcupine == porcupine.Illegal {
		return 1, 1
	}
	return 1, 0
}

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) add()       { c.n.Add(1) }
func (c *atomicCounter) get() int64 { return c.n.Load() }

func dumpHistory(t *testing.T, h *history.History) {
	t.Helper()
	t.Logf("info: %+v", h.Info)
	for _, o := range h.Ops {
		r := "never"
		if o.Return != history.Never {
			r = fmt.Sprintf("%.1f", float64(o.Return)/1e6)
		}
		t.Logf("  op %d client %d %s %s %s %s owner=%q %.1f-%s", o.OpID, o.Client, o.Op, o.Mode, o.Type, o.Reason, o.Owner, float64(o.Call)/1e6, r)
	}
}

// TestLockSweepAgreesWithPorcupine: on thousands of small histories, valid
// and not, the lock sweep (exact pass alone, and as Check runs it) gives
// porcupine's verdict wherever porcupine gives one.
func TestLockSweepAgreesWithPorcupine(t *testing.T) {
	t.Parallel()
	chaos, gen, mutated := 4000, 2000, 2000
	if testing.Short() || raceEnabled {
		chaos, gen, mutated = 800, 300, 300
	}
	t.Run("read-write", func(t *testing.T) { testReadWriteAgrees(t, chaos/2, gen/2, mutated/2) })
	t.Run("chaos", func(t *testing.T) {
		illegal, decided := 0, 0
		for seed := range uint64(chaos) {
			h, err := histgen.Chaos(seed, 3+int(seed%10)).History()
			require.NoError(t, err)
			v := judge(h, time.Second)
			d, il := agreeCount(t, fmt.Sprintf("chaos seed %d", seed), h, v)
			decided, illegal = decided+d, illegal+il
		}
		t.Logf("%d chaos histories, %d decided by porcupine, %d of them illegal; the sweep handed %d over to porcupine", chaos, decided, illegal, fallbacks.get())
		require.Greater(t, illegal, decided/10)
		require.Less(t, illegal, decided*9/10)
	})
	t.Run("generated", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		illegal, decided := 0, 0
		for i := range gen {
			cfg := histgen.Config{
				Seed:          uint64(i),
				Clients:       2 + rng.IntN(4),
				Ops:           20 + rng.IntN(50),
				Indeterminate: []float64{0, 0.05, 0.15}[rng.IntN(3)],
				Lease:         rng.IntN(2) == 0,
				TTL:           time.Duration(2+rng.IntN(6)) * time.Millisecond,
				Reentrant:     rng.IntN(4) == 0,
				Renews:        rng.IntN(6) == 0,
			}
			if rng.IntN(2) == 0 {
				cfg.DoubleHolders = 1 + rng.IntN(2)
				cfg.ForeignReleases = rng.IntN(2)
			}
			out := histgen.Generate(cfg)
			h, err := out.History()
			require.NoError(t, err)
			v := judge(h, time.Second)
			d, il := agreeCount(t, fmt.Sprintf("generated %d %+v", i, cfg), h, v)
			decided, illegal = decided+d, illegal+il
		}
		t.Logf("%d generated histories, %d decided by porcupine, %d of them illegal", gen, decided, illegal)
		require.Greater(t, illegal, decided/20)
	})
	t.Run("mutated", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		illegal, decided := 0, 0
		for i := range mutated {
			cfg := histgen.Config{
				Seed:          uint64(i),
				Clients:       2 + rng.IntN(3),
				Ops:           16 + rng.IntN(40),
				Indeterminate: []float64{0, 0.05, 0.15}[rng.IntN(3)],
				Lease:         rng.IntN(2) == 0,
				TTL:           time.Duration(2+rng.IntN(6)) * time.Millisecond,
				Reentrant:     rng.IntN(4) == 0,
			}
			evs := mutate(histgen.Generate(cfg).Events, rng)
			h, err := history.FromEvents(evs)
			require.NoError(t, err)
			v := judge(h, time.Second)
			d, il := agreeCount(t, fmt.Sprintf("mutated %d %+v", i, cfg), h, v)
			decided, illegal = decided+d, illegal+il
		}
		t.Logf("%d mutated histories, %d decided by porcupine, %d of them illegal", mutated, decided, illegal)
		require.Greater(t, illegal, decided/10)
	})
}

// testReadWriteAgrees: the same on read-write locks (readers share, a
// writer excludes): chaos histories with random modes, generated ones
// (valid, or with a writer granted over a reader or writer, or a reader
// granted while a writer holds), and generated then mutated ones (a mode
// flipped among the mutations).
func testReadWriteAgrees(t *testing.T, chaos, gen, mutated int) {
	count := func(what string, n int, h func(i int) (*history.History, string)) (decided, illegal int) {
		for i := range n {
			hist, name := h(i)
			v := judge(hist, time.Second)
			d, il := agreeCount(t, fmt.Sprintf("read-write %s %d %s", what, i, name), hist, v)
			decided, illegal = decided+d, illegal+il
		}
		t.Logf("%d read-write %s histories, %d decided by porcupine, %d of them illegal", n, what, decided, illegal)
		return decided, illegal
	}
	decided, illegal := count("chaos", chaos, func(i int) (*history.History, string) {
		h, err := histgen.ChaosRW(uint64(i), 3+i%10).History()
		require.NoError(t, err)
		return h, ""
	})
	require.Greater(t, illegal, decided/10)
	require.Less(t, illegal, decided*9/10)

	rng := rand.New(rand.NewPCG(9, 10))
	cfgOf := func(i int) histgen.Config {
		return histgen.Config{
			Seed:          uint64(i),
			Clients:       2 + rng.IntN(4),
			Ops:           20 + rng.IntN(50),
			ReadWrite:     true,
			Readers:       []float64{0.5, 0.67, 0.9}[rng.IntN(3)],
			Indeterminate: []float64{0, 0.05, 0.15}[rng.IntN(3)],
			Lease:         rng.IntN(2) == 0,
			TTL:           time.Duration(2+rng.IntN(6)) * time.Millisecond,
			Reentrant:     rng.IntN(4) == 0,
			Renews:        rng.IntN(6) == 0,
		}
	}
	injected := 0
	decided, illegal = count("generated", gen, func(i int) (*history.History, string) {
		cfg := cfgOf(i)
		if rng.IntN(2) == 0 {
			cfg.DoubleHolders = rng.IntN(2)
			cfg.ReadersUnderWriter = 1 + rng.IntN(2)
		}
		out := histgen.Generate(cfg)
		injected += len(out.Injected.DoubleHolders) + len(out.Injected.ReadersUnderWriter)
		h, err := out.History()
		require.NoError(t, err)
		return h, fmt.Sprintf("%+v", cfg)
	})
	require.Greater(t, injected, gen/4)
	require.Greater(t, illegal, decided/20)

	decided, illegal = count("mutated", mutated, func(i int) (*history.History, string) {
		cfg := cfgOf(i)
		h, err := history.FromEvents(mutate(histgen.Generate(cfg).Events, rng))
		require.NoError(t, err)
		return h, fmt.Sprintf("%+v", cfg)
	})
	require.Greater(t, illegal, decided/10)
}

// mutate changes one lock operation of a generated history: its outcome,
// its times, the owner it names or (read-write) an acquire's mode.
func mutate(evs []history.Event, rng *rand.Rand) []history.Event {
	evs = slices.Clone(evs)
	var dones []int
	for i, e := range evs {
		if e.Type.IsCompletion() && (e.Op == history.Acquire || e.Op == history.Release) {
			dones = append(dones, i)
		}
	}
	if len(dones) == 0 {
		return evs
	}
	i := dones[rng.IntN(len(dones))]
	e := &evs[i]
	kinds := 5
	if evs[0].Info != nil && evs[0].Info.ReadWrite {
		kinds = 6
	}
	switch rng.IntN(kinds) {
	case 5: // an acquire in the other mode
		for j := range evs {
			if evs[j].Type == history.Invoke && evs[j].OpID == e.OpID && e.Op == history.Acquire {
				if evs[j].Mode == history.ModeRead {
					evs[j].Mode = history.ModeWrite
				} else {
					evs[j].Mode = history.ModeRead
				}
			}
		}
	case 0: // flip the outcome
		switch {
		case e.Type == history.OK && e.Op == history.Acquire:
			e.Type, e.Reason, e.Owner = history.Fail, history.ReasonHeld, ""
		case e.Type == history.OK:
			e.Type, e.Reason = history.Fail, history.ReasonNotOwner
		case e.Op == history.Acquire:
			e.Type, e.Reason, e.Owner = history.OK, "", fmt.Sprintf("m%d", i)
		default:
			e.Type, e.Reason = history.OK, ""
		}
	case 1: // lose the answer
		e.Type, e.Reason, e.Error = history.Info, "", "timeout"
	case 2, 3: // move the completion later (keeping the file in time order)
		d := int64(1+rng.IntN(4)) * 500_000
		e.Time += d
		for j := i + 1; j < len(evs) && evs[j].Time < e.Time; j++ {
			evs[j-1], evs[j] = evs[j], evs[j-1]
			i = j
			e = &evs[i]
		}
	default: // a release naming another owner
		for j := range evs {
			if evs[j].Type == history.Invoke && evs[j].OpID == e.OpID && e.Op == history.Release {
				evs[j].Owner = "c1-1"
			}
		}
	}
	for k := range evs {
		evs[k].Seq = int64(k)
	}
	return evs
}

// TestWitness: a non-linearizable verdict names a few operations that alone
// cannot all be placed (porcupine agrees), the first that cannot among them.
func TestWitness(t *testing.T) {
	n := 300
	if testing.Short() || raceEnabled {
		n = 60
	}
	sizes := map[int]int{}
	for seed := range uint64(n) {
		out := histgen.Generate(histgen.Config{Seed: seed, Clients: 2 + int(seed%8), Ops: 2000, Indeterminate: 0.02,
			Lease: seed%3 == 0, DoubleHolders: 1, ForeignReleases: int(seed % 2)})
		h, err := out.History()
		require.NoError(t, err)
		p, as := checkLinearizable(newFacts(h), DefaultOptions())
		if p.Status != Fail {
			continue
		}
		require.Len(t, as, 1)
		a := as[0]
		sizes[len(a.Ops)]++
		require.LessOrEqual(t, len(a.Ops), 6, "seed %d: %s", seed, a.Explanation)
		require.Contains(t, a.Explanation, "cannot be placed because the lock was")
		// The witness alone is illegal for porcupine too.
		ids := map[int64]bool{}
		for _, id := range a.Ops {
			ids[id] = true
		}
		var evs []history.Event
		for _, e := range out.Events {
			if e.Type == history.Run || e.Type == history.RunEnd || ids[e.OpID] {
				evs = append(evs, e)
			}
		}
		sub, err := history.FromEvents(evs)
		require.NoError(t, err)
		ow := newOwners(0)
		ops := lockOps(sub, ow)
		m := newLockModel(sub.Info, int64(DefaultOptions().Slack), ow)
		// Owner knowledge comes from the whole history.
		full := newOwners(0)
		lockOps(h, full)
		for name, id := range ow.ids {
			ow.known[id] = full.isKnown(full.ids[name])
		}
		require.Equal(t, porcupine.Illegal, porcupineVerdict(m, ops, time.Second), "seed %d: witness %v", seed, a.Ops)
	}
	t.Logf("witness sizes (operations: histories): %v", sizes)
	require.NotEmpty(t, sizes)
}

// FuzzLockSweep: on any small history decoded from the input, the lock
// sweep gives porcupine's verdict wherever porcupine gives one. The seed
// corpus runs in the normal test run.
//
// rw makes the history a read-write lock's (histgen.FromBytesRW).
func FuzzLockSweep(f *testing.F) {
	for seed := range uint64(64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		data := make([]byte, 1+4*(2+seed%9))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		f.Add(data, seed%2 == 1)
	}
	f.Fuzz(func(t *testing.T, data []byte, rw bool) {
		if len(data) > 1+4*16 {
			data = data[:1+4*16] // keep porcupine's search small
		}
		from := histgen.FromBytes
		if rw {
			from = histgen.FromBytesRW
		}
		h, err := from(data).History()
		if err != nil {
			t.Skip(err)
		}
		requireAgree(t, "fuzz", h, judge(h, time.Second))
	})
}

// The witness names the holder that stood in the blocker's way, not an
// older hold that the witness's own cut left unreleased.
func TestWitnessNamesTheHolderInTheWay(t *testing.T) {
	b := newHB()
	b.info.Lease, b.info.TTLMillis = true, 2000
	b.acq(4, 436, 439, "d")
	b.rel(4, 914, 917, "d", history.OK, "d")
	c5 := b.acq(5, 911, 919, "e")
	c1 := b.acq(1, 933, 946, "a") // while client 5's lease is surely valid
	b.rel(5, 1100, 1101, "e", history.OK, "e")
	r := Check(b.build(t), DefaultOptions())
	var got []int64
	for _, a := range r.Anomalies {
		if a.Kind == KindNonLinearizable {
			got = a.Ops
			require.Equal(t, []int{1, 5}, a.Clients, a.Explanation)
		}
	}
	require.ElementsMatch(t, []int64{c5, c1}, got)
}

// Read-write histories on which the sweep once disagreed with porcupine
// (found by differential runs with other seeds), each with porcupine's
// verdict.
func TestLockSweepReadWriteCases(t *testing.T) {
	read := func(b *hb, c int, call, ret float64, owner string) {
		b.o(c, history.Acquire, call, ret, history.OK, func(i, d *history.Event) { i.Mode, d.Owner = history.ModeRead, owner })
	}
	cases := []struct {
		name  string
		build func(b *hb)
		legal bool
	}{
		{"a lost writer takes the lock before a reader joins, which would keep it out (no lease)", func(b *hb) {
			read(b, 5, 0.398830, 0.794914, "c5-1")
			read(b, 4, 0.487819, 0.955198, "c4-1")
			read(b, 1, 0.549999, 1.166239, "c1-1")
			b.o(3, history.Acquire, 0.746639, 7.037125, history.Info, func(i, d *history.Event) { i.Mode, d.Error = history.ModeWrite, "timeout" })
			b.rel(5, 1.986170, 2.545299, "c5-1", history.OK, "c5-1")
			b.rel(1, 2.157557, 2.497128, "c1-1", history.OK, "c1-1")
			b.o(4, history.Release, 2.219160, 8.220807, history.Info, func(i, d *history.Event) { i.Owner, d.Error = "c4-1", "timeout" })
			read(b, 1, 6.600095, 7.351967, "c1-5")
			b.rel(3, 7.152845, 7.858009, "c3-1", history.OK, "c3-1")
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.info.ReadWrite, b.info.Clients = true, 5
			tc.build(b)
			h := b.build(t)
			v := judge(h, 10*time.Second)
			require.Equal(t, map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[tc.legal], v.porcupine)
			requireAgree(t, tc.name, h, v)
		})
	}
}
