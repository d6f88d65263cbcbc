package checker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// TestGolden checks the hand-built histories under testdata: each one's
// verdict, its anomalies by kind and severity, and what Why says.
func TestGolden(t *testing.T) {
	type kinds map[Kind]int
	tests := []struct {
		file      string
		verdict   Verdict
		violation kinds // anomalies of severity "violation", by kind
		other     kinds // "contained" and "info" anomalies, by kind
		why       string
		truncated bool
		check     func(t *testing.T, r Result)
	}{
		{file: "good-mutex.jsonl", verdict: Safe, why: "12 acquires by 3 clients, no faults: no anomaly",
			check: func(t *testing.T, r Result) {
				require.Equal(t, int64(12), r.Counts.ResourceFinal)
				require.Equal(t, Counts{
					Ops: 60, Acquires: 24, AcquiresOK: 12, AcquiresFail: 12, Releases: 12, ReleasesOK: 12,
					Writes: 12, WritesAccepted: 12, ClientsAcquired: 3, ResourceFinal: 12,
					DurationNs: ms(250), HeldNs: ms(12 * 8),
				}, r.Counts)
			}},
		{file: "good-lease-indeterminate.jsonl", verdict: Safe, why: "14 acquires by 3 clients",
			check: func(t *testing.T, r Result) {
				require.Equal(t, 1, r.Counts.AcquiresInfo)
				require.Equal(t, 1, r.Counts.ReleasesInfo)
				requireProperty(t, r, "release-ok-on-expired", Pass)
			}},
		{file: "good-indeterminate.jsonl", verdict: Safe, check: func(t *testing.T, r Result) {
			require.Equal(t, 2, r.Counts.AcquiresInfo)
			requireProperty(t, r, "linearizable", Pass)
		}},
		{file: "good-reentrant.jsonl", verdict: Safe, why: "24 acquires by 3 clients", check: func(t *testing.T, r Result) {
			require.Equal(t, 24, r.Counts.AcquiresOK)
			require.Equal(t, ms(12*8), r.Counts.HeldNs)
			requireProperty(t, r, "linearizable", Pass)
		}},
		{file: "bad-double-holder.jsonl", verdict: Unsafe,
			violation: kinds{KindDoubleHolder: 1, KindNonLinearizable: 1},
			why:       "1 double holder, 1 non-linearizable history"},
		{file: "bad-lease-pause.jsonl", verdict: Unsafe,
			violation: kinds{KindDoubleHolder: 1, KindLostUpdate: 1},
			why:       "1 double holder (1 lease-expired), 1 lost update",
			check: func(t *testing.T, r Result) {
				requireProperty(t, r, "linearizable", Pass) // the lease did expire
				require.Equal(t, 1, r.Counts.FaultsOnHolder)
				a := r.Anomalies[0]
				require.Equal(t, KindDoubleHolder, a.Kind)
				require.Equal(t, "client 2 acquired the lock at 3.05 s while client 1, which acquired it at 1.00 s (lease 2.00 s, so expired by 3.00 s at the latest), still believed it held it until 5.60 s; client 1 was paused 1.01 s–5.20 s. Lost by design: client 1's lease could have run out before client 2 was granted the lock, and client 1 went on as if it still held it.", a.Explanation)
				require.Equal(t, CauseLeaseExpired, a.Cause)
				requireProperty(t, r, "lease-contract", Pass)
				require.Equal(t, []string{"pause client 1 (1.01s–5.20s)"}, a.Faults)
				require.Equal(t, a.Start, r.FirstViolation)
			}},
		{file: "fenced-contained.jsonl", verdict: Safe,
			other: kinds{KindDoubleHolder: 1, KindStaleWriteRejected: 1},
			why:   "14 acquires by 2 clients, 1 fault while the lock was held: 1 double holder (1 lease-expired) contained by fencing (1 stale write rejected)",
			check: func(t *testing.T, r Result) {
				require.Equal(t, int64(-1), r.FirstViolation)
				require.Equal(t, SeverityContained, r.Anomalies[0].Severity)
				require.Equal(t, 1, r.Counts.WritesRejected)
			}},
		{file: "bad-stale-write-accepted.jsonl", verdict: Unsafe,
			violation: kinds{KindDoubleHolder: 1, KindStaleWriteAccepted: 1, KindLostUpdate: 1},
			why:       "1 double holder (1 lease-expired), 1 lost update, 1 stale write accepted"},
		{file: "bad-foreign-release.jsonl", verdict: Unsafe,
			violation: kinds{KindDoubleHolder: 1, KindForeignRelease: 1, KindNonLinearizable: 1}},
		{file: "bad-release-ok-on-expired.jsonl", verdict: Unsafe,
			violation: kinds{KindReleaseOKOnExpired: 2, KindNonLinearizable: 1},
			why:       "2 releases ok on expired leases, 1 non-linearizable history"},
		{file: "bad-lost-update.jsonl", verdict: Unsafe,
			violation: kinds{KindLostUpdate: 1},
			why:       "1 lost update",
			check: func(t *testing.T, r Result) {
				require.Equal(t, []int{2, 1}, r.Anomalies[0].Clients)
				require.Equal(t, int64(13), r.Counts.ResourceFinal)
			}},
		{file: "crash-deadlock.jsonl", verdict: Unsafe,
			violation: kinds{KindDeadlock: 1},
			why:       "liveness: deadlock of 12.00 s",
			check: func(t *testing.T, r Result) {
				require.Contains(t, r.Anomalies[0].Explanation, "client 2 crashed at 4.10 s holding the lock (crash-client) and nobody could acquire it for the remaining 12.00 s")
				require.Equal(t, 1, r.Counts.FaultsOnHolder)
				requireProperty(t, r, "linearizable", Pass)
			}},
		{file: "truncated.jsonl", verdict: Safe, truncated: true, why: "no anomaly (history truncated)",
			check: func(t *testing.T, r Result) {
				require.Equal(t, 1, r.Counts.AcquiresInfo)
			}},
		{file: "inconclusive-few-acquires.jsonl", verdict: Inconclusive,
			why: "only 3 successful acquires (at least 10 needed)"},
		{file: "inconclusive-nemesis.jsonl", verdict: Inconclusive,
			why: "no pause fault started while its client held the lock; nemesis partition never injected a fault"},
		{file: "good-renewing-long-hold.jsonl", verdict: Safe, why: "13 acquires by 3 clients, no faults: no anomaly",
			check: func(t *testing.T, r Result) {
				// A renewed lease outlives grant + TTL while its holder runs:
				// a 2 s hold on a 300 ms lease is neither a late release nor
				// non-linearizable.
				requireProperty(t, r, "release-ok-on-expired", Pass)
				requireProperty(t, r, "linearizable", Pass)
			}},
		{file: "bad-renewing-broken.jsonl", verdict: Unsafe,
			violation: kinds{KindDoubleHolder: 1, KindNonLinearizable: 1},
			why:       "1 double holder (1 lease-broken), 1 non-linearizable history",
			check: func(t *testing.T, r Result) {
				requireProperty(t, r, "lease-contract", Fail)
				for _, a := range r.Anomalies {
					if a.Kind == KindDoubleHolder {
						require.Equal(t, CauseLeaseBroken, a.Cause)
						require.Contains(t, a.Explanation, "The lease broke its promise")
					}
				}
			}},
		{file: "good-validity-careful.jsonl", verdict: Safe, why: "12 acquires by 3 clients, 1 fault while the lock was held: no anomaly",
			check: func(t *testing.T, r Result) {
				// Frozen past its validity, the client declined the resource
				// ("not-held") and released: not a double holder.
				requireProperty(t, r, "double-holder", Pass)
				requireProperty(t, r, "used-after-validity", Pass)
			}},
		{file: "bad-used-after-validity.jsonl", verdict: Unsafe,
			violation: kinds{KindDoubleHolder: 1, KindUsedAfterValidity: 1, KindLostUpdate: 1},
			why:       "1 double holder (1 lease-expired), 1 use after validity (client bug), 1 lost update",
			check: func(t *testing.T, r Result) {
				requireProperty(t, r, "used-after-validity", Fail)
				requireProperty(t, r, "lease-contract", Pass)
				requireProperty(t, r, "linearizable", Pass)
				for _, a := range r.Anomalies {
					if a.Kind == KindUsedAfterValidity {
						require.Equal(t, []int{1}, a.Clients)
						require.Contains(t, a.Explanation, "client 1 wrote the resource at 2.61 s, 1.53 s after its own validity for the lock ended")
					}
				}
			}},
		{file: "bad-nonlinearizable.jsonl", verdict: Unsafe,
			violation: kinds{KindNonLinearizable: 1},
			check: func(t *testing.T, r Result) {
				require.Contains(t, r.Anomalies[0].Explanation, "client 1's release (failed: not-owner, 310.0 ms–312.0 ms) cannot be placed because the lock was held by client 1 (c1-x)")
			}},
	}
	files, err := filepath.Glob("testdata/*.jsonl")
	require.NoError(t, err)
	require.Len(t, files, len(tests), "every golden history needs a test case")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			h, err := history.Load(filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			require.Equal(t, tt.truncated, h.Truncated)
			r := Check(h, DefaultOptions())
			require.Equal(t, tt.verdict, r.Verdict, r.Why)
			got := map[Severity]kinds{}
			for _, a := range r.Anomalies {
				if got[a.Severity] == nil {
					got[a.Severity] = kinds{}
				}
				got[a.Severity][a.Kind]++
			}
			require.Equal(t, nonNil(tt.violation), nonNil(got[SeverityViolation]), "violations")
			other := kinds{}
			for _, sev := range []Severity{SeverityContained, SeverityInfo} {
				for k, n := range got[sev] {
					other[k] += n
				}
			}
			require.Equal(t, nonNil(tt.other), other, "contained and info anomalies")
			require.Contains(t, r.Why, tt.why)
			require.Len(t, r.Properties, 10)
			for i := 1; i < len(r.Anomalies); i++ {
				require.LessOrEqual(t, r.Anomalies[i-1].Start, r.Anomalies[i].Start)
			}
			if len(tt.violation) == 0 {
				require.Equal(t, int64(-1), r.FirstViolation)
			} else {
				require.GreaterOrEqual(t, r.FirstViolation, int64(0))
			}
			_, err = json.Marshal(r)
			require.NoError(t, err)
			if tt.check != nil {
				tt.check(t, r)
			}
			if os.Getenv("GOLDEN_VERBOSE") != "" {
				b, _ := json.MarshalIndent(r, "", "  ")
				t.Log(string(b))
			}
		})
	}
}

func nonNil[M ~map[K]int, K comparable](m M) M {
	if m == nil {
		return M{}
	}
	return m
}

func requireProperty(t *testing.T, r Result, name string, want Status) {
	t.Helper()
	for _, p := range r.Properties {
		if p.Name == name {
			require.Equal(t, want, p.Status, "%s: %s", name, p.Detail)
			return
		}
	}
	t.Fatalf("no property %s", name)
}
