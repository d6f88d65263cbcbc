package checker

import (
	"fmt"

	"github.com/locktest/locktest/history"
)

// checkFencing replays the writes' fencing tokens in the order the resource
// applied them. An accepted write whose token is lower than that of an
// earlier accepted write is a stale write the resource let through (a
// violation); a write the resource rejected as stale is fencing doing its
// job (info). Runs whose writes carry no token are skipped.
func checkFencing(f *facts) (Property, []Anomaly) {
	h, writes := f.h, f.writes
	p := Property{Name: "fencing", Engine: "token replay", Status: Pass}
	var out []Anomaly
	tokens := false
	maxTok, maxAt := int64(0), -1 // highest accepted token and its write
	accepted, rejected := 0, 0
	for _, i := range writes {
		op := &h.Ops[i]
		if op.Token == nil {
			continue
		}
		tokens = true
		tok := *op.Token
		switch {
		case op.Type == history.OK:
			if maxAt >= 0 && tok < maxTok {
				m := &h.Ops[maxAt]
				accepted++
				out = append(out, Anomaly{
					Kind:    KindStaleWriteAccepted,
					Clients: []int{op.Client, m.Client},
					Start:   op.Call,
					End:     op.Return,
					Ops:     []int64{op.OpID, m.OpID},
					Faults:  faultsDuring(h, op.Call, op.Return),
					Explanation: fmt.Sprintf("the resource accepted client %d's write with token %d at %s although client %d had already written with token %d at %s.",
						op.Client, tok, at(op.Return), m.Client, maxTok, at(m.Return)),
				})
			}
			if maxAt < 0 || tok > maxTok {
				maxTok, maxAt = tok, i
			}
		case op.Type == history.Fail && op.Reason == history.ReasonStaleToken:
			rejected++
			a := Anomaly{
				Kind:    KindStaleWriteRejected,
				Clients: []int{op.Client},
				Start:   op.Call,
				End:     op.Return,
				Ops:     []int64{op.OpID},
				Faults:  faultsDuring(h, op.Call, op.Return),
			}
			if maxAt >= 0 {
				m := &h.Ops[maxAt]
				a.Clients = append(a.Clients, m.Client)
				a.Ops = append(a.Ops, m.OpID)
				a.Explanation = fmt.Sprintf("the resource rejected client %d's write with token %d at %s: client %d had written with token %d at %s. Fencing stopped a stale holder.",
					op.Client, tok, at(op.Return), m.Client, maxTok, at(m.Return))
			} else {
				a.Explanation = fmt.Sprintf("the resource rejected client %d's write with token %d at %s as stale.", op.Client, tok, at(op.Return))
			}
			out = append(out, a)
		}
	}
	if !tokens {
		p.Status = Skipped
		p.Detail = "no write carries a fencing token"
		return p, nil
	}
	p.Count = len(out)
	p.Detail = fmt.Sprintf("%s accepted, %s rejected",
		plural(accepted, "stale write", "stale writes"), plural(rejected, "stale write", "stale writes"))
	if accepted > 0 {
		p.Status = Fail
	}
	return p, out
}
