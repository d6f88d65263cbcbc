package nemesis

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
)

// A crash round strikes the scheme's gaps before the grant, in a seeded
// order among them; a pause round keeps the seeded order of every point.
func TestClientFaultOrder(t *testing.T) {
	points := []string{locks.PointAfterGrant, locks.PointAfterSetNX, locks.PointAfterCheck, locks.PointAfterGet}
	sawGrantFirst := false
	for seed := uint64(1); seed <= 30; seed++ {
		crash := (&clientFault{r: rand.New(rand.NewPCG(seed, 0)), crash: true}).order(points)
		require.ElementsMatch(t, points, crash)
		require.Equal(t, locks.PointAfterGrant, crash[len(crash)-1], "seed %d: a crash strikes the gaps first", seed)

		pause := (&clientFault{r: rand.New(rand.NewPCG(seed, 0))}).order(points)
		require.ElementsMatch(t, points, pause)
		sawGrantFirst = sawGrantFirst || pause[0] == locks.PointAfterGrant
		// The same seed draws the same order, and the crash round is that
		// order with after-grant moved to the end.
		require.Equal(t, pause, (&clientFault{r: rand.New(rand.NewPCG(seed, 0))}).order(points))
		var gaps []string
		for _, p := range pause {
			if p != locks.PointAfterGrant {
				gaps = append(gaps, p)
			}
		}
		require.Equal(t, append(gaps, locks.PointAfterGrant), crash, "seed %d", seed)
	}
	require.True(t, sawGrantFirst, "a pause round may strike after-grant first")
}

// On a read-write lock a pause strikes a writer's grant; a reader's only
// once no writer came for readerAfter TTLs past the time it was due.
func TestHurtsShared(t *testing.T) {
	ttl := time.Second
	for _, tc := range []struct {
		mode    string
		overdue time.Duration
		want    bool
	}{
		{history.ModeWrite, 0, true},
		{history.ModeWrite, 10 * time.Second, true},
		{history.ModeRead, 0, false},
		{history.ModeRead, readerAfter * ttl, false},
		{history.ModeRead, readerAfter*ttl + time.Millisecond, true},
	} {
		require.Equal(t, tc.want, hurtsShared(tc.mode, tc.overdue, ttl), "%s overdue %s", tc.mode, tc.overdue)
	}
}
