package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// Ready lines as clients wrote them before LockInfo embedded
// history.Traits read the same and are written back byte for byte.
func TestReadyTraitsRoundTrip(t *testing.T) {
	cases := []struct {
		name, line string
		want       history.Traits
	}{
		{"no lock info", `{"type":"ready","version":1,"pid":12345}`, history.Traits{}},
		{"redis-lua, no --fence", `{"type":"ready","version":1,"pid":7,"lock":{"name":"redis-lua","lease":true}}`, history.Traits{Lease: true}},
		{"every trait", `{"type":"ready","version":1,"pid":7,"lock":{"name":"zk-strict","lease":true,"fencing":true,"reentrant":true,"checks_validity":true,"renews":true,"session":true}}`,
			history.Traits{Lease: true, Fencing: true, Reentrant: true, ChecksValidity: true, Renews: true, Session: true}},
		{"validity from events, not the clock", `{"type":"ready","version":1,"pid":7,"lock":{"name":"zk-strict","lease":true,"checks_validity":true,"session":true,"reads_own_clock":false}}`,
			history.Traits{Lease: true, ChecksValidity: true, Session: true, OwnClock: history.Bool(false)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Ready
			require.NoError(t, json.Unmarshal([]byte(tc.line), &r))
			if r.Lock != nil {
				require.Equal(t, tc.want, r.Lock.Traits)
			}
			b, err := json.Marshal(r)
			require.NoError(t, err)
			require.Equal(t, tc.line, string(b))
		})
	}
}
