package history

import (
	"fmt"
	"os"
	"sort"
)

// Span is a closed interval of history time, in ns.
type Span struct{ From, To int64 }

// EventsWithin returns, for each span, the history's events whose time
// lies in it, in file order (EachEventWithin).
func (h *History) EventsWithin(spans []Span) ([][]Event, error) {
	out := make([][]Event, len(spans))
	err := h.EachEventWithin(spans, func(i int, e *Event) { out[i] = append(out[i], *e) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachEventWithin calls visit, in file order, with each event of the
// history whose time lies in a span, once for each span it lies in (i
// its index; e valid during the call only). A Lean history reads them
// back from its file in one pass (an error if it cannot); any other takes
// them from Events.
func (h *History) EachEventWithin(spans []Span, visit func(i int, e *Event)) error {
	take := func(e *Event) {
		for i, s := range spans {
			if s.contains(e.Time) {
				visit(i, e)
			}
		}
	}
	if !h.Lean {
		for i := range h.Events {
			take(&h.Events[i])
		}
		return nil
	}
	if len(spans) == 0 {
		return nil
	}
	f, err := os.Open(h.Source)
	if err != nil {
		return fmt.Errorf("read the history's events again: %w", err)
	}
	defer f.Close()
	sc := lineScanner(f)
	var in interner
	var e Event // one, reused: it escapes (json.Unmarshal)
	for sc.Scan() {
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		if t, ok := leadingTime(raw); ok && !within(spans, t) {
			continue
		}
		if decodeLine(raw, &e, &in) != nil {
			continue // a torn last line, which Load dropped too
		}
		take(&e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the history's events again: %w", err)
	}
	return nil
}

func (s Span) contains(t int64) bool { return t >= s.From && t <= s.To }

func within(spans []Span, t int64) bool {
	for _, s := range spans {
		if s.contains(t) {
			return true
		}
	}
	return false
}

// leadingTime reads the time of a line that starts as the recorder writes
// them, {"seq":N,"time":T, without decoding the rest; ok false for any
// other line, which is then decoded.
func leadingTime(b []byte) (int64, bool) {
	const seq, time = `{"seq":`, `,"time":`
	if len(b) < len(seq) || string(b[:len(seq)]) != seq {
		return 0, false
	}
	_, i, ok := plainInt(b, len(seq))
	if !ok || len(b) < i+len(time) || string(b[i:i+len(time)]) != time {
		return 0, false
	}
	t, _, ok := plainInt(b, i+len(time))
	return t, ok
}

// Whole returns the history with every event: h itself, or, for a Lean
// history, its file read again keeping them all (what a sub-history of
// whole operations, such as a witness, is cut from). It costs the memory
// of every event, so callers ask for it only when they need them.
func (h *History) Whole() (*History, error) {
	if !h.Lean {
		return h, nil
	}
	f, err := os.Open(h.Source)
	if err != nil {
		return nil, fmt.Errorf("read the history's events again: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Window returns the sub-history of h made of whole operations that lie
// in a span (invoked and completed in it; one never completed, invoked in
// it) and every event of no operation (header, faults, client lives,
// notes, run end), with all their events, in file order. For a Lean
// history only the spans' events are read back from its file, so a
// window costs the memory of what it holds, not of the whole history.
// A witness cut from a window is checked on its own, like any other.
func (h *History) Window(spans []Span) (*History, error) {
	keep := map[int64]bool{}
	for i := range h.Ops {
		if o := &h.Ops[i]; o.within(spans) {
			keep[o.OpID] = true
		}
	}
	var evs []Event
	for i := range h.Events {
		if e := &h.Events[i]; !e.Type.ofOperation() {
			evs = append(evs, *e)
		}
	}
	seen := map[int64]bool{} // an event in two spans is visited twice
	err := h.EachEventWithin(spans, func(_ int, e *Event) {
		if e.Type.ofOperation() && keep[e.OpID] && !seen[e.Seq] {
			seen[e.Seq] = true
			evs = append(evs, *e)
		}
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
	return FromEvents(evs)
}

// OpsWithin counts the operations Window(spans) would keep.
func (h *History) OpsWithin(spans []Span) int {
	n := 0
	for i := range h.Ops {
		if h.Ops[i].within(spans) {
			n++
		}
	}
	return n
}

// OpsCounter returns OpsWithin for many questions about one history: where
// the operations come in order of invocation (as FromEvents and Load give
// them), it reads only those invoked within each span (a binary search),
// not every operation; otherwise it is OpsWithin.
func (h *History) OpsCounter() func(spans []Span) int {
	if !sort.SliceIsSorted(h.Ops, func(i, j int) bool { return h.Ops[i].Call < h.Ops[j].Call }) {
		return h.OpsWithin
	}
	return func(spans []Span) int {
		n := 0
		for k, s := range spans {
			i := sort.Search(len(h.Ops), func(i int) bool { return h.Ops[i].Call >= s.From })
			for ; i < len(h.Ops) && h.Ops[i].Call <= s.To; i++ {
				// (Each operation once: counted in the first span that
				// holds it.)
				if o := &h.Ops[i]; o.within(spans[k:k+1]) && !o.within(spans[:k]) {
					n++
				}
			}
		}
		return n
	}
}

// within reports whether o lies in one of spans: invoked and completed in
// it, or, never completed, invoked in it (what Window keeps).
func (o *Operation) within(spans []Span) bool {
	for _, s := range spans {
		if s.contains(o.Call) && (o.Completed == Never || s.contains(o.Completed)) {
			return true
		}
	}
	return false
}
