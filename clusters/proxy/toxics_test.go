package proxy

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// locktest's toxics read their attributes as Toxiproxy hands them over
// (JSON), seed included, and the same seed draws the same delays: --seed
// fixes the jitter too. Every delay stays within latency +/- jitter.
func TestSeededToxics(t *testing.T) {
	attrs, err := Toxic{Kind: Delay, Latency: 100 * time.Millisecond, Jitter: 20 * time.Millisecond}.attributes(7)
	require.NoError(t, err)
	body, err := json.Marshal(attrs)
	require.NoError(t, err)
	draws := func() []time.Duration {
		var d delayToxic
		require.NoError(t, json.Unmarshal(body, &d))
		require.Equal(t, uint64(7), d.Seed)
		r := d.NewState().(*rand.Rand)
		var out []time.Duration
		for range 50 {
			v := d.draw(r)
			require.GreaterOrEqual(t, v, 80*time.Millisecond)
			require.LessOrEqual(t, v, 120*time.Millisecond)
			out = append(out, v)
		}
		return out
	}
	first := draws()
	require.Equal(t, first, draws())
	require.NotEqual(t, first[0], first[1], "jittered")

	attrs, err = Toxic{Kind: Loss, Share: 0.25}.attributes(9)
	require.NoError(t, err)
	body, err = json.Marshal(attrs)
	require.NoError(t, err)
	var l lossToxic
	require.NoError(t, json.Unmarshal(body, &l))
	require.Equal(t, uint64(9), l.Seed)
	require.InDelta(t, 0.25, l.Share, 1e-9)
	require.Equal(t, initialRTO.Milliseconds(), l.RTOMs)

	for _, bad := range []Toxic{{Kind: Loss, Share: 1}, {Kind: Bandwidth}, {Kind: "meteor"}} {
		_, err := bad.attributes(1)
		require.Error(t, err, "%+v", bad)
	}
}
