package shrink

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDDMin(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		needed []int // the run fails when every one of these is kept
		want   []int
	}{
		{"one of eight", 8, []int{5}, []int{5}},
		{"two far apart", 8, []int{0, 7}, []int{0, 7}},
		{"three of ten", 10, []int{2, 3, 9}, []int{2, 3, 9}},
		{"none needed", 4, nil, nil},
		{"all needed", 3, []int{0, 1, 2}, []int{0, 1, 2}},
		{"single item", 1, []int{0}, []int{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]int{}
			got, err := DDMin(tc.n, func(keep []int) (bool, error) {
				require.True(t, slices.IsSorted(keep), "subsets keep the items' order")
				seen[key(keep)]++
				for _, i := range tc.needed {
					if !slices.Contains(keep, i) {
						return false, nil
					}
				}
				return true, nil
			})
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			for k, n := range seen {
				require.Equal(t, 1, n, "subset %q tested twice", k)
			}
		})
	}
}

// A search stopped by an error keeps the smallest failing subset found.
func TestDDMinStopsWithBestSoFar(t *testing.T) {
	stop := errors.New("budget")
	calls := 0
	got, err := DDMin(8, func(keep []int) (bool, error) {
		calls++
		if calls == 3 {
			return false, stop
		}
		return slices.Contains(keep, 1), nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, []int{0, 1, 2, 3}, got, "call 2 found the first half failing; call 3 stopped the search")
}
