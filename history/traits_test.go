package history

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The first line of a history written before Traits existed (a redlock
// run: checks_validity set) and one of a session lock that renews, with
// every trait on: read into today's RunInfo and written again, each gives
// the same JSON object, and the traits land in Traits.
func TestRunInfoTraitsRoundTrip(t *testing.T) {
	cases := []struct {
		name, line string
		want       Traits
		fencing    bool
	}{
		{"redlock", `{"seq":0,"time":0,"type":"run","info":{"format_version":1,"lock":"redlock","nemeses":["clock-client"],"seed":1,"clients":5,"ttl_ms":1000,"lease":true,"fence":false,"fencing":false,"wait":false,"time_limit_ms":2000,"started_at":"2026-11-26T05:39:36Z","cluster":"local","topology":"redis5","version":"0.1.0-dev","servers":["redis-1: redis 7.0.15","redis-2: redis 7.0.15","redis-3: redis 7.0.15","redis-4: redis 7.0.15","redis-5: redis 7.0.15"],"deadlock_ms":3000,"resource_start":0,"base_monotonic_ns":1231737327084,"checks_validity":true,"startup_ms":595}}`,
			Traits{Lease: true, ChecksValidity: true}, false},
		{"every trait", `{"seq":0,"time":0,"type":"run","info":{"format_version":1,"lock":"zk-strict","nemeses":["pause"],"seed":3,"clients":5,"ttl_ms":1000,"lease":true,"fence":true,"fencing":true,"wait":true,"time_limit_ms":8000,"started_at":"2026-11-26T05:00:00Z","cluster":"docker","topology":"zk3","version":"0.1.0-dev","deadlock_ms":8000,"resource_start":0,"reentrant":true,"renews":true,"checks_validity":true,"read_write":true,"session":true,"idle_timeout_ms":28800000,"startup_ms":1200,"cluster_reused":true}}`,
			Traits{Lease: true, Reentrant: true, Renews: true, ChecksValidity: true, Session: true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var e Event
			require.NoError(t, json.Unmarshal([]byte(tc.line), &e))
			require.NotNil(t, e.Info)
			require.Equal(t, tc.want, Traits{Lease: e.Info.Lease, Reentrant: e.Info.Reentrant, Renews: e.Info.Renews, ChecksValidity: e.Info.ChecksValidity, Session: e.Info.Session})
			require.Equal(t, tc.fencing, e.Info.Fencing, "the run's fencing, at the top level")
			b, err := json.Marshal(e)
			require.NoError(t, err)
			require.JSONEq(t, tc.line, string(b))
		})
	}
}

// ReadsOwnClock is OwnClock where a scheme, a ready message or a history
// declares it, and ChecksValidity where it does not (its meaning before
// OwnClock existed); a history that declares it keeps it when read.
func TestReadsOwnClock(t *testing.T) {
	cases := []struct {
		name string
		line string // a run record's info
		want bool
	}{
		{"old history, checks validity", `{"lock":"redlock","lease":true,"checks_validity":true}`, true},
		{"old history, no validity check", `{"lock":"redis-lua","lease":true}`, false},
		{"validity from the server's events", `{"lock":"zk-strict","lease":true,"checks_validity":true,"reads_own_clock":false}`, false},
		{"declared reading its clock", `{"lock":"redlock","lease":true,"checks_validity":true,"reads_own_clock":true}`, true},
		{"reads its clock without a validity check", `{"lock":"x","lease":true,"reads_own_clock":true}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var info RunInfo
			require.NoError(t, json.Unmarshal([]byte(tc.line), &info))
			require.Equal(t, tc.want, info.ReadsOwnClock())
			b, err := json.Marshal(info)
			require.NoError(t, err)
			var again RunInfo
			require.NoError(t, json.Unmarshal(b, &again))
			require.Equal(t, info.OwnClock, again.OwnClock)
			require.Equal(t, tc.want, again.ReadsOwnClock())
		})
	}
}
