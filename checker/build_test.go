package checker

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// hb builds small histories for tests. Times are in milliseconds.
type hb struct {
	info   history.RunInfo
	evs    []history.Event
	op     int64
	fault  int64
	noEnd  bool
	endsAt float64
	note   string // failoverCells: the end of the promotion note
}

func newHB() *hb {
	return &hb{info: history.RunInfo{FormatVersion: history.FormatVersion, Lock: "test", Nemeses: []string{"none"}, Clients: 3}}
}

func ms(t float64) int64 { return int64(t * 1e6) }

func (b *hb) add(t float64, e history.Event) {
	e.Time = ms(t)
	b.evs = append(b.evs, e)
	b.endsAt = max(b.endsAt, t)
}

// o adds an operation. ret < 0 means it never completes; typ Info with
// ret >= 0 records an indeterminate completion. edit may set fields of the
// invoke and the completion.
func (b *hb) o(c int, op history.Op, call, ret float64, typ history.Type, edit func(inv, done *history.Event)) int64 {
	b.op++
	inv := history.Event{Type: history.Invoke, Client: c, Op: op, OpID: b.op}
	done := history.Event{Type: typ, Client: c, Op: op, OpID: b.op}
	if edit != nil {
		edit(&inv, &done)
	}
	b.add(call, inv)
	if ret >= 0 {
		b.add(ret, done)
	}
	return b.op
}

func (b *hb) acq(c int, call, ret float64, owner string) int64 {
	return b.o(c, history.Acquire, call, ret, history.OK, func(_, d *history.Event) { d.Owner = owner })
}

// acqValid adds a successful acquire whose client considers its lease
// valid for valid ms after the return.
func (b *hb) acqValid(c int, call, ret float64, owner string, valid float64) int64 {
	return b.o(c, history.Acquire, call, ret, history.OK, func(_, d *history.Event) { d.Owner, d.Valid = owner, ms(valid) })
}

// use adds a read (write false) or write of the resource by c; typ Fail
// means the client declined it ("not-held").
func (b *hb) use(c int, write bool, call, ret float64, typ history.Type) int64 {
	op := history.Read
	if write {
		op = history.Write
	}
	return b.o(c, op, call, ret, typ, func(_, d *history.Event) {
		if typ == history.Fail {
			d.Reason = history.ReasonNotHeld
		}
	})
}

func (b *hb) acqFail(c int, call, ret float64, reason string) int64 {
	return b.o(c, history.Acquire, call, ret, history.Fail, func(_, d *history.Event) { d.Reason = reason })
}

func (b *hb) acqInfo(c int, call, ret float64) int64 {
	return b.o(c, history.Acquire, call, ret, history.Info, func(_, d *history.Event) { d.Error = "timeout" })
}

// rel adds a release; typ OK sets Removed to removed, typ Fail sets reason
// not-owner.
func (b *hb) rel(c int, call, ret float64, owner string, typ history.Type, removed string) int64 {
	return b.o(c, history.Release, call, ret, typ, func(i, d *history.Event) {
		i.Owner = owner
		d.Removed = removed
		if typ == history.Fail {
			d.Reason = history.ReasonNotOwner
		}
	})
}

// write adds a write; tok < 0 means no token.
func (b *hb) write(c int, call, ret float64, typ history.Type, value, prev, tok int64) int64 {
	return b.o(c, history.Write, call, ret, typ, func(i, d *history.Event) {
		if tok >= 0 {
			i.Token = history.Int64(tok)
		}
		if typ == history.OK {
			d.Value, d.Prev = history.Int64(value), history.Int64(prev)
		} else {
			d.Reason = history.ReasonStaleToken
		}
	})
}

// faultAt adds a fault; a target "client N" names the client it hit, as
// the harness records it.
func (b *hb) faultAt(name, target string, start, end float64) {
	b.faultWith(name, target, start, end, "", "")
}

// faultWith adds a fault whose start and end say detail and endDetail (a
// negative end: never healed).
func (b *hb) faultWith(name, target string, start, end float64, detail, endDetail string) {
	b.fault++
	c, _ := clientTarget(target)
	b.add(start, history.Event{Type: history.FaultStart, Fault: name, FaultID: b.fault, Target: target, Client: c, Detail: detail})
	if end >= 0 {
		b.add(end, history.Event{Type: history.FaultEnd, Fault: name, FaultID: b.fault, Target: target, Client: c, Detail: endDetail})
	}
}

// pauseAt adds a pause of client 1 at fault point point, from start to
// end (ms).
func (b *hb) pauseAt(point string, start, end float64) {
	b.fault++
	b.add(start, history.Event{Type: history.FaultStart, Fault: "pause", FaultID: b.fault, Target: "client 1", Client: 1, Point: point})
	b.add(end, history.Event{Type: history.FaultEnd, Fault: "pause", FaultID: b.fault, Target: "client 1", Client: 1})
}

// checkThenActGap adds the check-then-act story: client 1 (validity 100
// ms) checked its lease at 50 ms and was paused before its write landed at
// 450 ms, after client 2 acquired the lock at 201 ms.
func (b *hb) checkThenActGap() {
	b.acqValid(1, 0, 1, "a", 100)
	b.use(1, false, 2, 3, history.OK)
	b.pauseAt("after-check", 50, 450)
	b.use(1, true, 49, 450, history.OK)
	b.acq(2, 200, 201, "b")
	b.rel(1, 451, 452, "a", history.Fail, "-")
}

func (b *hb) clientLife(c int, start, end float64) {
	b.add(start, history.Event{Type: history.ClientStart, Client: c, PID: 100 + c})
	if end >= 0 {
		b.add(end, history.Event{Type: history.ClientExit, Client: c, Detail: "killed"})
	}
}

// cycles adds n sequential acquire/release cycles of clients 1 and 2 from
// time t, 10 ms apart, and returns the time after them.
func (b *hb) cycles(n int, t float64) float64 {
	for i := range n {
		c := 1 + i%2
		owner := "bg" + string(rune('a'+i%26))
		b.acq(c, t, t+1, owner)
		b.rel(c, t+5, t+6, owner, history.OK, owner)
		t += 10
	}
	return t
}

func (b *hb) build(t *testing.T) *history.History {
	t.Helper()
	h, err := history.FromEvents(b.events())
	require.NoError(t, err)
	return h
}

// events returns the history's events, in order, header first.
func (b *hb) events() []history.Event {
	evs := []history.Event{{Type: history.Run, Info: &b.info}}
	body := slices.Clone(b.evs)
	slices.SortStableFunc(body, func(x, y history.Event) int { return cmpInt64(x.Time, y.Time) })
	evs = append(evs, body...)
	if !b.noEnd {
		evs = append(evs, history.Event{Type: history.RunEnd, Time: ms(b.endsAt + 1)})
	}
	for i := range evs {
		evs[i].Seq = int64(i)
	}
	return evs
}

func kinds(as []Anomaly) map[Kind]int {
	m := map[Kind]int{}
	for _, a := range as {
		m[a.Kind]++
	}
	return m
}
