// Package checker reads a lock history and decides, property by property,
// whether the lock kept its promises. Every property gets a typed status
// (pass, fail or unknown); a search that ran out of time is unknown, never a
// pass. The checker works from the history alone.
package checker

import (
	"sort"

	"github.com/locktest/locktest/history"
)

// Status is the outcome of checking one property.
type Status string

// Property statuses.
const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Unknown Status = "unknown" // the check could not decide (e.g. search timed out)
	Skipped Status = "n/a"     // the property does not apply to this run
	// Interrupted: the check was stopped (CheckContext's context done)
	// before it decided the property. Never a pass.
	Interrupted Status = "interrupted"
)

// Verdict is the overall answer for a run.
type Verdict string

// Verdicts, with the exit codes of `locktest run` and `locktest check`.
const (
	Safe         Verdict = "safe"         // exit 0
	Unsafe       Verdict = "unsafe"       // exit 1
	Inconclusive Verdict = "inconclusive" // exit 3
)

// Kind is what an anomaly is, as written in results.json.
type Kind string

// Anomaly kinds.
const (
	KindDoubleHolder       Kind = "double-holder"
	KindForeignRelease     Kind = "foreign-release"
	KindReleaseOKOnExpired Kind = "release-ok-on-expired"
	KindLostUpdate         Kind = "lost-update"
	KindStaleWriteAccepted Kind = "stale-write-accepted"
	KindStaleWriteRejected Kind = "stale-write-rejected"
	KindDeadlock           Kind = "deadlock"
	KindNonLinearizable    Kind = "non-linearizable"
	// KindUsedAfterValidity: a client that checks its own lease validity
	// (RunInfo.ChecksValidity) used the resource after that validity ended:
	// a bug of the client, not of the lock service.
	KindUsedAfterValidity Kind = "used-after-validity"
)

// Cause is why a double holder happened (Anomaly.Cause), "" for none.
type Cause string

// Causes of a double holder in a lease run.
const (
	// CauseLeaseExpired: the earlier holder's lease could have run out
	// before the later grant on correct clocks, and the earlier holder went
	// on believing it held the lock (e.g. it was paused past its TTL). The
	// lease did what a lease does: the lock is lost by design.
	CauseLeaseExpired Cause = "lease-expired"
	// CauseLeaseBroken: the later grant surely came before the earlier
	// lease could have expired on a correct clock: the lock service broke
	// its own promise (clock jump, failover, lost state).
	CauseLeaseBroken Cause = "lease-broken"
	// CauseUnknown: the lease is renewed while its holder runs and the
	// renewals are not recorded, so when it could have expired is unknown.
	CauseUnknown Cause = "unknown"
)

// Anomaly is one finding, with everything a person needs to follow it.
type Anomaly struct {
	Kind Kind `json:"kind"`
	// Severity: "violation" breaks the verdict; "contained" is a lock-level
	// violation whose damage fencing tokens stopped; "info" is shown only
	// (e.g. stale-write-rejected: fencing doing its job).
	Severity Severity `json:"severity"`
	Clients  []int    `json:"clients"`          // clients involved, the main one first
	Start    int64    `json:"start"`            // ns since run start
	End      int64    `json:"end"`              // ns since run start
	Ops      []int64  `json:"ops,omitempty"`    // OpIDs of the operations that show it
	Faults   []string `json:"faults,omitempty"` // faults active then, e.g. "pause client 3 (1.20s-4.80s)"
	// Cause, for a double holder in a lease run: CauseLeaseExpired,
	// CauseLeaseBroken or CauseUnknown.
	Cause       Cause  `json:"cause,omitempty"`
	Explanation string `json:"explanation"` // plain words
	// Witness is the history file, relative to the run directory, of a
	// 1-minimal sub-history that still shows this anomaly (Witnesses),
	// written by `locktest check` and at the end of `locktest run`; empty
	// when none was made. WitnessPartial: its time bound stopped the
	// minimisation before every removal was tried.
	Witness        string `json:"witness,omitempty"`
	WitnessPartial bool   `json:"witness_partial,omitempty"`
}

// Property is the result of one check.
type Property struct {
	Name   string  `json:"name"`
	Status Status  `json:"status"`
	Engine string  `json:"engine"`           // what decided it, e.g. "interval sweep", "porcupine"
	Count  int     `json:"count"`            // anomalies found
	Detail string  `json:"detail,omitempty"` // e.g. why unknown or n/a
	Millis float64 `json:"ms"`               // time the check took
	// Search says, for the linearizability property, how much of the
	// history the lock checker decided without search and how much it had
	// to search; nil for the other properties.
	Search *SearchStats `json:"search,omitempty"`
}

// Counts summarises the history.
type Counts struct {
	Ops             int   `json:"ops"`
	Acquires        int   `json:"acquires"`
	AcquiresOK      int   `json:"acquires_ok"`
	AcquiresFail    int   `json:"acquires_fail"`
	AcquiresInfo    int   `json:"acquires_indeterminate"`
	Releases        int   `json:"releases"`
	ReleasesOK      int   `json:"releases_ok"`
	ReleasesFail    int   `json:"releases_fail"`
	ReleasesInfo    int   `json:"releases_indeterminate"`
	Writes          int   `json:"writes"`
	WritesAccepted  int   `json:"writes_accepted"`
	WritesRejected  int   `json:"writes_rejected"`
	Faults          int   `json:"faults"`
	FaultsOnHolder  int   `json:"faults_on_holder"` // faults that struck while the lock was held, where they could matter (see struck)
	ClientsAcquired int   `json:"clients_acquired"` // distinct clients with a successful acquire
	ResourceFinal   int64 `json:"resource_final"`
	DurationNs      int64 `json:"duration_ns"`
	HeldNs          int64 `json:"held_ns"` // time during which some client surely held the lock
	// ShortGrants counts the grants on several servers (Redlock's) that
	// some server voted no for or never answered, and MissingVotes how
	// often each server was missing from them (a slow or cut server:
	// Redlock's per-node timeout makes a late answer a missing vote).
	ShortGrants  int            `json:"short_grants,omitempty"`
	MissingVotes map[string]int `json:"missing_votes,omitempty"`
}

// Result is what results.json holds.
type Result struct {
	Verdict Verdict `json:"verdict"`
	// Why is one line saying what decided the verdict.
	Why     string   `json:"why"`
	Lock    string   `json:"lock"`
	Nemeses []string `json:"nemeses"`
	Seed    int64    `json:"seed"`
	Fence   bool     `json:"fence"`
	// StartupMs is how long the cluster took to start, until every server
	// answered (RunInfo.StartupMillis); ClusterReused: it was started for
	// an earlier run of a campaign and reused.
	StartupMs     int64 `json:"startup_ms"`
	ClusterReused bool  `json:"cluster_reused,omitempty"`
	// Mirrors is the library and version the verdict is about
	// (RunInfo.Mirrors); absent for a --client-cmd run.
	Mirrors    *history.Mirror `json:"mirrors,omitempty"`
	Truncated  bool            `json:"truncated,omitempty"`
	Counts     Counts          `json:"counts"`
	Properties []Property      `json:"properties"`
	Anomalies  []Anomaly       `json:"anomalies"`
	// FirstViolation is the time of the earliest violation, -1 when none.
	FirstViolation int64 `json:"first_violation_ns"`
	// Interrupted: the run was interrupted (Ctrl-C) before its time limit
	// (history.EndedInterrupted); the verdict covers only what it recorded,
	// and campaigns never count it as a verdict.
	Interrupted bool `json:"interrupted,omitempty"`
	// CheckInterrupted: the check itself was stopped (Ctrl-C or SIGTERM
	// during `locktest check` or the check at the end of `locktest run`)
	// before it decided every property: those it had not are
	// "interrupted", and the verdict is never safe.
	CheckInterrupted bool `json:"check_interrupted,omitempty"`
	// StoppedEarly: the run stopped at the first violation the online
	// checker was certain of (history.EndedEarly, --stop-early): the
	// anomaly counts are lower bounds.
	StoppedEarly bool `json:"stopped_early,omitempty"`
}

// Hold is an interval during which a client surely believed it held the
// lock: from the return of its successful acquire to the invocation of its
// release (or its process's end, or the end of the history). A client that
// checks its own validity (RunInfo.ChecksValidity) stops using the resource
// once that validity ends: its hold ends then, or at the completion of its
// last successful read or write if that came later, and never after the
// release is invoked.
type Hold struct {
	Client int    `json:"client"`
	Owner  string `json:"owner"`
	Token  *int64 `json:"token,omitempty"`
	// Shared: a read (shared) hold of a read-write lock.
	Shared    bool  `json:"shared,omitempty"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
	AcquireOp int64 `json:"acquire_op"`
	ReleaseOp int64 `json:"release_op,omitempty"` // 0 when it never released
	// AcquireCall is when the acquire was invoked: the server granted the
	// lease at some time in [AcquireCall, Start].
	AcquireCall int64  `json:"acquire_call"`
	EndReason   string `json:"end_reason"` // "release", "client-exit", "end-of-history", "validity", "declined"
	// ValidUntil is, for a client that checks its validity, when it stops
	// considering the lease valid (the latest of its acquires' in the
	// hold); 0 when the acquire did not say.
	ValidUntil int64 `json:"valid_until,omitempty"`
	// BelievedEnd is when the client stopped believing it held the lock
	// (its release invoked, its process ended, the history ended): End,
	// unless the hold ended earlier with the client's validity.
	BelievedEnd int64 `json:"believed_end"`
	// AcquireIndex and ReleaseIndex are the positions of the acquire and
	// the release in History.Ops (ReleaseIndex -1 when it never released).
	AcquireIndex int `json:"-"`
	ReleaseIndex int `json:"-"`
}

// Prioritized returns the indices of as in the order in which they are
// worth a reader's attention: by severity (violations first, then
// contained ones, then the rest); within one severity the first anomaly of
// each kind before the second of any kind, and so on; then by position
// (Check keeps them in time order). So a short list (the report's, the
// witnesses made) shows every kind of violation there is, not five of one
// kind.
func Prioritized(as []Anomaly) []int {
	idx := make([]int, len(as))
	nth := make([]int, len(as)) // occurrence of its kind and severity
	seen := map[[2]string]int{}
	for i, a := range as {
		idx[i] = i
		k := [2]string{string(a.Kind), string(a.Severity)}
		nth[i] = seen[k]
		seen[k]++
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ra, rb := severityRank(as[idx[a]].Severity), severityRank(as[idx[b]].Severity)
		if ra != rb {
			return ra < rb
		}
		return nth[idx[a]] < nth[idx[b]]
	})
	return idx
}

// severityRank orders anomalies for display and selection: violations
// first, then contained ones, then everything else.
func severityRank(s Severity) int {
	switch s {
	case SeverityViolation:
		return 0
	case SeverityContained:
		return 1
	default:
		return 2
	}
}
