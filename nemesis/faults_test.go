package nemesis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePause(t *testing.T) {
	cases := []struct {
		in     string
		lo, hi float64
		err    string
	}{
		{in: "", lo: 1.5, hi: 3},
		{in: "0.1..0.3", lo: 0.1, hi: 0.3},
		{in: " 2 .. 4 ", lo: 2, hi: 4},
		{in: "0.5", lo: 0.5, hi: 0.5},
		{in: "0..1", err: "0 < LO <= HI"},
		{in: "3..2", err: "0 < LO <= HI"},
		{in: "1..50", err: "HI <= 20"},
		{in: "short", err: "want LO..HI"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			lo, hi, err := ParsePause(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.lo, lo)
			require.Equal(t, tc.hi, hi)
		})
	}
}
