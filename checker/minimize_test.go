package checker

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMinimize: on generated predicates, the result still shows it, and
// removing any one unit of it does not (1-minimal); a predicate that needs
// a few scattered units of many gets exactly those, in far fewer tests
// than units.
func TestMinimize(t *testing.T) {
	all := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	t.Run("needs a few of many", func(t *testing.T) {
		need := []int32{3, 517, 518, 9000}
		shows := func(kept []int32) bool {
			for _, u := range need {
				if _, ok := slices.BinarySearch(kept, u); !ok {
					return false
				}
			}
			return true
		}
		r := minimize(all(10_000), shows, time.Now().Add(time.Minute), nil)
		require.Equal(t, need, r.kept)
		require.True(t, r.minimal)
		require.Less(t, r.tests, 400, "ddmin narrows by halves, not one unit at a time")
	})
	// Not monotone: any 2 of a group of 3, or unit 7 alone with 8 absent.
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range 50 {
		n := 5 + rng.IntN(60)
		group := []int32{int32(rng.IntN(n)), int32(rng.IntN(n)), int32(rng.IntN(n))}
		shows := func(kept []int32) bool {
			c := 0
			for _, g := range slices.Compact(slices.Sorted(slices.Values(group))) {
				if slices.Contains(kept, g) {
					c++
				}
			}
			odd := slices.Contains(kept, 7) && !slices.Contains(kept, 8) && k%2 == 0
			return c >= 2 || odd
		}
		if !shows(all(n)) {
			continue
		}
		r := minimize(all(n), shows, time.Now().Add(time.Minute), nil)
		require.True(t, r.minimal)
		require.True(t, shows(r.kept), "the result shows it")
		for i := range r.kept {
			require.False(t, shows(slices.Concat(r.kept[:i], r.kept[i+1:])), "1-minimal: %v without %d", r.kept, r.kept[i])
		}
	}
	t.Run("stopped", func(t *testing.T) {
		r := minimize(all(100), func([]int32) bool { return true }, time.Now().Add(-time.Second), nil)
		require.False(t, r.minimal)
		require.Len(t, r.kept, 100, "nothing was tested, nothing removed")
	})
}
