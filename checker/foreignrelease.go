package checker

import (
	"fmt"

	"github.com/locktest/locktest/history"
)

// isForeignRelease reports whether op is a successful release that, by the
// server's own account (Removed), deleted another owner's key.
func isForeignRelease(op *history.Operation) bool {
	return op.Op == history.Release && op.Type == history.OK &&
		op.Removed != "" && op.Removed != "-" && op.Removed != op.Owner
}

// checkForeignRelease finds releases that deleted another client's key. The
// victim is the client whose successful acquire carried the removed owner id.
func checkForeignRelease(f *facts) (Property, []Anomaly) {
	h := f.h
	p := Property{Name: string(KindForeignRelease), Engine: "release replay", Status: Pass}
	var out []Anomaly
	var foreign []int
	for _, i := range f.releases {
		if isForeignRelease(&h.Ops[i]) {
			foreign = append(foreign, i)
		}
	}
	var owners map[string]int // removed owner id -> index of the last successful acquire with it
	if len(foreign) > 0 {
		owners = acquireOwners(h, f.lock, foreign)
	}
	for _, i := range foreign {
		op := &h.Ops[i]
		a := Anomaly{
			Kind:    KindForeignRelease,
			Clients: []int{op.Client},
			Start:   op.Call,
			End:     op.Return,
			Ops:     []int64{op.OpID},
			Faults:  faultsDuring(h, op.Call, op.Return),
		}
		who := "its own"
		if op.Owner != "" {
			who = fmt.Sprintf("its own (owner %s)", op.Owner)
		}
		if vi, ok := owners[op.Removed]; ok {
			v := &h.Ops[vi]
			a.Clients = append(a.Clients, v.Client)
			a.Ops = append(a.Ops, v.OpID)
			a.Explanation = fmt.Sprintf("client %d's release, called at %s, returned ok at %s, but the server deleted the key of client %d (owner %s), which had acquired the lock at %s, instead of %s.",
				op.Client, at(op.Call), at(op.Return), v.Client, op.Removed, at(v.Return), who)
		} else {
			a.Explanation = fmt.Sprintf("client %d's release, called at %s, returned ok at %s, but the server deleted the key of owner %s, which no successful acquire in the history carries, instead of %s.",
				op.Client, at(op.Call), at(op.Return), op.Removed, who)
		}
		if s := clientFaultSentence(h, op.Client, op.Call, op.Return); s != "" {
			a.Explanation += " Meanwhile " + s + "."
		}
		out = append(out, a)
	}
	p.Count = len(out)
	if len(out) > 0 {
		p.Status = Fail
	}
	return p, out
}

// acquireOwners maps the owner ids the releases removed to the last
// successful acquire that carried each.
func acquireOwners(h *history.History, lock, releases []int) map[string]int {
	want := map[string]bool{}
	for _, i := range releases {
		want[h.Ops[i].Removed] = true
	}
	m := map[string]int{}
	for _, i := range lock {
		op := &h.Ops[i]
		if op.Op == history.Acquire && op.Type == history.OK && want[op.Owner] {
			m[op.Owner] = i
		}
	}
	return m
}
