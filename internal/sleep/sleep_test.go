package sleep

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFor(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"waits", live, 20 * time.Millisecond, true},
		{"no wait, live", live, 0, true},
		{"no wait, ended", ended, -time.Second, false},
		{"ended first", ended, time.Hour, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			require.Equal(t, tc.want, For(tc.ctx, tc.d))
			if tc.want {
				require.GreaterOrEqual(t, time.Since(t0), tc.d)
			} else {
				require.Less(t, time.Since(t0), time.Minute)
			}
		})
	}
}
