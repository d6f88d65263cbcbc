package nemesis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// everyFault sets every fault's --param, and one of a server's that no
// fault reads.
var everyFault = map[string]string{"pause": "0.1..0.3", "pause-at": "after-grant, after-check", "crash-at": "after-setnx",
	"pause-server": "leader", "kill": "leader", "clock": "forward,back", "failover": " isolate ", "partition": "split,isolate-holder", "redis-port": "1"}

// ParseSettings reads each fault's --param once: the zero value is every
// fault's default, a value is read as the fault used to read it in its
// Run, and a bad one is refused as CheckParam refuses it.
func TestParseSettings(t *testing.T) {
	cases := []struct {
		name   string
		params map[string]string
		check  func(t *testing.T, s Settings)
		bad    string // the error names this; "" when none
	}{
		{"defaults", nil, func(t *testing.T, s Settings) {
			require.Equal(t, Settings{Failover: FailoverKill}, s)
			lo, hi := s.PauseLengths()
			require.Equal(t, [2]float64{1.5, 3}, [2]float64{lo, hi})
			require.Equal(t, []int{1}, s.ClockDirections())
		}, ""},
		{"zero value is the defaults", nil, func(t *testing.T, _ Settings) {
			lo, hi := Settings{}.PauseLengths()
			require.Equal(t, [2]float64{1.5, 3}, [2]float64{lo, hi})
			require.Equal(t, []int{1}, Settings{}.ClockDirections())
		}, ""},
		{"every fault's", everyFault,
			func(t *testing.T, s Settings) {
				lo, hi := s.PauseLengths()
				require.Equal(t, [2]float64{0.1, 0.3}, [2]float64{lo, hi})
				require.Equal(t, []string{"after-grant", "after-check"}, s.PauseAt)
				require.Equal(t, []string{"after-setnx"}, s.CrashAt)
				require.Equal(t, "leader", s.PauseServer)
				require.Equal(t, "leader", s.Kill)
				require.Equal(t, []int{1, -1}, s.ClockDirections())
				require.Equal(t, FailoverIsolate, s.Failover)
				require.Equal(t, []string{"split", "isolate-holder"}, s.Partition)
			}, ""},
		{"blank partition names no shape", map[string]string{"partition": "  "}, func(t *testing.T, s Settings) {
			require.Nil(t, s.Partition)
		}, ""},
		{"bad pause", map[string]string{"pause": "3..1"}, nil, "--param pause"},
		{"point twice", map[string]string{"crash-at": "after-grant,after-grant"}, nil, "--param crash-at"},
		{"bad clock", map[string]string{"clock": "sideways"}, nil, "--param clock"},
		{"bad failover", map[string]string{"failover": "drop"}, nil, "--param failover"},
		{"bad shape", map[string]string{"partition": "moat"}, nil, "--param partition"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSettings(tc.params)
			for k, v := range tc.params {
				// What run's validation refuses, and only that.
				if ok, cerr := CheckParam(k, v); ok && tc.bad == "" {
					require.NoError(t, cerr, k)
				} else if ok {
					require.Error(t, cerr, k)
				}
			}
			if tc.bad != "" {
				require.ErrorContains(t, err, tc.bad)
				return
			}
			require.NoError(t, err)
			tc.check(t, s)
		})
	}
}
