package checker

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

// releaseAheadScan is releaseAhead as it was before the lookahead indexed
// releases by owner: a scan of every successful release of st's client.
func releaseAheadScan(s *sweep, st lockState, dl int64) bool {
	var rs []int32
	for k := range s.ops {
		if r := &s.ops[k]; r.kind == linRelease && r.out == outOK && r.client == st.client {
			rs = append(rs, int32(k))
		}
	}
	for _, k := range rs {
		r := &s.ops[k]
		if r.ret >= s.t && r.call <= dl && s.m.owns(st, r) {
			return true
		}
	}
	return false
}

// TestReleaseAheadIndexed: the indexed lookahead answers releaseAhead as a
// scan of every release of the holder's client does, for holders of every
// kind of owner (none, a lost acquire's fresh key, known, unknown) at
// random times and deadlines, on generated histories with lost answers
// (open for an op timeout or not), reentrant, renewed and with foreign
// owners.
func TestReleaseAheadIndexed(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	cfgs := []histgen.Config{
		lostShape(1, 2000, 10, 0.05, 0),
		lostShape(2, 2000, 50, 0.05, 2),
		{Seed: 3, Clients: 5, Ops: 2000, Indeterminate: 0.1, Lease: true, TTL: 50 * time.Millisecond},
		{Seed: 4, Clients: 5, Ops: 2000, Indeterminate: 0.1, Reentrant: true},
		{Seed: 5, Clients: 8, Ops: 2000, Indeterminate: 0.1, Lease: true, Renews: true, TTL: 50 * time.Millisecond, ForeignReleases: 3},
	}
	var hs []*history.History
	for _, cfg := range cfgs {
		h, err := histgen.Generate(cfg).History()
		require.NoError(t, err)
		hs = append(hs, h)
	}
	// Chaos histories: releases naming no owner, or owners nobody acquired.
	for seed := range uint64(20) {
		h, err := histgen.Chaos(seed, 300).History()
		require.NoError(t, err)
		hs = append(hs, h)
	}
	asked, yes := 0, 0
	for _, h := range hs {
		clients := h.Info.Clients
		if clients == 0 {
			clients = 8
		}
		ops, _, m := prepareLock(h, int64(5*time.Millisecond))
		s := newSweep(m, 4096)
		s.ops, s.look = ops, newLookahead(ops, m.ow)
		var owners []int32
		for _, op := range ops {
			owners = append(owners, op.owner)
		}
		sort.Slice(owners, func(i, j int) bool { return owners[i] < owners[j] })
		if len(ops) == 0 {
			continue
		}
		end := ops[len(ops)-1].call
		for range 1000 {
			st := lockState{client: int32(1 + rng.IntN(clients))}
			switch rng.IntN(4) {
			case 0:
				st.owner = 0
			case 1:
				st.owner = ownerFresh
			case 2:
				st.owner = owners[rng.IntN(len(owners))]
			default:
				st.owner = int32(1 + rng.IntN(len(owners)+10))
			}
			s.t = rng.Int64N(end + 1)
			dl := history.Never
			if rng.IntN(2) == 0 {
				dl = s.t + rng.Int64N(int64(200*time.Millisecond))
			}
			want := releaseAheadScan(s, st, dl)
			require.Equal(t, want, s.releaseAhead(st, dl), "%s: state %+v t=%d dl=%d", h.Info.Command, st, s.t, dl)
			asked++
			if want {
				yes++
			}
		}
	}
	// Both answers must have been asked for the comparison to mean anything.
	require.Greater(t, yes, asked/10)
	require.Less(t, yes, asked-asked/10)
}
