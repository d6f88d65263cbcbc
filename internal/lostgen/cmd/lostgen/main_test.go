package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/lostgen"
)

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var out, errb bytes.Buffer
	code := run([]string{"-ops", "2000", "-clients", "20", "-lost", "0.02", "-double", "2", "-mix", "certain", "-seed", "3", "-out", dir}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "linearizable: no")
	h, err := history.Load(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(h.Ops), 2000)
	require.Equal(t, int64(3), h.Info.Seed)
	b, err := os.ReadFile(filepath.Join(dir, "truth.json"))
	require.NoError(t, err)
	var tr lostgen.Truth
	require.NoError(t, json.Unmarshal(b, &tr))
	require.Equal(t, lostgen.No, tr.Linearizable)
	require.Equal(t, len(h.Ops), tr.Ops)

	// the history is never overwritten
	errb.Reset()
	require.Equal(t, 1, run([]string{"-out", dir}, &out, &errb))
	require.Contains(t, errb.String(), "create history")
}

func TestRunBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no out", []string{"-ops", "10"}, "-out DIR is required"},
		{"bad flag", []string{"-nope"}, "flag provided but not defined"},
		{"bad config", []string{"-clients", "1", "-out", "x"}, "clients 1 not in"},
		{"bad mix", []string{"-mix", "odd", "-out", "x"}, "mix \"odd\""},
		{"argument", []string{"-out", "x", "extra"}, "no arguments are taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			var out, errb bytes.Buffer
			require.Equal(t, 2, run(tc.args, &out, &errb))
			_, err := os.Stat("x")
			require.True(t, os.IsNotExist(err), "bad input made a directory")
			require.Contains(t, errb.String(), tc.want)
			require.Empty(t, out.String())
		})
	}
}
