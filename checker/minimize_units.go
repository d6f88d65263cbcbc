package checker

import (
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
)

// unitKind is what a unit of a history is, for its witness.
type unitKind uint8

const (
	unitOp      unitKind = iota // an operation: its invocation and completion
	unitFault                   // a fault: its start and end (a failover's promotion note too)
	unitProcess                 // a client process: its start and exit
	unitNote                    // a note (but a failover's promotion, which goes with its fault)
)

// histUnit is what a witness keeps or removes whole: its events, as
// positions in History.Events, in order.
type histUnit struct {
	kind   unitKind
	events []int32
}

// histUnits cuts a history into units; the events of none (the header,
// the run's end, a witness's note) are kept in every sub-history.
type histUnits struct {
	h      *history.History
	fixed  []int32
	units  []histUnit // in order of their first event
	byOp   map[int64]int32
	ops    int // operations in h
	faults int // faults in h
}

// unitsOf cuts h into units.
func unitsOf(h *history.History) *histUnits {
	us := &histUnits{h: h, byOp: make(map[int64]int32, len(h.Ops))}
	byFault := map[int64]int32{}
	byClient := map[int]int32{}     // the process unit of each client
	lastFailover := map[int]int32{} // the last failover started, by the client it followed
	open := func(kind unitKind, i int32) int32 {
		us.units = append(us.units, histUnit{kind: kind, events: []int32{i}})
		return int32(len(us.units) - 1)
	}
	join := func(u int32, ok bool, i int32) {
		if ok {
			us.units[u].events = append(us.units[u].events, i)
		} else {
			us.fixed = append(us.fixed, i)
		}
	}
	for k := range h.Events {
		e, i := &h.Events[k], int32(k)
		switch e.Type {
		case history.Invoke:
			us.byOp[e.OpID] = open(unitOp, i)
			us.ops++
		case history.OK, history.Fail, history.Info:
			u, ok := us.byOp[e.OpID]
			join(u, ok, i)
		case history.FaultStart:
			byFault[e.FaultID] = open(unitFault, i)
			if e.Fault == "failover" {
				lastFailover[e.Client] = byFault[e.FaultID]
			}
			us.faults++
		case history.FaultEnd:
			u, ok := byFault[e.FaultID]
			join(u, ok, i)
		case history.ClientStart:
			byClient[e.Client] = open(unitProcess, i)
		case history.ClientExit:
			u, ok := byClient[e.Client]
			join(u, ok, i)
		case history.Note:
			if u, ok := lastFailover[e.Client]; ok && strings.HasPrefix(e.Detail, history.FailoverNote) {
				join(u, true, i)
			} else if strings.HasPrefix(e.Detail, WitnessNote) {
				us.fixed = append(us.fixed, i) // a witness's own label
			} else {
				open(unitNote, i)
			}
		default:
			us.fixed = append(us.fixed, i)
		}
	}
	return us
}

// pinned returns the units of the operations ids (those in the history).
func (us *histUnits) pinned(ids []int64) map[int32]bool {
	out := map[int32]bool{}
	for _, id := range ids {
		if u, ok := us.byOp[id]; ok {
			out[u] = true
		}
	}
	return out
}

// events returns the fixed events and those of the units kept and pinned,
// in the history's order.
func (us *histUnits) events(kept []int32, pinned map[int32]bool) []history.Event {
	idx := slices.Clone(us.fixed)
	for _, u := range kept {
		idx = append(idx, us.units[u].events...)
	}
	for u := range pinned {
		idx = append(idx, us.units[u].events...)
	}
	slices.Sort(idx)
	out := make([]history.Event, len(idx))
	for k, i := range idx {
		out[k] = us.h.Events[i]
	}
	return out
}

// localize is the first cut of a witness: the units of free (sorted) that
// lie near anomaly a in time, within a pad that starts at a quarter of
// its length (1 ms at least) and grows fourfold, the first such window
// that still shows it (ddmin would get there too, but on a long history
// each of its first candidates is half the history). It returns free
// when no window does (or when over says to stop), and the candidates
// tried.
func (us *histUnits) localize(free []int32, a Anomaly, shows func([]int32) bool, over func() bool) ([]int32, int) {
	tried := 0
	for pad := max((a.End-a.Start)/4, int64(time.Millisecond)); !over(); pad *= 4 {
		var near []int32
		for _, u := range free {
			if from, to := us.span(u); to >= a.Start-pad && from <= satAdd(a.End, pad) {
				near = append(near, u)
			}
		}
		if len(near) == len(free) {
			break
		}
		tried++
		if shows(near) {
			return near, tried
		}
	}
	return free, tried
}

// span is the time from unit u's first event to its last, or to the end
// of the history when it has one event only (an operation that never
// completed, a fault never healed, a process that outlived the history;
// a note is an instant).
func (us *histUnits) span(u int32) (from, to int64) {
	evs := us.units[u].events
	from, to = us.h.Events[evs[0]].Time, us.h.Events[evs[len(evs)-1]].Time
	if len(evs) == 1 && us.units[u].kind != unitNote {
		to = us.h.End
	}
	return from, to
}

// IsWitness reports whether h is a witness written by Witnesses.
func IsWitness(h *history.History) bool {
	for _, e := range h.Events {
		switch {
		case e.Type == history.Note:
			return strings.HasPrefix(e.Detail, WitnessNote)
		case e.Type != history.Run:
			return false
		}
	}
	return false
}
