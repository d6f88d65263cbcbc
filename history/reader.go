package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Never is the Return time of an operation that never completed or whose
// outcome is unknown.
const Never = int64(math.MaxInt64)

// History is a parsed history file.
type History struct {
	Info RunInfo
	// Events are the history's events in file order: every one, or, in a
	// Lean history, only those of no operation (header, run end, faults,
	// client lives, notes); EventsWithin gives them all in a time span.
	Events    []Event
	Ops       []Operation // client operations in order of invocation
	Faults    []Fault     // faults in order of start
	Clients   []Client    // client processes in order of start
	End       int64       // time of the last event
	Truncated bool        // the file had no run-end event, or a torn last line
	Ended     string      // Detail of the run-end event
	// Lean: Events leaves out the events of operations (Load), which
	// EventsWithin reads back from Source, the file loaded.
	Lean   bool
	Source string
}

// Operation is an invocation paired with its completion.
type Operation struct {
	Client  int
	Op      Op
	OpID    int64
	Call    int64 // invocation time
	Return  int64 // completion time; Never when it never completed
	Type    Type  // OK, Fail or Info; Info when it never completed
	Owner   string
	Mode    string // acquire: ModeRead or ModeWrite on a read-write lock; "" otherwise
	Token   *int64
	Value   *int64
	Prev    *int64
	Removed string
	Nodes   []string
	// ValidUntil is when the client itself stops considering the lease
	// valid (acquire ok from a client that checks it); Never otherwise.
	ValidUntil int64
	Reason     string
	Error      string
	// Completed is the time the completion was recorded, even for Info
	// operations whose Return is Never (for display); Never if none was.
	Completed int64
	Index     int // position in History.Ops
}

// Fault is a fault's start paired with its end.
type Fault struct {
	ID     int64
	Name   string
	Target string
	Client int    // the client process it hit; 0 for a server fault
	Point  string // the fault point inside the client's steps (Event.Point)
	Detail string
	Start  int64
	End    int64 // Never when it was never healed in the history
	// Failed: the fault never took effect (its end says "failed: ..."):
	// it struck nothing.
	Failed bool
	// Held, for a link fault that delays the answers: each answer that
	// crossed its links between Start and End was held back at least this
	// long (ns; Event.Latency on its start); 0 for any other fault.
	Held int64
}

// Proxied is the nemesis that injects no fault but runs every client-server
// link through a proxy (the baseline of the network-speed faults): like
// "none", a run under it is not expected to strike anything.
const Proxied = "proxied"

// AimInFlight starts the detail of a link fault aimed at an acquire in
// flight (its client's links struck as it sent the acquire: "in-flight:
// delay 1.8s on the answers for 4.1s"), as "lost-reply" starts a
// partition's aimed at one.
const AimInFlight = "in-flight"

// Client is one client process's life.
type Client struct {
	ID     int
	PID    int
	Start  int64
	End    int64 // Never when it outlived the history
	Detail string
}

// Load reads a history file in one streaming pass and keeps what the
// checks need: the operations (Ops, decoded once) and the events of no
// operation (Events: the header, the run's end, faults, client lives,
// notes), not the two events of every operation, which EventsWithin reads
// back from the file when a page shows them (Lean, Source).
func Load(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	h, err := parse(f, keepNonOperation, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h.Source = path
	return h, nil
}

// ErrNoHeader is returned for a history whose first event is not "run".
var ErrNoHeader = errors.New("history has no run header")

// Parse reads a history from r, keeping every event. A torn last line (a
// crash while writing) is dropped and the history marked Truncated; a bad
// line elsewhere is an error.
func Parse(r io.Reader) (*History, error) {
	return parse(r, keepAll, 0)
}

// parse reads a history from r, keeping the events keep says; size, when known, is the size of the file, from which
// it reserves room for the operations.
func parse(r io.Reader, keep keptEvents, size int64) (*History, error) {
	sc := lineScanner(r)
	b := builder{keep: keep, opsHint: int(size / bytesPerOpHint)}
	var in interner
	var bad, built error // the first undecodable line; the first event that does not fit
	line := 0
	var e Event // one, reused: it escapes (json.Unmarshal)
	for sc.Scan() {
		line++
		if bad != nil {
			return nil, bad
		}
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		if err := decodeLine(raw, &e, &in); err != nil {
			bad = fmt.Errorf("line %d: %w", line, err)
			continue
		}
		if built == nil {
			built = b.add(&e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	if built != nil {
		return nil, built
	}
	h, err := b.finish()
	if err != nil {
		return nil, err
	}
	if bad != nil {
		h.Truncated = true
	}
	return h, nil
}

// lineScanner reads a history's lines, up to 16 MiB each.
func lineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	return sc
}

// decodeLine decodes one line into e, on the fast path where it can
// (decodeEventFast), else with encoding/json.
func decodeLine(raw []byte, e *Event, in *interner) error {
	*e = Event{}
	if decodeEventFast(raw, e, in) {
		return nil
	}
	*e = Event{}
	return json.Unmarshal(raw, e)
}

// bytesPerOpHint is fewer bytes than an operation's two lines take in a
// recorded history (130 or more): Load reserves room for the operations of
// a file from its size, and the pages of the room left unused are never
// touched.
const bytesPerOpHint = 192

// FromEvents builds a History from events in file order, keeping them all.
func FromEvents(events []Event) (*History, error) {
	b := builder{keep: keepNone, opsHint: len(events) / 2}
	for i := range events {
		if err := b.add(&events[i]); err != nil {
			return nil, err
		}
	}
	h, err := b.finish()
	if err != nil {
		return nil, err
	}
	h.Events = events
	return h, nil
}

// ClientEnd returns when client id's process ended, or Never.
func (h *History) ClientEnd(id int) int64 {
	for _, c := range h.Clients {
		if c.ID == id {
			return c.End
		}
	}
	return Never
}

// FaultsDuring returns the faults active at some point of [from, to].
func (h *History) FaultsDuring(from, to int64) []Fault {
	var out []Fault
	for _, f := range h.Faults {
		if f.Start <= to && f.End >= from {
			out = append(out, f)
		}
	}
	return out
}
