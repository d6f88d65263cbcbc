package history

import (
	"fmt"
	"sort"
	"strings"
)

// builder pairs events, in file order, into a History's operations,
// faults and client lives, one event at a time: Load streams a file through
// it without holding the events of its operations.
type builder struct {
	h       *History
	keep    keptEvents
	opsHint int           // room to reserve for the operations
	open    map[int64]int // OpID -> index in Ops, while running
	faults  map[int64]int // FaultID -> index in Faults
	clients map[int]int   // client -> index in Clients
}

// keptEvents says which events a builder keeps in History.Events.
type keptEvents int

const (
	keepAll          keptEvents = iota // every event
	keepNonOperation                   // those of no operation: a Lean history
	keepNone                           // none (the caller has them)
)

// add takes the next event; the first must be the run header.
func (b *builder) add(e *Event) error {
	if b.h == nil {
		if e.Type != Run || e.Info == nil {
			return ErrNoHeader
		}
		b.h = &History{Info: *e.Info, Truncated: true, Ops: make([]Operation, 0, max(b.opsHint, 16))}
		b.open, b.faults, b.clients = map[int64]int{}, map[int64]int{}, map[int]int{}
	}
	h := b.h
	if e.Time > h.End {
		h.End = e.Time
	}
	if b.keep == keepAll || (b.keep == keepNonOperation && !e.Type.ofOperation()) {
		h.Events = append(h.Events, *e)
	}
	switch e.Type {
	case RunEnd:
		h.Truncated = false
		h.Ended = e.Detail
	case Invoke:
		return b.invoke(e)
	case OK, Fail, Info:
		return b.complete(e)
	case FaultStart:
		b.faults[e.FaultID] = len(h.Faults)
		h.Faults = append(h.Faults, Fault{ID: e.FaultID, Name: e.Fault, Target: e.Target, Client: e.Client, Point: e.Point, Detail: e.Detail, Start: e.Time, End: Never, Held: e.Latency})
	case FaultEnd:
		if i, ok := b.faults[e.FaultID]; ok && h.Faults[i].End == Never {
			h.Faults[i].End = e.Time
			h.Faults[i].Failed = strings.HasPrefix(e.Detail, "failed")
		}
	case ClientStart:
		b.clients[e.Client] = len(h.Clients)
		h.Clients = append(h.Clients, Client{ID: e.Client, PID: e.PID, Start: e.Time, End: Never})
	case ClientExit:
		if i, ok := b.clients[e.Client]; ok {
			h.Clients[i].End = e.Time
			h.Clients[i].Detail = e.Detail
		}
	}
	return nil
}

func (b *builder) invoke(e *Event) error {
	h := b.h
	if _, dup := b.open[e.OpID]; dup {
		return fmt.Errorf("event %d: operation %d invoked twice", e.Seq, e.OpID)
	}
	if e.Client < 1 {
		return fmt.Errorf("event %d: operation %d invoked by client %d (clients are numbered from 1)", e.Seq, e.OpID, e.Client)
	}
	b.open[e.OpID] = len(h.Ops)
	h.Ops = append(h.Ops, Operation{
		Client: e.Client, Op: e.Op, OpID: e.OpID, Call: e.Time,
		Return: Never, Completed: Never, Type: Info, ValidUntil: Never,
		Owner: e.Owner, Token: e.Token, Value: e.Value, Mode: e.Mode,
		Index: len(h.Ops),
	})
	return nil
}

func (b *builder) complete(e *Event) error {
	i, ok := b.open[e.OpID]
	if !ok {
		return fmt.Errorf("event %d: completion of unknown operation %d", e.Seq, e.OpID)
	}
	delete(b.open, e.OpID)
	o := &b.h.Ops[i]
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
	return nil
}

// finish returns the History built, its faults in order of start.
func (b *builder) finish() (*History, error) {
	h := b.h
	if h == nil {
		return nil, ErrNoHeader
	}
	h.Lean = b.keep == keepNonOperation
	sort.SliceStable(h.Faults, func(i, j int) bool { return h.Faults[i].Start < h.Faults[j].Start })
	return h, nil
}

// ofOperation reports whether events of type t belong to an operation (its
// invocation or completion).
func (t Type) ofOperation() bool { return t == Invoke || t.IsCompletion() }
