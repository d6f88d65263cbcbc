package nemesis

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters/proxy"
	"github.com/locktest/locktest/history"
)

// The network-speed faults' --param values: good ones read as meant, bad
// ones (negative, inverted, unknown) refused with one line naming the key.
func TestNetSpeedParams(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		err        string // "" for a good value
	}{
		{"delay", "50ms..200ms", ""},
		{"delay", "100ms", ""},
		{"delay", "-5ms", "--param delay: \"-5ms\": want 0 < LO <= HI <= 1m"},
		{"delay", "200ms..50ms", "want 0 < LO <= HI"},
		{"delay", "fast", "want LO..HI or one duration"},
		{"slow-node", "0s", "--param slow-node"},
		{"jitter", "10ms", ""},
		{"jitter", "-1ms", "--param jitter=-1ms"},
		{"delay-direction", "downstream", ""},
		{"delay-direction", "sideways", "unknown direction \"sideways\""},
		{"delay-at", "holder", ""},
		{"delay-at", "in-flight,nowhere", "unknown aim \"nowhere\""},
		{"bandwidth", "2..8", ""},
		{"bandwidth", "0", "--param bandwidth"},
		{"bandwidth", "8..2", "want 1 <= LO <= HI"},
		{"loss", "0.25", ""},
		{"loss", "1", "--param loss"},
		{"loss", "-0.1", "--param loss"},
		{"loss", "NaN", "--param loss"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			known, err := CheckParam(tc.key, tc.value)
			require.True(t, known)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
			require.NotContains(t, err.Error(), "\n")
		})
	}
	for _, key := range []string{"jitter", "delay-direction", "delay-at"} {
		f, ok := ParamFault(key)
		require.True(t, ok, key)
		require.Equal(t, FaultDelay, f, key)
	}
	p, err := parseSpeedParams(FaultDelay, map[string]string{"delay": "50ms..200ms", "jitter": "10ms", "delay-direction": "upstream", "delay-at": "holder"})
	require.NoError(t, err)
	require.Equal(t, speedParams{lo: 50 * time.Millisecond, hi: 200 * time.Millisecond, jitter: 10 * time.Millisecond, direction: proxy.Upstream, aims: []string{AimHolder}, rateLo: 1, rateHi: 4, share: 0.3}, p)
}

// The strikes' toxics: a delay drawn inside the range, on the answers only
// when aimed at an acquire in flight, held long enough for a request and
// its late answer to cross; each other fault its own toxic.
func TestDrawToxic(t *testing.T) {
	env := &Env{TTL: time.Second, Seed: 7}
	for _, tc := range []struct {
		fault, aim string
		params     map[string]string
		check      func(t *testing.T, tx proxy.Toxic, d time.Duration)
	}{
		{FaultDelay, AimInFlight, nil, func(t *testing.T, tx proxy.Toxic, d time.Duration) {
			require.Equal(t, proxy.Downstream, tx.Direction)
			require.GreaterOrEqual(t, tx.Latency, 1200*time.Millisecond)
			require.LessOrEqual(t, tx.Latency, 2500*time.Millisecond)
			require.GreaterOrEqual(t, d, 2*tx.Latency)
		}},
		{FaultDelay, AimHolder, map[string]string{"delay": "50ms..200ms"}, func(t *testing.T, tx proxy.Toxic, d time.Duration) {
			require.Equal(t, proxy.Both, tx.Direction)
			require.GreaterOrEqual(t, tx.Latency, 50*time.Millisecond)
			require.LessOrEqual(t, tx.Latency, 200*time.Millisecond)
			require.GreaterOrEqual(t, d, 1500*time.Millisecond)
		}},
		{FaultDelay, AimInFlight, map[string]string{"delay-direction": "both"}, func(t *testing.T, tx proxy.Toxic, _ time.Duration) {
			require.Equal(t, proxy.Both, tx.Direction)
		}},
		{FaultStall, AimHolder, nil, func(t *testing.T, tx proxy.Toxic, _ time.Duration) { require.Equal(t, proxy.Stall, tx.Kind) }},
		{FaultReset, AimHolder, nil, func(t *testing.T, tx proxy.Toxic, d time.Duration) {
			require.Equal(t, proxy.Reset, tx.Kind)
			require.LessOrEqual(t, d, time.Second)
		}},
		{FaultBandwidth, AimHolder, map[string]string{"bandwidth": "3"}, func(t *testing.T, tx proxy.Toxic, _ time.Duration) {
			require.Equal(t, int64(3), tx.RateKB)
		}},
		{FaultLoss, AimHolder, map[string]string{"loss": "0.2"}, func(t *testing.T, tx proxy.Toxic, _ time.Duration) {
			require.Equal(t, proxy.Loss, tx.Kind)
			require.InDelta(t, 0.2, tx.Share, 1e-9)
		}},
	} {
		t.Run(tc.fault+"/"+tc.aim, func(t *testing.T) {
			p, err := parseSpeedParams(tc.fault, tc.params)
			require.NoError(t, err)
			s := &striker{env: env, fault: tc.fault, p: p, r: rng(env, tc.fault)}
			for range 20 {
				tx, d := s.drawToxic(tc.aim)
				tc.check(t, tx, d)
			}
		})
	}
}

// A lossy link is probed until a loss shows, as many times as its share
// needs for the odds that none shows to fall below 1 in 10 000; a share
// too small for 200 probes is not held against it.
func TestLossProbes(t *testing.T) {
	for _, tc := range []struct {
		share float64
		n     int
	}{{0.3, 13}, {0.5, 7}, {0.9, 2}, {0.05, 90}, {0.001, maxLossProbes}} {
		n, escape := lossProbes(tc.share)
		require.Equal(t, tc.n, n, "share %v", tc.share)
		if n < maxLossProbes {
			require.Less(t, escape, lossProofOdds, "share %v", tc.share)
		} else {
			require.GreaterOrEqual(t, escape, lossProofOdds, "share %v", tc.share)
		}
	}
}

// A strike whose toxic could not be taken off ends the run with an error
// (the history says it healed, the link is still slow); one taken off
// leaves the run going.
func TestHealFailureEndsTheRun(t *testing.T) {
	env := &Env{Recorder: history.NewRecorder(io.Discard, history.Monotonic(), true), TTL: time.Second, Seed: 7}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s := &striker{env: env, fault: FaultDelay, ctx: ctx, stop: stop}
	s.heal("client 1 | redis-1", func() error { return nil })
	require.NoError(t, s.fatal)
	require.NoError(t, ctx.Err())

	s.heal("client 1 | redis-1", func() error { return errors.New("toxic lt3-downstream not found") })
	require.ErrorContains(t, s.fatal, "delay on client 1 | redis-1: heal failed: toxic lt3-downstream not found")
	require.Error(t, ctx.Err(), "the run goes on")
}

// TestDefaultAims: unless --param delay-at says, a client-link fault slows
// the holder's links only where that can hurt (a session's heartbeats, a
// lease's renewals); every lock gets the late answer to an acquire.
func TestDefaultAims(t *testing.T) {
	require.Equal(t, []string{AimInFlight}, DefaultAims(history.Traits{Lease: true}))
	require.Equal(t, []string{AimInFlight}, DefaultAims(history.Traits{Lease: true, ChecksValidity: true}))
	require.Equal(t, Aims, DefaultAims(history.Traits{Session: true}))
	require.Equal(t, Aims, DefaultAims(history.Traits{Lease: true, Renews: true}))
}
