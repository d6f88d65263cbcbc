package checker

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

// acqMode adds a successful acquire in mode.
func (b *hb) acqMode(c int, call, ret float64, owner, mode string) int64 {
	return b.o(c, history.Acquire, call, ret, history.OK, func(i, d *history.Event) { i.Mode, d.Owner = mode, owner })
}

func TestReadWrite(t *testing.T) {
	cases := []struct {
		name          string
		build         func(b *hb)
		excl, share   Status
		exclAnomalies int
	}{
		{name: "readers overlap, writers alone", excl: Pass, share: Pass, build: func(b *hb) {
			b.acqMode(1, 0, 1, "r1", history.ModeRead)
			b.acqMode(2, 2, 3, "r2", history.ModeRead)
			b.rel(1, 10, 11, "r1", history.OK, "")
			b.rel(2, 12, 13, "r2", history.OK, "")
			b.acqMode(3, 14, 15, "w3", history.ModeWrite)
			b.rel(3, 20, 21, "w3", history.OK, "")
		}},
		{name: "a writer overlapping a reader", excl: Fail, share: Skipped, exclAnomalies: 1, build: func(b *hb) {
			b.acqMode(1, 0, 1, "r1", history.ModeRead)
			b.acqMode(3, 2, 3, "w3", history.ModeWrite)
			b.rel(1, 10, 11, "r1", history.OK, "")
			b.rel(3, 12, 13, "w3", history.OK, "")
		}},
		{name: "a reader refused while only a reader held it", excl: Pass, share: Fail, build: func(b *hb) {
			b.acqMode(1, 0, 1, "r1", history.ModeRead)
			b.o(2, history.Acquire, 2, 3, history.Fail, func(i, d *history.Event) { i.Mode, d.Reason = history.ModeRead, history.ReasonHeld })
			b.rel(1, 10, 11, "r1", history.OK, "")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			b.info.ReadWrite = true
			tc.build(b)
			h := b.build(t)
			excl, share, as := ReadWriteStats(h)
			require.Equal(t, tc.excl, excl.Status, excl.Detail)
			require.Equal(t, tc.share, share.Status, share.Detail)
			require.Len(t, as, tc.exclAnomalies)
			res := Check(h, DefaultOptions())
			names := map[string]bool{}
			for _, p := range res.Properties {
				names[p.Name] = true
			}
			require.True(t, names[string(KindRWExclusion)] && names[KindReadersShare], "both properties reported")
		})
	}
	// Not a read-write run: nothing added.
	b := newHB()
	b.acq(1, 0, 1, "a")
	b.rel(1, 2, 3, "a", history.OK, "a")
	for _, p := range Check(b.build(t), DefaultOptions()).Properties {
		require.NotEqual(t, KindRWExclusion, p.Name)
	}
}

func TestSessionCause(t *testing.T) {
	b := newHB()
	b.info.TTLMillis, b.info.Renews, b.info.Lease = 900, true, true
	b.acq(1, 0, 1, "a")
	b.add(2, history.Event{Type: history.FaultStart, Fault: "pause", FaultID: 1, Target: "client 1", Client: 1})
	b.add(2000, history.Event{Type: history.FaultEnd, Fault: "pause", FaultID: 1, Target: "client 1", Client: 1})
	b.acq(2, 700, 701, "b") // 2/3 TTL = 600 ms after the pause began
	b.acq(3, 300, 301, "c") // too early for an expiry
	h := b.build(t)
	holds := Holds(h)
	byOwner := map[string]*Hold{}
	for k := range holds {
		byOwner[holds[k].Owner] = &holds[k]
	}
	require.Equal(t, CauseSessionExpired, SessionCause(h, byOwner["a"], byOwner["b"]))
	require.Equal(t, CauseSessionAlive, SessionCause(h, byOwner["a"], byOwner["c"]))
}

// The reader sets a sweep interns are compacted to those its open
// configurations use: compacting whenever the table has grown four times
// the size of what is open changes nothing in what the sweep does.
func TestReaderSetsCompaction(t *testing.T) {
	t.Parallel()
	for seed := range uint64(12) {
		cfg := histgen.Config{Seed: seed, Clients: 3 + int(seed%3)*10, Ops: 3000, ReadWrite: true,
			Lease: seed%2 == 0, Indeterminate: 0.02 * float64(seed%3), Reentrant: seed%4 >= 2}
		if seed%3 == 1 {
			cfg.DoubleHolders, cfg.ReadersUnderWriter = 1, 1
		}
		h, err := histgen.Generate(cfg).History()
		require.NoError(t, err)
		ops, _, m := prepareLock(h, int64(DefaultOptions().Slack))
		run := func(minCompact int) *sweep {
			s := newSweep(m, DefaultOptions().SearchBound)
			s.compactAt, s.minCompact = minCompact, minCompact
			s.runAll(slices.Clone(ops))
			return s
		}
		a, b := run(minCompact), run(1)
		require.Equal(t, a.failed, b.failed, "seed %d", seed)
		require.Equal(t, a.blocker, b.blocker, "seed %d", seed)
		require.Equal(t, a.stats, b.stats, "seed %d", seed)
		b.compactSets()
		require.LessOrEqual(t, b.m.rs.size(), len(b.frontier)+1, "seed %d", seed)
		// Every set is in order, and its hash, found step by step, and
		// its span are those of its readers.
		for _, s := range []*sweep{a, b} {
			for id := int32(1); int(id) < s.m.rs.size(); id++ {
				rs, h := s.m.rs.getHashed(id)
				require.True(t, slices.IsSortedFunc(rs, cmpReader), "seed %d", seed)
				require.Equal(t, hashReaders(rs), h, "seed %d", seed)
				require.Equal(t, spanOf(rs), s.m.rs.spanOf(id), "seed %d", seed)
			}
		}
	}
}
