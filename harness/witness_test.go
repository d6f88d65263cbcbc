package harness

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/lostgen"
	"github.com/locktest/locktest/reports"
)

// TestCheckDirWritesWitnesses: `locktest check` (CheckDirContext) writes
// each anomaly's witness as a run directory of its own, which results.json
// names and which `locktest check` fails with the same kind, cause and
// clients; a second check replaces the witnesses of the first, and a
// witness's own check writes none.
func TestCheckDirWritesWitnesses(t *testing.T) {
	t.Run("whole", func(t *testing.T) { checkDirWritesWitnesses(t, 2000, true) })
	// A long history's witnesses are cut from a window around its
	// anomalies (witnessSource): the same witnesses, each checked alone.
	t.Run("window", func(t *testing.T) {
		defer func(n int) { witnessMaxOps = n }(witnessMaxOps)
		witnessMaxOps = 3000 // of 20000: some anomalies' windows, not all
		checkDirWritesWitnesses(t, 20000, false)
	})
}

func checkDirWritesWitnesses(t *testing.T, ops int, all bool) {
	dir := t.TempDir()
	_, err := lostgen.WriteDir(dir, lostgen.Config{Ops: ops, Clients: 20, Lost: 0.02, Double: 2, Mix: lostgen.MixCertain, Resource: true, Seed: 5})
	require.NoError(t, err)
	stale := filepath.Join(dir, "witness-99")
	require.NoError(t, os.Mkdir(stale, 0o755))

	var out bytes.Buffer
	res, err := CheckDirContext(context.Background(), dir, &out, true)
	require.NoError(t, err)
	require.Equal(t, checker.Unsafe, res.Verdict, res.Why)
	require.Contains(t, out.String(), "witnesses: ")
	require.NoDirExists(t, stale, "an earlier check's witnesses are replaced")

	stored, err := reports.ReadResultsJSON(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	witnessed := 0
	for n, a := range stored.Anomalies {
		if a.Witness == "" {
			continue
		}
		witnessed++
		require.Equal(t, filepath.Join(witnessDir(n+1), "history.jsonl"), a.Witness)
		require.False(t, a.WitnessPartial)
		wdir := filepath.Join(dir, witnessDir(n+1))
		wres, err := CheckDirContext(context.Background(), wdir, nil, true)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(wres.Anomalies, func(b checker.Anomaly) bool {
			return b.Kind == a.Kind && b.Cause == a.Cause && slices.Equal(b.Clients, a.Clients)
		}), "the witness of #%d %s fails the same way: %+v", n+1, a.Kind, wres.Anomalies)
		if a.Severity == checker.SeverityViolation {
			require.Equal(t, checker.Unsafe, wres.Verdict, wres.Why)
		}
		ents, err := os.ReadDir(wdir)
		require.NoError(t, err)
		for _, e := range ents {
			require.False(t, witnessDirName.MatchString(e.Name()), "a witness is not minimised again")
		}
	}
	require.Equal(t, len(stored.Anomalies), witnessed, "every anomaly (at most 16) has a witness")
	if !all { // the witnesses were cut from a window of the history
		h, err := history.Load(filepath.Join(dir, "history.jsonl"))
		require.NoError(t, err)
		src, err := witnessSource(h, stored)
		require.NoError(t, err)
		require.LessOrEqual(t, len(src.Ops), witnessMaxOps)
		require.Positive(t, len(src.Ops))
	}
}
