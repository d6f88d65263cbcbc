// Package protocol is the pipe protocol between the locktest controller and
// a client process: JSON lines, one message per line, on the client's stdin
// (controller to client) and stdout (client to controller). Anything a client
// writes to stderr is kept in the run directory.
//
// The exchange:
//
//	controller: {"type":"hello","version":1,"client":3,"lock":"redis-lua","servers":["127.0.0.1:41234"],"key":"locktest","ttl_ms":2000,"fence":false,"wait":false,"wait_timeout_ms":5000,"op_timeout_ms":1000,"seed":42}
//	client:     {"type":"ready","version":1,"pid":12345}
//	controller: {"id":1,"op":"acquire"}
//	client:     {"id":1,"outcome":"ok","owner":"c3-1-9f2a11c0","token":7}
//	controller: {"id":2,"op":"read"}
//	client:     {"id":2,"outcome":"ok"}
//	controller: {"id":3,"op":"write"}
//	client:     {"id":3,"outcome":"ok"}
//	controller: {"id":4,"op":"release","owner":"c3-1-9f2a11c0"}
//	client:     {"id":4,"outcome":"fail","reason":"not-owner","removed":"-","error":"lock not held by this owner"}
//	controller: {"id":5,"op":"write","stop_at":"after-check","stop":"pause"}
//	client:     {"id":5,"stopped":"after-check","stop":"pause"}   (then SIGSTOP on itself; SIGCONT from the controller)
//	client:     {"id":5,"outcome":"ok"}
//	controller: {"id":6,"op":"shutdown"}
//	client:     {"id":6,"outcome":"ok"}   (then exits 0)
//
// read and write are the critical section on the guarded resource, which
// lives in the controller: the controller performs them at the moment the
// client answers, so a client frozen before answering touches the resource
// only after it resumes. A client that believes its lease is gone may answer
// them with "fail" and reason "not-held" instead.
//
// outcome is "ok", "fail" (surely no effect; reason says why) or "info"
// (indeterminate: it may have taken effect; error says what happened).
package protocol

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/locktest/locktest/history"
)

// Version is the protocol version spoken by this build.
const Version = 1

// Message types and operations.
const (
	TypeHello = "hello"
	TypeReady = "ready"

	OpAcquire  = "acquire"
	OpRelease  = "release"
	OpRead     = "read"
	OpWrite    = "write"
	OpShutdown = "shutdown"
	// OpClock asks the client to shift its own clock by OffsetMs (the
	// clock-client fault). Optional: a client that cannot answers fail.
	OpClock = "clock"
)

// Hello is the controller's first message.
type Hello struct {
	Type          string   `json:"type"`
	Version       int      `json:"version"`
	Client        int      `json:"client"`
	Lock          string   `json:"lock"`
	Servers       []string `json:"servers"`
	Key           string   `json:"key"`
	TTLMillis     int64    `json:"ttl_ms"`
	Fence         bool     `json:"fence"`
	Wait          bool     `json:"wait"`
	WaitTimeoutMs int64    `json:"wait_timeout_ms"`
	OpTimeoutMs   int64    `json:"op_timeout_ms"`
	Seed          int64    `json:"seed"`
	// Params are scheme-specific settings (e.g. a database's idle timeout),
	// as the user gave them; a client ignores the ones it does not know.
	Params map[string]string `json:"params,omitempty"`
}

// Ready is the client's answer to Hello. A client that cannot start says so
// in Error and exits.
type Ready struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	Error   string `json:"error,omitempty"`
	// Lock says what the client's lock promises, so the checker knows what
	// to hold it to. Optional: without it the controller assumes a lease
	// lock (expiring after ttl_ms) with no fencing token.
	Lock *LockInfo `json:"lock,omitempty"`
}

// LockInfo describes a client's lock implementation.
//
// Its fields besides the name are history.Traits, flattened into the
// message: lease (expires by itself after ttl_ms), fencing (acquire ok
// carries a token), reentrant (the same client may acquire again while
// holding), checks_validity (stops using the resource when its lease ends;
// answers valid_ms), renews (renews its lease while it lives: a watchdog),
// session (the lock dies with the client's session: connection, ZooKeeper
// session, etcd lease), reads_own_clock (optional: whether it reads its
// own clock to decide it still holds the lock, so the clock-client fault
// can matter; left out, the same as checks_validity).
type LockInfo struct {
	Name string `json:"name,omitempty"` // e.g. "redis-py Lock"
	history.Traits
	// Points are the fault points the client can stop itself at when a
	// request asks it to (Request.StopAt): the gaps between two steps of
	// one operation. Optional: a client without any is faulted only from
	// outside (after a grant).
	Points []Point `json:"points,omitempty"`
}

// Point is a named place inside one operation where the client can stop
// itself: for example "after-check" in write, between the client's check
// that its lease is still valid and its answer (the resource changes when
// the answer arrives), or "after-setnx" in acquire, between SETNX and
// EXPIRE.
type Point struct {
	Name string `json:"name"` // e.g. "after-check"
	Op   string `json:"op"`   // the operation it lies in: acquire, release, read or write
	// Summary says in plain words what lies on either side of it.
	Summary string `json:"summary,omitempty"`
	// Stops lists the stops that can hurt there (StopPause, StopCrash),
	// which locktest's faults aim at it by default; empty: both. A crash
	// between SETNX and EXPIRE leaves a lock forever, a pause there only
	// delays it.
	Stops []string `json:"stops,omitempty"`
}

// How a client stops itself at a point (Request.Stop).
const (
	// StopPause: the client announces the stop, then freezes its own
	// process group (SIGSTOP); the controller resumes it (SIGCONT) after
	// the fault's length, and the client goes on from the point.
	StopPause = "pause"
	// StopCrash: the client announces the stop, then kills its own process
	// group (SIGKILL), as a crash there would.
	StopCrash = "crash"
)

// Request is one operation the controller asks for.
type Request struct {
	ID    int64  `json:"id"`
	Op    string `json:"op"`
	Owner string `json:"owner,omitempty"` // release: the lease to give back
	// OffsetMs, for clock: the offset to set on the client's clock.
	OffsetMs int64 `json:"offset_ms,omitempty"`
	// Mode, for acquire on a read-write lock: "read" (shared) or "write"
	// (exclusive); empty means an exclusive acquire.
	Mode string `json:"mode,omitempty"`
	// StopAt asks the client to stop itself at this point of the
	// operation (one of the Points its ready message named), the way Stop
	// says, if it gets there: before stopping it sends a notice, a reply
	// with this request's id and Stopped set, then stops. An operation
	// that never reaches the point (a check that fails, a SETNX that is
	// refused) sends no notice. Optional: a client that does not know the
	// point ignores the field.
	StopAt string `json:"stop_at,omitempty"`
	Stop   string `json:"stop,omitempty"` // StopPause (the default) or StopCrash
}

// Reply answers the Request with the same ID.
type Reply struct {
	ID      int64  `json:"id"`
	Outcome string `json:"outcome"` // "ok", "fail" or "info"
	Reason  string `json:"reason,omitempty"`
	Error   string `json:"error,omitempty"`
	Owner   string `json:"owner,omitempty"`   // acquire ok: the lease's owner id
	Token   *int64 `json:"token,omitempty"`   // acquire ok: the fencing token
	Removed string `json:"removed,omitempty"` // release: whose key the server deleted ("-": none)
	// Nodes, for an acquire on several servers, lists those that granted it.
	Nodes []string `json:"nodes,omitempty"`
	// ValidMs, for an acquire ok from a client that checks its lease, is
	// how long the client will still consider the lease valid, counted from
	// when it sent this reply. After that it answers read and write with
	// fail/not-held.
	ValidMs int64 `json:"valid_ms,omitempty"`
	// Stopped marks a notice, not the answer: the client reached the point
	// named (Request.StopAt) and is about to stop itself there, the way
	// Stop says. The answer with the same id follows once it goes on (never,
	// after a crash).
	Stopped string `json:"stopped,omitempty"`
	Stop    string `json:"stop,omitempty"`
}

// Encoder writes messages as JSON lines.
type Encoder struct {
	w *bufio.Writer
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: bufio.NewWriter(w)} }

// Send writes one message and flushes it.
func (e *Encoder) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	b = append(b, '\n')
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.w.Flush()
}

// Decoder reads JSON lines.
type Decoder struct {
	sc *bufio.Scanner
	// Last is the last line read, for error messages about bad clients.
	Last string
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	return &Decoder{sc: sc}
}

// Next reads the next line into v. It returns io.EOF at the end of input.
func (d *Decoder) Next(v any) error {
	for d.sc.Scan() {
		line := d.sc.Bytes()
		if len(line) == 0 {
			continue
		}
		d.Last = string(line)
		if err := json.Unmarshal(line, v); err != nil {
			return fmt.Errorf("malformed line %q: %w", truncate(d.Last, 200), err)
		}
		return nil
	}
	if err := d.sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
