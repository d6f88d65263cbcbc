package reports

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
)

func TestWriteResultsJSON(t *testing.T) {
	full := sampleResult(t, sampleHistory(t))
	tests := []struct {
		name     string
		result   *checker.Result
		existing bool
		want     []string // substrings of the file
	}{
		{"full", full, false, []string{`"verdict": "unsafe"`, `"kind": "double-holder"`, "\n  \"why\": "}},
		{"empty lists are []", &checker.Result{Verdict: checker.Safe, FirstViolation: -1}, false, []string{`"anomalies": []`, `"properties": []`, `"nemeses": []`}},
		{"replaces an old file", full, true, []string{`"verdict": "unsafe"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "results.json")
			if tc.existing {
				require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
			}
			require.NoError(t, WriteResultsJSON(path, tc.result))

			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, w := range tc.want {
				require.Contains(t, string(b), w)
			}
			var back checker.Result
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, tc.result.Verdict, back.Verdict)
			require.Equal(t, len(tc.result.Anomalies), len(back.Anomalies))
			if len(tc.result.Anomalies) > 0 {
				require.Equal(t, tc.result.Anomalies, back.Anomalies)
			}

			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file is left behind")
			info, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o644), info.Mode().Perm())
		})
	}
}

func TestWriteResultsJSONErrors(t *testing.T) {
	dir := t.TempDir()
	require.Error(t, WriteResultsJSON(filepath.Join(dir, "results.json"), nil))
	require.Error(t, WriteResultsJSON(filepath.Join(dir, "missing", "results.json"), &checker.Result{}))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}
