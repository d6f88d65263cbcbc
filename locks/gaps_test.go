package locks

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGapStopsOnceAtItsPoint(t *testing.T) {
	t.Parallel()
	var hit []string
	ctx := WithGap(context.Background(), PointAfterGet, func(p string) { hit = append(hit, p) })
	Gap(ctx, PointAfterSetNX) // another point: nothing
	Gap(ctx, PointAfterGet)
	Gap(ctx, PointAfterGet) // once per operation
	Gap(context.Background(), PointAfterGet)
	require.Equal(t, []string{PointAfterGet}, hit)
}

// Every point a scheme declares lies in an operation the worker has, and
// names a known point.
func TestSchemePoints(t *testing.T) {
	t.Parallel()
	known := map[string]string{PointAfterSetNX: "acquire", PointAfterCheck: "write", PointAfterGet: "release"}
	for _, s := range Schemes {
		for _, p := range s.Points {
			require.Equal(t, known[p.Name], p.Op, "%s: point %s", s.Name, p.Name)
			require.NotEmpty(t, p.Summary, "%s: point %s", s.Name, p.Name)
		}
		if s.ChecksValidity {
			require.Contains(t, s.Points, afterCheck, "%s checks its validity: its check-then-act gap is a point", s.Name)
		}
	}
}
