package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

func TestWriteSummary(t *testing.T) {
	manyAnomalies := func(h *history.History) *checker.Result {
		r := sampleResult(t, h)
		for i := 0; i < 6; i++ {
			r.Anomalies = append(r.Anomalies, checker.Anomaly{
				Kind: checker.KindStaleWriteRejected, Severity: "info", Clients: []int{1},
				Start: ns(4), End: ns(4), Explanation: fmt.Sprintf("stale write %d rejected (paused 1.11 s\u20134.61 s \u2192 token \u2264 7)", i),
			})
		}
		return r
	}
	tests := []struct {
		name   string
		result func(*history.History) *checker.Result
		want   []string
		absent []string
	}{
		{
			name:   "unsafe",
			result: func(h *history.History) *checker.Result { return sampleResult(t, h) },
			want: []string{
				"UNSAFE: the lock broke its promise",
				"lock redis-single, nemeses pause, seed 42, fencing off, 5.00s, 2 clients",
				"why: 2 clients held the lock at the same time",
				"acquires  4 ok, 41 failed, 1 indeterminate; 5 holds, lock held 76.0% of the time",
				"releases  3 ok, 1 failed, 0 indeterminate",
				"writes    2 accepted, 0 rejected for a stale token",
				"faults    1 injected, 1 struck while the lock was held",
				"FAIL    mutual-exclusion     1 anomaly; by interval sweep",
				"UNKNOWN linearizability      search timed out after 10s; by porcupine",
				"pass    lease-contract       by interval sweep",
				"n/a     liveness             no deadlock threshold",
				"anomalies (3):",
				"#1 double-holder (violation): clients 2, 1, 2.60s-3.50s",
				"during: pause client 1 (0.60s-4.00s)",
				"     Client 1 acquired the lock at 0.50s",
				"#3 release-ok-on-expired (info): client 1, 4.10s-4.12s",
				"why: 2 clients held the lock at the same time: clients 2 and 1 from 2.60s to 3.50s, while client 1 was\n       paused",
			},
			absent: []string{"more in results.json"},
		},
		{
			name: "safe",
			result: func(h *history.History) *checker.Result {
				return &checker.Result{
					Verdict: checker.Safe, Why: "no two clients held the lock at once in 812 holds", FirstViolation: -1,
					Counts:     checker.Counts{AcquiresOK: 812, AcquiresFail: 9000, Faults: 12, FaultsOnHolder: 5},
					Properties: []checker.Property{{Name: "mutual-exclusion", Status: checker.Pass, Engine: "interval sweep"}},
				}
			},
			want: []string{
				"SAFE: no property of the lock was violated",
				"why: no two clients held the lock at once in 812 holds",
				"acquires  812 ok, 9000 failed, 0 indeterminate",
				"faults    12 injected, 5 struck while the lock was held",
				"pass    mutual-exclusion  by interval sweep",
			},
			absent: []string{"anomalies", "writes "},
		},
		{
			name: "inconclusive",
			result: func(h *history.History) *checker.Result {
				return &checker.Result{
					Verdict: checker.Inconclusive, Why: "the pause never hit a client holding the lock", FirstViolation: -1,
					Properties: []checker.Property{{Name: "linearizability", Status: checker.Unknown, Detail: "timed out after 60s"}},
				}
			},
			want: []string{
				"INCONCLUSIVE: the run could not show whether the lock is safe",
				"why: the pause never hit a client holding the lock",
				"UNKNOWN linearizability  timed out after 60s",
			},
		},
		{
			name:   "many anomalies",
			result: manyAnomalies,
			want: []string{
				"anomalies (5 of 9: the most severe, one of each kind first):",
				"stale write 0 rejected (paused 1.11 s-4.61 s -> token <= 7)",
				"#1 double-holder", "#2 lost-update", "#3 release-ok-on-expired", "#4 stale-write-rejected (info): client 1, at 4.00s",
				"4 more in results.json / report.html",
			},
			absent: []string{"#9 ", "stale write 5 rejected"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sampleHistory(t)
			r := tc.result(h)
			var plain, colored bytes.Buffer
			WriteSummary(&plain, h, r, false)
			WriteSummary(&colored, h, r, true)
			out := plain.String()
			t.Log("\n" + out)
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
			for _, a := range tc.absent {
				require.NotContains(t, out, a)
			}
			require.NotContains(t, out, "\x1b[", "no ANSI codes without colour")
			for _, r := range out {
				require.Less(t, r, rune(0x7f), "plain ASCII: %q", r)
			}
			require.Contains(t, colored.String(), "\x1b[")
			require.Equal(t, out, stripANSI(colored.String()), "colour changes nothing else")
			for _, l := range strings.Split(out, "\n") {
				require.LessOrEqual(t, len(l), 120, "line too long: %q", l)
			}
		})
	}
}

func TestWriteSummaryNil(t *testing.T) {
	var buf bytes.Buffer
	WriteSummary(&buf, nil, nil, false)
	require.Contains(t, buf.String(), "no result")
	buf.Reset()
	WriteSummary(&buf, nil, &checker.Result{Verdict: checker.Safe, Lock: "zk"}, false)
	require.Contains(t, buf.String(), "SAFE")
	require.Contains(t, buf.String(), "lock zk")
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func TestWrap(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		width int
		want  []string
	}{
		{"short", "a b c", 10, []string{"a b c"}},
		{"wraps", "aaa bbb ccc", 7, []string{"aaa bbb", "ccc"}},
		{"long word", "aaaaaaaaaa b", 4, []string{"aaaaaaaaaa", "b"}},
		{"paragraphs", "a\nb", 10, []string{"a", "b"}},
		{"units stay", "held until 4.96 s; paused", 12, []string{"held until", "4.96 s;", "paused"}},
		{"unit after a word", "all s ms", 3, []string{"all", "s", "ms"}},
		{"empty", "", 10, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, wrap(tc.text, tc.width))
		})
	}
}

func TestSummaryNamesCause(t *testing.T) {
	h := sampleHistory(t)
	r := sampleResult(t, h)
	r.Anomalies[0].Cause = checker.CauseLeaseBroken
	var b strings.Builder
	WriteSummary(&b, h, r, false)
	require.Contains(t, b.String(), "#1 double-holder (violation, lease broken (service at fault)): clients 2, 1, 2.60s-3.50s")
	require.Contains(t, b.String(), "#2 lost-update (violation): ")
}

// An anomaly with a witness names its file under the explanation.
func TestSummaryNamesWitness(t *testing.T) {
	h := sampleHistory(t)
	r := sampleResult(t, h)
	r.Anomalies[1].Witness = "witness-2/history.jsonl"
	var b strings.Builder
	WriteSummary(&b, h, r, false)
	require.Equal(t, 1, strings.Count(b.String(), "witness: "))
	require.Regexp(t, `#2 lost-update \(violation\): [^#]*\n     witness: witness-2/history\.jsonl\n`, b.String())
}

func TestVerdictGloss(t *testing.T) {
	v := func(kind checker.Kind, cause checker.Cause) checker.Anomaly {
		return checker.Anomaly{Kind: kind, Cause: cause, Severity: checker.SeverityViolation}
	}
	cases := []struct {
		name      string
		anomalies []checker.Anomaly
		want      string
	}{
		{"a grant under a live lease", []checker.Anomaly{v(checker.KindDoubleHolder, checker.CauseLeaseBroken), v(checker.KindLostUpdate, "")}, "the lock broke its promise"},
		{"holders outlived their leases", []checker.Anomaly{v(checker.KindDoubleHolder, checker.CauseLeaseExpired), v(checker.KindLostUpdate, "")}, "lost by design"},
		{"a client past its validity", []checker.Anomaly{v(checker.KindDoubleHolder, checker.CauseLeaseExpired), v(checker.KindUsedAfterValidity, "")}, "a client bug"},
		{"by design, and a foreign release", []checker.Anomaly{v(checker.KindDoubleHolder, checker.CauseSessionExpired), v(checker.KindForeignRelease, "")}, "the lock broke its promise"},
		{"lost updates alone", []checker.Anomaly{v(checker.KindLostUpdate, "")}, "the lock broke its promise"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, unsafeGloss(&checker.Result{Verdict: checker.Unsafe, Anomalies: tc.anomalies}), tc.want)
		})
	}
	contained := &checker.Result{Anomalies: []checker.Anomaly{{Kind: checker.KindDoubleHolder, Severity: checker.SeverityContained}}}
	require.Contains(t, safeGloss(contained), "fencing tokens contained")
	require.Equal(t, "no property of the lock was violated", safeGloss(&checker.Result{}))
}

// WriteVerdict is the head of WriteSummary: its verdict lines, without
// the counts, properties and anomalies that follow.
func TestWriteVerdictIsTheSummaryHead(t *testing.T) {
	h, r := loadChecked(t, storedRun)
	var full, head strings.Builder
	WriteSummary(&full, h, r, false)
	WriteVerdict(&head, h, r, false)
	require.True(t, strings.HasPrefix(full.String(), head.String()), "head:\n%s\nfull:\n%s", head.String(), full.String())
	require.Contains(t, head.String(), "UNSAFE: ")
	require.Contains(t, head.String(), "  why: ")
	require.Contains(t, full.String(), "properties:")
	for _, not := range []string{"properties:", "\nanomalies (", "  acquires "} {
		require.NotContains(t, head.String(), not)
	}
}
