package history

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoadLean: on every recorded history of the repository, Load gives
// what Parse gives but for the events of operations, which it leaves out
// of Events and EventsWithin reads back: the same events in every span.
func TestLoadLean(t *testing.T) {
	var files []string
	for _, pat := range []string{"../*/testdata/*.jsonl", "../*/testdata/*/*.jsonl", "../*/*/testdata/*.jsonl"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	loaded := 0
	for _, path := range files {
		f, err := os.Open(path)
		require.NoError(t, err)
		whole, werr := Parse(f)
		require.NoError(t, f.Close())
		lean, lerr := Load(path)
		if werr != nil {
			require.Error(t, lerr, path)
			continue
		}
		require.NoError(t, lerr, path)
		loaded++
		require.True(t, lean.Lean)
		require.False(t, whole.Lean)
		require.Equal(t, whole.Ops, lean.Ops, path)
		require.Equal(t, whole.Faults, lean.Faults, path)
		require.Equal(t, whole.Clients, lean.Clients, path)
		require.Equal(t, whole.Info, lean.Info, path)
		require.Equal(t, []any{whole.End, whole.Truncated, whole.Ended}, []any{lean.End, lean.Truncated, lean.Ended}, path)
		var others []Event
		for _, e := range whole.Events {
			if !e.Type.ofOperation() {
				others = append(others, e)
			}
		}
		require.Equal(t, others, lean.Events, path)
		spans := []Span{{0, whole.End}, {whole.End / 3, whole.End / 2}, {whole.End + 1, whole.End + 2}}
		want, err := whole.EventsWithin(spans)
		require.NoError(t, err)
		got, err := lean.EventsWithin(spans)
		require.NoError(t, err)
		require.Equal(t, want, got, path)
		require.Len(t, want[0], len(whole.Events), "the first span holds every event")
	}
	t.Logf("%d files, %d loaded", len(files), loaded)
	require.Greater(t, loaded, len(files)/2)
}
