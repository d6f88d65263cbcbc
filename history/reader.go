package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// Never is the Return time of an operation that never completed or whose
// outcome is unknown.
const Never = int64(math.MaxInt64)

// History is a parsed history file.
type History struct {
	Info      RunInfo
	Events    []Event
	Ops       []Operation // client operations in order of invocation
	Faults    []Fault     // faults in order of start
	Clients   []Client    // client processes in order of start
	End       int64       // time of the last event
	Truncated bool        // the file had no run-end event, or a torn last line
	Ended     string      // Detail of the run-end event
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

// Load reads and parses a history file.
func Load(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	h, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// ErrNoHeader is returned for a history whose first event is not "run".
var ErrNoHeader = errors.New("history has no run header")

// Parse reads a history from r. A torn last line (a crash while writing) is
// dropped and the history marked Truncated; a bad line elsewhere is an error.
func Parse(r io.Reader) (*History, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	var events []Event
	var bad error
	line := 0
	for sc.Scan() {
		line++
		if bad != nil {
			return nil, bad
		}
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var e Event
		if decodeEventFast(b, &e) {
			events = append(events, e)
			continue
		}
		e = Event{}
		if err := json.Unmarshal(b, &e); err != nil {
			bad = fmt.Errorf("line %d: %w", line, err)
			continue
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	h, err := FromEvents(events)
	if err != nil {
		return nil, err
	}
	if bad != nil {
		h.Truncated = true
	}
	return h, nil
}

// FromEvents builds a History from events in file order.
func FromEvents(events []Event) (*History, error) {
	if len(events) == 0 || events[0].Type != Run || events[0].Info == nil {
		return nil, ErrNoHeader
	}
	h := &History{Info: *events[0].Info, Events: events, Truncated: true}
	open := map[int64]int{}   // OpID -> index in Ops
	faults := map[int64]int{} // FaultID -> index in Faults
	clients := map[int]int{}  // client -> index in Clients
	for _, e := range events {
		if e.Time > h.End {
			h.End = e.Time
		}
		switch e.Type {
		case RunEnd:
			h.Truncated = false
			h.Ended = e.Detail
		case Invoke:
			if _, dup := open[e.OpID]; dup {
				return nil, fmt.Errorf("event %d: operation %d invoked twice", e.Seq, e.OpID)
			}
			if e.Client < 1 {
				return nil, fmt.Errorf("event %d: operation %d invoked by client %d (clients are numbered from 1)", e.Seq, e.OpID, e.Client)
			}
			open[e.OpID] = len(h.Ops)
			h.Ops = append(h.Ops, Operation{
				Client: e.Client, Op: e.Op, OpID: e.OpID, Call: e.Time,
				Return: Never, Completed: Never, Type: Info, ValidUntil: Never,
				Owner: e.Owner, Token: e.Token, Value: e.Value, Mode: e.Mode,
				Index: len(h.Ops),
			})
		case OK, Fail, Info:
			i, ok := open[e.OpID]
			if !ok {
				return nil, fmt.Errorf("event %d: completion of unknown operation %d", e.Seq, e.OpID)
			}
			delete(open, e.OpID)
			o := &h.Ops[i]
			o.Type = e.Type
			o.Completed = e.Time
			if e.Type != Info {
				o.Return = e.Time
			}
			if e.Owner != "" {
				o.Owner = e.Owner
			}
			if e.Token != nil {
				o.Token = e.Token
			}
			if e.Value != nil {
				o.Value = e.Value
			}
			o.Prev = e.Prev
			o.Removed = e.Removed
			o.Nodes = e.Nodes
			if e.Valid > 0 {
				o.ValidUntil = e.Time + e.Valid
			}
			o.Reason = e.Reason
			o.Error = e.Error
		case FaultStart:
			faults[e.FaultID] = len(h.Faults)
			h.Faults = append(h.Faults, Fault{ID: e.FaultID, Name: e.Fault, Target: e.Target, Client: e.Client, Point: e.Point, Detail: e.Detail, Start: e.Time, End: Never, Held: e.Latency})
		case FaultEnd:
			if i, ok := faults[e.FaultID]; ok && h.Faults[i].End == Never {
				h.Faults[i].End = e.Time
				h.Faults[i].Failed = strings.HasPrefix(e.Detail, "failed")
			}
		case ClientStart:
			clients[e.Client] = len(h.Clients)
			h.Clients = append(h.Clients, Client{ID: e.Client, PID: e.PID, Start: e.Time, End: Never})
		case ClientExit:
			if i, ok := clients[e.Client]; ok {
				h.Clients[i].End = e.Time
				h.Clients[i].Detail = e.Detail
			}
		}
	}
	sort.SliceStable(h.Faults, func(i, j int) bool { return h.Faults[i].Start < h.Faults[j].Start })
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
