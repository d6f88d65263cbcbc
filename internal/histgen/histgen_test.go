package histgen

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestGenerate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"defaults", Config{Seed: 1}},
		{"lease with lost answers", Config{Seed: 2, Lease: true, TTL: 20 * time.Millisecond, Indeterminate: 0.1, Ops: 2000}},
		{"resource and fencing", Config{Seed: 3, Fence: true, Clients: 8}},
		{"violations", Config{Seed: 4, Resource: true, DoubleHolders: 3, ForeignReleases: 2, LostUpdates: 2, Ops: 3000}},
		{"one client", Config{Seed: 5, Clients: 1, Ops: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := Generate(tt.cfg)
			h, err := out.History()
			require.NoError(t, err)
			require.False(t, h.Truncated)
			ops := tt.cfg.Ops
			if ops == 0 {
				ops = 1000
			}
			require.GreaterOrEqual(t, len(h.Ops), ops)
			require.Less(t, len(h.Ops), ops+4*max(tt.cfg.Clients, 5))

			// Events are in order, every operation completed, and clients
			// never have two operations in flight.
			last := int64(0)
			for i, e := range out.Events {
				require.Equal(t, int64(i), e.Seq)
				require.GreaterOrEqual(t, e.Time, last)
				last = e.Time
			}
			busyUntil := map[int]int64{}
			for _, o := range h.Ops {
				require.NotEqual(t, history.Never, o.Completed, "op %d", o.OpID)
				require.GreaterOrEqual(t, o.Call, busyUntil[o.Client], "client %d overlaps itself", o.Client)
				busyUntil[o.Client] = o.Completed
				if o.Type == history.Info {
					require.Contains(t, []history.Op{history.Acquire, history.Release}, o.Op)
				}
			}
			require.Equal(t, tt.cfg.Lease, h.Info.Lease)
			if tt.cfg.Lease {
				require.Equal(t, tt.cfg.TTL.Milliseconds(), h.Info.TTLMillis)
			}
		})
	}
}

func TestGenerateDeterministic(t *testing.T) {
	cfg := Config{Seed: 7, Clients: 4, Ops: 500, Indeterminate: 0.1, Resource: true, DoubleHolders: 1}
	a, b := Generate(cfg), Generate(cfg)
	require.Equal(t, a, b)
	cfg.Seed = 8
	require.NotEqual(t, a.Events, Generate(cfg).Events)
}

func TestInjected(t *testing.T) {
	out := Generate(Config{Seed: 11, Clients: 4, Ops: 5000, Resource: true, DoubleHolders: 3, ForeignReleases: 2, LostUpdates: 2})
	require.Len(t, out.Injected.DoubleHolders, 3)
	require.Len(t, out.Injected.ForeignReleases, 2)
	require.Len(t, out.Injected.LostUpdates, 2)
	require.Equal(t, 7, out.Injected.Total())
	h, err := out.History()
	require.NoError(t, err)
	byID := map[int64]history.Operation{}
	for _, o := range h.Ops {
		byID[o.OpID] = o
	}
	for _, id := range out.Injected.DoubleHolders {
		o := byID[id]
		require.Equal(t, history.Acquire, o.Op)
		require.Equal(t, history.OK, o.Type)
	}
	for _, id := range out.Injected.ForeignReleases {
		o := byID[id]
		require.Equal(t, history.Release, o.Op)
		require.Equal(t, history.OK, o.Type)
		require.NotEqual(t, o.Owner, o.Removed)
	}
	for _, id := range out.Injected.LostUpdates {
		o := byID[id]
		require.Equal(t, history.Write, o.Op)
		require.NotEqual(t, *o.Value-1, *o.Prev)
	}
}

func TestValidHistoryIsClean(t *testing.T) {
	out := Generate(Config{Seed: 12, Clients: 5, Ops: 5000, Resource: true, Tokens: true, Indeterminate: 0.05})
	h, err := out.History()
	require.NoError(t, err)
	require.Zero(t, out.Injected.Total())
	// Every accepted write increments what was there; tokens never go back.
	var maxTok int64
	for _, o := range h.Ops {
		if o.Op != history.Write || o.Type != history.OK {
			continue
		}
		require.Equal(t, *o.Value-1, *o.Prev)
		require.GreaterOrEqual(t, *o.Token, maxTok)
		maxTok = *o.Token
	}
}

func TestReentrant(t *testing.T) {
	out := Generate(Config{Seed: 13, Clients: 3, Ops: 600, Reentrant: true, Resource: true, Lease: true})
	h, err := out.History()
	require.NoError(t, err)
	require.True(t, h.Info.Reentrant)
	// Every hold: acquire ok, nested acquire ok with the same owner, read,
	// write, inner release (nothing removed), outer release (removed).
	nested, inner := 0, 0
	last := map[int]history.Operation{}
	for _, o := range h.Ops {
		prev, ok := last[o.Client]
		if o.Op == history.Acquire && o.Type == history.OK && ok && prev.Op == history.Acquire && prev.Type == history.OK {
			require.Equal(t, prev.Owner, o.Owner)
			nested++
		}
		if o.Op == history.Release && o.Type == history.OK && o.Removed == "" {
			inner++
		}
		last[o.Client] = o
	}
	require.Positive(t, nested)
	require.Equal(t, nested, inner)
}

func TestRenewsAndValidity(t *testing.T) {
	out := Generate(Config{Seed: 14, Clients: 3, Ops: 600, Lease: true, TTL: 2 * time.Millisecond, Hold: 10 * time.Millisecond,
		Renews: true, ChecksValidity: true, Resource: true})
	h, err := out.History()
	require.NoError(t, err)
	require.True(t, h.Info.Renews)
	require.True(t, h.Info.ChecksValidity)
	long := 0
	for _, o := range h.Ops {
		if o.Op == history.Acquire && o.Type == history.OK {
			require.NotEqual(t, history.Never, o.ValidUntil, "acquires carry their validity")
		}
	}
	holds := map[int]int64{}
	for _, o := range h.Ops {
		switch {
		case o.Op == history.Acquire && o.Type == history.OK:
			holds[o.Client] = o.Return
		case o.Op == history.Release && holds[o.Client] > 0:
			if o.Call-holds[o.Client] > 2*int64(time.Millisecond) {
				long++ // renewed: held past the TTL
			}
			holds[o.Client] = 0
		}
	}
	require.Positive(t, long)

	// Slow round trips on a 1 ms lease: uses come after the validity, and
	// the clients decline them.
	out = Generate(Config{Seed: 15, Clients: 3, Ops: 600, Lease: true, TTL: time.Millisecond, RoundTrip: 4 * time.Millisecond,
		ChecksValidity: true, Resource: true})
	h, err = out.History()
	require.NoError(t, err)
	declined := 0
	for _, o := range h.Ops {
		if o.Type == history.Fail && o.Reason == history.ReasonNotHeld {
			declined++
			require.Greater(t, o.Return, int64(0))
		}
	}
	require.Positive(t, declined, "uses past the validity are declined")
}

func TestFromBytes(t *testing.T) {
	for seed := range uint64(200) {
		out := Chaos(seed, int(seed%20))
		h, err := out.History()
		require.NoError(t, err)
		require.False(t, h.Truncated)
		// Invocations in time order, one operation at a time per client.
		busy := map[int]int64{}
		for i, o := range h.Ops {
			if i > 0 {
				require.GreaterOrEqual(t, o.Call, h.Ops[i-1].Call)
			}
			require.GreaterOrEqual(t, o.Call, busy[o.Client])
			busy[o.Client] = o.Call
			if o.Completed != history.Never {
				busy[o.Client] = o.Completed
			}
		}
	}
	require.Equal(t, FromBytes([]byte{1, 2, 3, 4, 5}), FromBytes([]byte{1, 2, 3, 4, 5}))
	_, err := FromBytes(nil).History()
	require.NoError(t, err)
}

func TestReadWrite(t *testing.T) {
	// Valid: every acquire has a mode, readers overlap, and no writer's
	// hold (from the acquire's return to its release's invocation)
	// overlaps another client's hold.
	out := Generate(Config{Seed: 6, Clients: 8, Ops: 4000, ReadWrite: true})
	h, err := out.History()
	require.NoError(t, err)
	require.True(t, h.Info.ReadWrite)
	require.Zero(t, out.Injected.Total())
	type hold struct {
		client     int
		read       bool
		start, end int64
	}
	var holds []hold
	open := map[int]*hold{}
	reads, writes := 0, 0
	for _, o := range h.Ops {
		switch {
		case o.Op == history.Acquire:
			require.Contains(t, []string{history.ModeRead, history.ModeWrite}, o.Mode)
			if o.Mode == history.ModeRead {
				reads++
			} else {
				writes++
			}
			if o.Type == history.OK {
				open[o.Client] = &hold{client: o.Client, read: o.Mode == history.ModeRead, start: o.Return}
			}
		case o.Op == history.Release && open[o.Client] != nil:
			hd := open[o.Client]
			hd.end = o.Call
			holds = append(holds, *hd)
			delete(open, o.Client)
		}
	}
	require.Greater(t, reads, writes)
	overlappingReaders := 0
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if a.client == b.client || a.end <= b.start || b.end <= a.start {
				continue
			}
			require.True(t, a.read && b.read, "a writer overlaps another hold: %+v %+v", a, b)
			overlappingReaders++
		}
	}
	require.Positive(t, overlappingReaders)

	// Injected: readers granted under a writer, writers over holders.
	out = Generate(Config{Seed: 7, Clients: 8, Ops: 4000, ReadWrite: true, ReadersUnderWriter: 2, DoubleHolders: 2})
	require.Len(t, out.Injected.ReadersUnderWriter, 2)
	require.Len(t, out.Injected.DoubleHolders, 2)
	h, err = out.History()
	require.NoError(t, err)
	for _, id := range out.Injected.ReadersUnderWriter {
		for _, o := range h.Ops {
			if o.OpID == id {
				require.Equal(t, history.ModeRead, o.Mode)
				require.Equal(t, history.OK, o.Type)
			}
		}
	}

	// Without ReadWrite no event carries a mode.
	plain := Generate(Config{Seed: 6, Clients: 8, Ops: 500})
	for _, e := range plain.Events {
		require.Empty(t, e.Mode)
	}
}
