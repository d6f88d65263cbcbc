// Package history defines locktest's run history: the events a run records,
// the append-only JSON-lines file they are written to, and the reader that
// pairs them back into operations for the checker and the reports.
//
// A history is self-contained: its first event (type "run") carries every
// parameter the checker needs, so `locktest check DIR` works from
// history.jsonl alone.
//
// Times are nanoseconds since the run's base instant, read from the raw
// CLOCK_MONOTONIC of the controller process, which records every event. They
// never follow wall-clock jumps, and a client clock fault cannot move them.
package history

import (
	"encoding/json"
	"fmt"
	"strings"
)

// FormatVersion is the version of the history file format.
const FormatVersion = 1

// Type is the kind of an event.
type Type string

// Event types. An operation is an Invoke followed by one completion (OK, Fail
// or Info) with the same OpID; Info means indeterminate: the operation may or
// may not have taken effect, at any time after its invocation.
const (
	Run         Type = "run"          // header: run parameters (first line)
	RunEnd      Type = "run-end"      // the run stopped; Detail says why
	Invoke      Type = "invoke"       // a client operation starts
	OK          Type = "ok"           // it completed and took effect
	Fail        Type = "fail"         // it completed and surely did not take effect
	Info        Type = "info"         // indeterminate (timeout, lost connection)
	FaultStart  Type = "fault-start"  // a fault was injected
	FaultEnd    Type = "fault-end"    // that fault was healed
	ClientStart Type = "client-start" // a client process started (PID set)
	ClientExit  Type = "client-exit"  // a client process ended (Detail: why)
	Note        Type = "note"         // anything worth showing on the time line
)

// FailoverNote starts the Detail of the note a failover fault records when
// the replica has been promoted; the note's Client is the holder whose
// grant the failover followed.
const FailoverNote = "failover: "

// FailoverFailed starts the Detail of the note a failover fault records,
// instead of the FailoverNote, when the primary failed but the topology
// promoted no replica (and of the fault's end): the failover took effect,
// and could not lose a grant to a promotion.
const FailoverFailed = "failover failed: "

// PromotedLate follows FailoverNote in the note of a promotion the
// topology finished after the failover had stopped waiting for one (its
// FailoverFailed note came first): the note's time is when the promotion
// was seen, not when it came, so the checker never counts such a failover
// as one that struck.
const PromotedLate = "promoted late: "

// Late reports whether promotion note e is a PromotedLate one.
func Late(e Event) bool { return strings.HasPrefix(e.Detail, FailoverNote+PromotedLate) }

// The promotion note of a failover on a topology that compares what the
// failed primary had committed with what the promoted replica had applied
// (mysql-replicated) ends with one of these. A lock kept in committed rows
// survives a failover that lost no write; a lock kept in a session
// (Traits.Session) is lost at every failover, whatever the replica had.
const (
	PromotedWithEveryWrite = "the promoted replica had applied every write the primary had committed: the failover lost no committed write"
	PromotedLackingWrites  = "the promoted replica lacked writes the primary had committed: the failover lost them"
)

// Promotion returns the note that the failover fault f recorded when its
// replica was promoted (its Time is when), ok false when f is no failover
// or never promoted one.
func (h *History) Promotion(f Fault) (Event, bool) { return h.failoverNote(f, FailoverNote) }

// NoPromotion returns the FailoverFailed note of failover fault f: the
// primary failed and the topology promoted no replica.
func (h *History) NoPromotion(f Fault) (Event, bool) { return h.failoverNote(f, FailoverFailed) }

// failoverNote returns the note of failover fault f (recorded during it,
// for its client) whose Detail starts with prefix.
func (h *History) failoverNote(f Fault, prefix string) (Event, bool) {
	if f.Name != "failover" {
		return Event{}, false
	}
	for i := range h.Events {
		e := &h.Events[i]
		if e.Type == Note && e.Time >= f.Start && e.Time <= f.End && e.Client == f.Client && strings.HasPrefix(e.Detail, prefix) {
			return *e, true
		}
	}
	return Event{}, false
}

// Op is what a client operation does.
type Op string

// Operations. Read and Write are the two halves of the critical section on
// the guarded resource; they are performed by the controller at the moment
// the client process answers them, so a paused client touches the resource
// only after it resumes, as a real one would.
const (
	Acquire Op = "acquire"
	Release Op = "release"
	Read    Op = "read"
	Write   Op = "write"
)

// Modes of an acquire on a read-write lock (Event.Mode).
const (
	ModeRead  = "read"
	ModeWrite = "write"
)

// Reasons for a Fail completion.
const (
	ReasonHeld       = "held"        // acquire: somebody else holds the lock
	ReasonNotOwner   = "not-owner"   // release: the lock was not (or no longer) ours
	ReasonStaleToken = "stale-token" // write: the resource rejected a lower fencing token
	ReasonNotHeld    = "not-held"    // read/write: the client declined, believing its lease gone
	ReasonError      = "error"       // a definite error (e.g. connection refused)
	ReasonTimeout    = "timeout"     // acquire with --wait: gave up after the acquire timeout
	// ReasonContended: a try-lock that failed without knowing that anybody
	// holds the lock (Redlock's split vote, a queue-based recipe meeting a
	// trier ahead of it that is about to give up). Such a failure says
	// nothing about the lock's state, so the checker never needs a holder
	// to explain it.
	ReasonContended = "contended"
)

// Event is one line of history.jsonl.
type Event struct {
	Seq    int64  `json:"seq"`              // position in the file, from 0
	Time   int64  `json:"time"`             // ns since the run's base instant (CLOCK_MONOTONIC)
	Type   Type   `json:"type"`             // see the Type constants
	Client int    `json:"client,omitempty"` // logical client, from 1; 0 is the harness (for faults: the client hit)
	Op     Op     `json:"op,omitempty"`     // for operations
	OpID   int64  `json:"op_id,omitempty"`  // pairs an invoke with its completion
	Owner  string `json:"owner,omitempty"`  // lease owner id: acquire ok, release invoke
	Token  *int64 `json:"token,omitempty"`  // fencing token: acquire ok, write invoke
	Value  *int64 `json:"value,omitempty"`  // resource: value read (read ok) or written (write ok)
	Prev   *int64 `json:"prev,omitempty"`   // resource: value a write replaced
	// Removed is, for a release that reports what the server deleted, the
	// owner id of the key it removed ("-" when it removed nothing).
	Removed string `json:"removed,omitempty"`
	// Nodes, for an acquire ok on several servers, names those that granted.
	Nodes []string `json:"nodes,omitempty"`
	// Valid, for an acquire ok from a client that checks its lease: how
	// long (ns) after this event the client still considers it valid.
	Valid  int64  `json:"valid,omitempty"`
	Reason string `json:"reason,omitempty"` // for Fail: one of the Reason constants
	Error  string `json:"error,omitempty"`  // error text for Fail and Info
	// Latency, on a completion: ns since the invocation. On the start of
	// a link fault that delays the answers (delay, slow-node): the least
	// time (ns) each answer crossing the links it struck was held back
	// (the delay less its jitter), until its end.
	Latency int64 `json:"latency,omitempty"`

	// Mode, for an acquire of a read-write lock: ModeRead (shared) or
	// ModeWrite (exclusive); empty for an exclusive lock.
	Mode string `json:"mode,omitempty"`

	Fault   string `json:"fault,omitempty"`    // fault name for FaultStart/FaultEnd
	FaultID int64  `json:"fault_id,omitempty"` // pairs a fault's start and end
	Target  string `json:"target,omitempty"`   // what the fault hit, e.g. "client 3", "redis-1"
	// Point, for a client fault (FaultStart), is the fault point inside
	// the client's steps where it struck: "after-grant" (the controller
	// froze or killed the client right after its acquire answered ok), or
	// one the client stopped itself at ("after-check", "after-setnx",
	// "after-get"); empty in histories from before points existed.
	Point string `json:"point,omitempty"`
	// Rule and Length, for a FaultStart, are the fault's targeting rule
	// ("holder", "granters", "leader"...) and its planned length (a Go
	// duration), as its entry in schedule.json says; empty in histories
	// from before schedules existed.
	Rule   string `json:"rule,omitempty"`
	Length string `json:"length,omitempty"`
	PID    int    `json:"pid,omitempty"`    // ClientStart: OS pid of the client process
	Detail string `json:"detail,omitempty"` // free text

	Info *RunInfo `json:"info,omitempty"` // Run header only
}

// Traits are what a lock promises, declared once: a scheme's
// (locks.Scheme), a client program's (protocol.LockInfo, from its ready
// message) and a run's record (RunInfo) embed them, and encoding/json
// flattens them into the record that embeds them, with these field
// names.
type Traits struct {
	Lease bool `json:"lease"` // the lock expires by itself after the TTL
	// Fencing: the lock can hand out fencing tokens (--fence).
	Fencing bool `json:"fencing,omitempty"`
	// Reentrant: the same client can take the lock again while it holds
	// it, and must release it as many times; each cycle acquires twice
	// (nested) and releases twice.
	Reentrant bool `json:"reentrant,omitempty"`
	// ChecksValidity: the client stops using the resource once its own
	// computed validity ends (Operation.ValidUntil, on its clock).
	ChecksValidity bool `json:"checks_validity,omitempty"`
	// Renews: the client renews its lease while it lives (a watchdog), so
	// a lease outlives grant + TTL as long as its holder runs; when it
	// ends is not recorded.
	Renews bool `json:"renews,omitempty"`
	// Session: the lock belongs to the client's session with the server
	// (a connection, a ZooKeeper session, an etcd lease) and dies with it:
	// at once when the client's process dies and its connection closes,
	// or, with Renews, TTL after the last heartbeat the server heard,
	// which the client sends every TTL/3 from before it acquires.
	Session bool `json:"session,omitempty"`
	// OwnClock: the client reads its own clock to decide that it still
	// holds the lock, so a fault on that clock (clock-client) can matter
	// to it. Optional: nil, as in histories and ready messages from before
	// it, means ChecksValidity; read it with ReadsOwnClock. A client may
	// check its validity without its clock: zk-strict hears from
	// ZooKeeper's events (SUSPENDED, an expired session) that it lost the
	// lock, and says false.
	OwnClock *bool `json:"reads_own_clock,omitempty"`
}

// ReadsOwnClock reports whether the client reads its own clock: OwnClock
// when declared, else ChecksValidity (what it meant before OwnClock).
func (t Traits) ReadsOwnClock() bool {
	if t.OwnClock != nil {
		return *t.OwnClock
	}
	return t.ChecksValidity
}

// RunInfo is the header of a history: everything needed to check it again.
type RunInfo struct {
	FormatVersion int      `json:"format_version"`
	Lock          string   `json:"lock"`
	Nemeses       []string `json:"nemeses"`
	Seed          int64    `json:"seed"`
	Clients       int      `json:"clients"`
	TTLMillis     int64    `json:"ttl_ms"` // lease TTL; 0 when the scheme has none
	// Traits are what the lock promises; their JSON fields sit at the top
	// level of the record, as before Traits existed.
	Traits
	Fence bool `json:"fence"` // the resource enforced fencing tokens
	// Fencing: the run handed out fencing tokens (the scheme can, and
	// --fence asked for them). It hides Traits.Fencing, which is not
	// recorded: read this one.
	Fencing       bool     `json:"fencing"`
	Wait          bool     `json:"wait"`          // blocking acquire
	TimeLimitMs   int64    `json:"time_limit_ms"` // planned duration of the workload
	StartedAt     string   `json:"started_at"`    // wall clock, RFC 3339, for humans only
	Cluster       string   `json:"cluster"`
	Topology      string   `json:"topology"`
	Version       string   `json:"version"`                     // locktest version
	Servers       []string `json:"servers,omitempty"`           // server versions
	DeadlockMs    int64    `json:"deadlock_ms"`                 // liveness threshold
	Command       string   `json:"command,omitempty"`           // the command line
	ResourceStart int64    `json:"resource_start"`              // initial value of the resource
	Extra         any      `json:"extra,omitempty"`             // scheme-specific settings
	BaseMonotonic int64    `json:"base_monotonic_ns,omitempty"` // CLOCK_MONOTONIC at Time 0
	// ReadWrite: the lock has shared (read) and exclusive (write) holders;
	// acquires carry Mode, and readers only read the resource.
	ReadWrite bool `json:"read_write,omitempty"`
	// IdleTimeoutMillis: the server of a Session lock without heartbeats
	// closes a connection idle this long (MariaDB's wait_timeout), and
	// the lock goes with it; 0 when none is known.
	IdleTimeoutMillis int64 `json:"idle_timeout_ms,omitempty"`
	// StartupMillis is how long the cluster took to start, until every
	// server answered; ClusterReused: a campaign's pooled cluster, started
	// for an earlier run (StartupMillis 0).
	StartupMillis int64 `json:"startup_ms,omitempty"`
	ClusterReused bool  `json:"cluster_reused,omitempty"`
	// Mirrors names the library (or published recipe) and version the
	// scheme, with this run's --param variant, writes out: the verdict is
	// about that code. Absent in histories of older versions.
	Mirrors *Mirror `json:"mirrors,omitempty"`
	// ReplayedFrom is the schedule file (locktest run --schedule) the
	// run's faults were replayed from instead of drawn; empty when drawn,
	// and in histories from before schedules existed.
	ReplayedFrom string `json:"replayed_from,omitempty"`
}

// Mirror names what a reference scheme follows: a library at a version,
// or a published recipe, and the source it was written from.
type Mirror struct {
	Library string `json:"library"` // e.g. "etcd client/v3 concurrency.Mutex"
	Version string `json:"version"` // e.g. "v3.5.35", ">= 3.44", "2024 docs"
	Source  string `json:"source"`  // a link to the code or page followed
	// Variant is the --param KEY=VALUE that chose a historical variant;
	// empty for the scheme's default.
	Variant string `json:"variant,omitempty"`
	// Differs says where the scheme knowingly departs from the source;
	// empty when it follows it step by step.
	Differs string `json:"differs,omitempty"`
}

// String renders the mirror on one line.
func (m Mirror) String() string {
	s := m.Library + " " + m.Version
	if m.Variant != "" {
		s += " (--param " + m.Variant + ")"
	}
	return s + " <" + m.Source + ">"
}

// KilledPrimary ends the Detail of a kill that took down the server every
// client's session lives on (clusters.Primaried: MariaDB's primary), and
// KilledReplica that of one that did not: to a session lock, the first
// ends every session, the second none.
const (
	KilledPrimary = "the primary: every session ends"
	KilledReplica = "a replica: the primary's sessions live on"
)

// EndedEarly is the run-end Detail of a run that stopped as soon as the
// online checker was certain of a violation (--stop-early).
const EndedEarly = "stopped at the first violation (--stop-early)"

// EndedInterrupted is the run-end Detail of a run that was interrupted
// (Ctrl-C) before its time limit: what it recorded is checked, but it did
// not run its course.
const EndedInterrupted = "interrupted"

// Int64 returns a pointer to v, for the optional fields of Event.
func Int64(v int64) *int64 { return &v }

// Bool returns a pointer to v, for the optional fields of Traits.
func Bool(v bool) *bool { return &v }

// IsCompletion reports whether t completes an operation.
func (t Type) IsCompletion() bool { return t == OK || t == Fail || t == Info }

// String renders an event compactly, for error messages and debugging.
func (e Event) String() string {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Sprintf("event %d", e.Seq)
	}
	return string(b)
}
