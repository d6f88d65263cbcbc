package checker

import (
	"fmt"
	"sort"

	"github.com/locktest/locktest/history"
)

// KindCheckThenAct: a client that checks its own lease validity found its
// lease valid, was stopped between that check and its write (a pause at
// its after-check fault point), and its write landed after the lease had
// run out. No check on the client's side can close that gap: it is the
// check-then-act gap of every lease, by design, shown (severity info) to
// explain the double holders and lost updates it causes, never counted as
// a client bug.
const KindCheckThenAct Kind = "check-then-act"

// checkUsedAfterValidity finds, in runs whose clients check their own lease
// validity (RunInfo.ChecksValidity), reads and writes with outcome ok that
// completed after the client's validity had ended (Hold.ValidUntil, plus
// slack for the rounding of Valid to whole milliseconds and the delay of the
// client's answer). The controller performs a read or write when the client
// answers it, so such a client used the resource when, by its own account,
// it no longer held the lock: a bug of the client, whatever the lock did.
// Unless the client was paused between its check and its write (a fault at
// its after-check point that began while the write was in flight): that
// write is the check-then-act gap (KindCheckThenAct), no bug.
func checkUsedAfterValidity(f *facts, slack int64) (Property, []Anomaly) {
	h := f.h
	p := Property{Name: string(KindUsedAfterValidity), Engine: "validity replay", Status: Pass}
	if !h.Info.ChecksValidity {
		p.Status = Skipped
		p.Detail = "the clients do not check their lease validity"
		return p, nil
	}
	byClient := map[int][]*Hold{}
	carry := 0
	for k := range f.holds {
		hd := &f.holds[k]
		if hd.ValidUntil != 0 {
			byClient[hd.Client] = append(byClient[hd.Client], hd)
			carry++
		}
	}
	var out []Anomaly
	gaps := 0
	for _, i := range f.uses {
		op := &h.Ops[i]
		hds := byClient[op.Client]
		// The hold in which the use was invoked: the last one started by then.
		k := sort.Search(len(hds), func(k int) bool { return hds[k].Start > op.Call })
		if k == 0 {
			continue
		}
		hd := hds[k-1]
		if op.Call >= hd.BelievedEnd || op.Return <= hd.ValidUntil+slack {
			continue
		}
		if a, ok := checkThenAct(f, op, hd); ok {
			out = append(out, a)
			gaps++
			continue
		}
		verb := "read"
		if op.Op == history.Write {
			verb = "wrote"
		}
		expl := fmt.Sprintf("client %d %s the resource at %s, %s after its own validity for the lock ended (acquired at %s, valid until %s by its own account): a client that checks its validity must stop using the resource once it ends, and this one did not",
			op.Client, verb, at(op.Return), span(op.Return-hd.ValidUntil), at(hd.Start), at(hd.ValidUntil))
		if s := clientFaultSentence(h, op.Client, hd.Start, op.Return); s != "" {
			expl += "; " + s
		}
		out = append(out, Anomaly{
			Kind:        KindUsedAfterValidity,
			Clients:     []int{op.Client},
			Start:       hd.ValidUntil,
			End:         op.Return,
			Ops:         []int64{hd.AcquireOp, op.OpID},
			Faults:      faultsDuring(h, hd.ValidUntil, op.Return),
			Explanation: expl + ".",
		})
	}
	sortAnomalies(out)
	p.Count = len(out) - gaps
	p.Detail = plural(carry, "hold carries", "holds carry") + " a validity"
	if gaps > 0 {
		p.Detail += fmt.Sprintf("; %s after the validity through the check-then-act gap (paused after the check: by design, no client bug)", plural(gaps, "write landed", "writes landed"))
	}
	if p.Count > 0 {
		p.Status = Fail
	}
	return p, out
}

// checkThenAct tells whether op, a use of the resource by a client that
// checks its validity, landed after that validity because the client was
// paused at its after-check point while op was in flight, and explains it:
// "client 1 found its lease valid at 1.05 s (0.90 s left), was paused
// between that check and its write (1.05 s–4.20 s); client 2 acquired the
// lock at 3.10 s; client 1's write landed at 4.20 s: the check-then-act
// gap".
//
// A use asked for once the validity had ended (by the harness's clock,
// which reads the end no earlier than the client's own) is never excused:
// the client's check came after that call, so it passed a lease that was
// over, and that is the client's bug whatever befell it afterwards.
func checkThenAct(f *facts, op *history.Operation, hd *Hold) (Anomaly, bool) {
	h := f.h
	if op.Call >= hd.ValidUntil {
		return Anomaly{}, false
	}
	for _, ft := range h.Faults {
		if ft.Client != op.Client || ft.Point != "after-check" || ft.Failed || ft.Start < op.Call || ft.Start > op.Return {
			continue
		}
		left := "its validity already over by our clock"
		if hd.ValidUntil > ft.Start {
			left = span(hd.ValidUntil-ft.Start) + " left"
		}
		verb := "read"
		if op.Op == history.Write {
			verb = "write"
		}
		expl := fmt.Sprintf("client %d found its lease valid at %s (%s), was paused between that check and its %s (%s–%s)",
			op.Client, at(ft.Start), left, verb, at(ft.Start), at(ft.End))
		clients := []int{op.Client}
		ops := []int64{hd.AcquireOp, op.OpID}
		var next *Hold // the first grant to another client during the gap
		for k := range f.holds {
			o := &f.holds[k]
			if o.Client != op.Client && o.Start > ft.Start && o.Start < op.Return && (next == nil || o.Start < next.Start) {
				next = o
			}
		}
		if next != nil {
			expl += fmt.Sprintf("; client %d acquired the lock at %s", next.Client, at(next.Start))
			clients = append(clients, next.Client)
			ops = append(ops, next.AcquireOp)
		}
		expl += fmt.Sprintf("; client %d's %s landed at %s, %s after its validity ended: the check-then-act gap. No check in the client closes it (a lease can run out between any check and the use it guards); only a fencing token checked by the resource does.",
			op.Client, verb, at(op.Return), span(op.Return-hd.ValidUntil))
		return Anomaly{
			Kind:        KindCheckThenAct,
			Clients:     clients,
			Start:       ft.Start,
			End:         op.Return,
			Ops:         ops,
			Faults:      faultsDuring(h, ft.Start, op.Return),
			Explanation: expl,
		}, true
	}
	return Anomaly{}, false
}
