package checker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

// feed runs an Incremental over events and returns the final property,
// the anomalies reported and the time of the event that reported them.
func feed(t *testing.T, events []history.Event, opts Options) (Property, []Anomaly, int64) {
	t.Helper()
	in := NewIncremental(*events[0].Info, opts)
	var found []Anomaly
	at := int64(-1)
	for _, e := range events[1:] {
		if as := in.Add(e); len(as) > 0 {
			require.Empty(t, found, "reported twice")
			found, at = as, e.Time
		}
	}
	p, as := in.Result()
	require.Equal(t, found, as)
	return p, found, at
}

// TestIncrementalAgrees: fed event by event, the incremental checker ends
// with porcupine's verdict on thousands of small histories.
func TestIncrementalAgrees(t *testing.T) {
	n := 1500
	if testing.Short() || raceEnabled {
		n = 300
	}
	rng := rand.New(rand.NewPCG(7, 8))
	decided := 0
	for i := range n {
		var out histgen.Output
		switch {
		case i%4 == 2:
			out = histgen.ChaosRW(uint64(i), 3+i%10)
		case i%2 == 0:
			out = histgen.Chaos(uint64(i), 3+i%10)
		case i%4 == 3:
			out = histgen.Generate(histgen.Config{
				Seed: uint64(i), Clients: 2 + rng.IntN(3), Ops: 20 + rng.IntN(40), ReadWrite: true,
				Indeterminate: []float64{0, 0.1}[rng.IntN(2)], Lease: rng.IntN(2) == 0,
				TTL: time.Duration(2+rng.IntN(6)) * time.Millisecond, DoubleHolders: rng.IntN(2), ReadersUnderWriter: rng.IntN(2),
			})
		default:
			out = histgen.Generate(histgen.Config{
				Seed: uint64(i), Clients: 2 + rng.IntN(3), Ops: 20 + rng.IntN(40),
				Indeterminate: []float64{0, 0.1}[rng.IntN(2)], Lease: rng.IntN(2) == 0,
				TTL: time.Duration(2+rng.IntN(6)) * time.Millisecond, DoubleHolders: rng.IntN(2),
			})
		}
		h, err := out.History()
		require.NoError(t, err)
		v := judge(h, 300*time.Millisecond)
		if v.porcupine == porcupine.Unknown {
			continue
		}
		decided++
		p, found, _ := feed(t, out.Events, DefaultOptions())
		want := Pass
		if v.porcupine == porcupine.Illegal {
			want = Fail
		}
		if p.Status != want {
			dumpHistory(t, h)
			require.Failf(t, "incremental disagrees", "history %d: incremental %s (%s), %s", i, p.Status, p.Detail, v)
		}
		if want == Fail {
			require.Len(t, found, 1)
		}
	}
	require.Greater(t, decided, n*9/10)
}

// TestIncrementalReportsEarly: the violation is reported while the run goes
// on, as soon as the operations around it have answered, and names the same
// operation as the batch check.
func TestIncrementalReportsEarly(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			out := histgen.Generate(histgen.Config{Seed: seed, Clients: 5, Ops: 4000, Indeterminate: 0.01, DoubleHolders: 1})
			require.Len(t, out.Injected.DoubleHolders, 1)
			h, err := out.History()
			require.NoError(t, err)
			batch := Check(h, DefaultOptions())
			var want *Anomaly
			for k := range batch.Anomalies {
				if batch.Anomalies[k].Kind == KindNonLinearizable {
					want = &batch.Anomalies[k]
				}
			}
			require.NotNil(t, want, batch.Why)

			p, found, at := feed(t, out.Events, DefaultOptions())
			require.Equal(t, Fail, p.Status, p.Detail)
			require.Len(t, found, 1)
			require.Equal(t, want.Ops[0], found[0].Ops[0], "the same first operation that cannot be placed")
			// Reported as soon as the blocker returned and every operation
			// invoked before then answered (ops last ~1 ms here), long
			// before the end of the run.
			require.GreaterOrEqual(t, at, found[0].End)
			require.Less(t, at, found[0].End+int64(20*time.Millisecond))
			require.Less(t, at, h.End)
		})
	}
}

func TestIncrementalRunningOperationHoldsTheReport(t *testing.T) {
	b := newHB()
	b.acq(1, 0, 1, "a")
	b.acq(2, 2, 3, "b")                            // a double holder: certain at 3 ms...
	b.o(3, history.Acquire, 2.5, 50, history.Fail, // ...unless this running acquire could matter
		func(_, d *history.Event) { d.Reason = history.ReasonError })
	b.rel(1, 60, 61, "a", history.OK, "a")
	h := b.build(t)
	_, found, at := feed(t, h.Events, DefaultOptions())
	require.Len(t, found, 1)
	require.Equal(t, ms(50), at, "reported when the running acquire answered")
	require.Contains(t, found[0].Explanation, "client 2's acquire (ok, 2.0 ms–3.0 ms) cannot be placed because the lock was held by client 1 (a)")
}

func TestIncrementalClientExit(t *testing.T) {
	b := newHB()
	b.clientLife(1, 0, 5)
	b.acq(1, 0, 1, "a")
	b.o(1, history.Release, 2, -1, history.Info, nil) // never answered: the process died
	b.acq(2, 10, 11, "b")                             // fine: the release may have taken effect
	b.rel(2, 12, 13, "b", history.OK, "b")
	h := b.build(t)
	p, found, _ := feed(t, h.Events, DefaultOptions())
	require.Empty(t, found)
	require.Equal(t, Pass, p.Status, p.Detail)
}
