package nemesis

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

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

// failover needs the network layer only to isolate the primary, and the
// no-root message says so.
func TestFailoverNeedsNetToIsolate(t *testing.T) {
	ns, _, err := Parse("failover")
	require.NoError(t, err)
	require.False(t, NeedsNet(ns, nil))
	require.False(t, NeedsNet(ns, map[string]string{"failover": "kill"}))
	require.True(t, NeedsNet(ns, map[string]string{"failover": "isolate"}))
	ns, _, err = Parse("pause,partition")
	require.NoError(t, err)
	require.True(t, NeedsNet(ns, nil))

	msg := NetUnavailable(errors.New("network faults need root")).Error()
	require.Contains(t, msg, "partition, failover with --param failover=isolate, proxied, delay, slow-node, stall, reset, bandwidth, loss cannot run")
	require.Contains(t, msg, "clock-client, failover work without it")

	for in, want := range map[string]string{"": FailoverKill, "kill": FailoverKill, "isolate": FailoverIsolate} {
		got, err := ParseFailover(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err = ParseFailover("pause")
	require.ErrorContains(t, err, "known: kill, isolate")
}

type failing struct{}

func (failing) Name() string                    { return "failing" }
func (failing) Run(context.Context, *Env) error { return errors.New("broken") }

type waiting struct{}

func (waiting) Name() string { return "waiting" }
func (waiting) Run(ctx context.Context, _ *Env) error {
	<-ctx.Done()
	return nil
}

// One nemesis that fails ends the others: the run is aborted at once, not
// at its time limit.
func TestRunAllStopsAtTheFirstError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := RunAll(ctx, &Env{}, []Nemesis{waiting{}, failing{}})
	require.ErrorContains(t, err, "nemesis failing: broken")
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestParseShapesOptIn(t *testing.T) {
	all, err := ParseShapes("")
	require.NoError(t, err)
	require.NotContains(t, all, "lost-renewal", "opt-in shapes are not drawn by default")
	got, err := ParseShapes("lost-renewal")
	require.NoError(t, err)
	require.Equal(t, []string{"lost-renewal"}, got)
	_, err = ParseShapes("lost-renewl")
	require.ErrorContains(t, err, "lost-renewal")
	// locktest list names every shape the param takes, the opt-in ones too.
	info, ok := Lookup("partition")
	require.True(t, ok)
	for _, s := range append(slices.Clone(PartitionShapes), OptInShapes...) {
		require.Contains(t, info.Summary, s)
	}
}

func TestParsePoints(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "after-check", want: []string{"after-check"}},
		{in: " after-grant , after-check ", want: []string{"after-grant", "after-check"}},
		{in: "after-check,after-check", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePoints(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
