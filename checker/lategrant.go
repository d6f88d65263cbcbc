package checker

import (
	"fmt"

	"github.com/locktest/locktest/history"
)

// lateGrantSentence names a grant whose answer reached client b after its
// lease had run out on the harness's clock: a link fault on b's links held
// every answer back at least f.Held (history.Fault.Held), so the server
// granted b's acquire f.Held or more before the answer arrived; when that
// is longer than the lease, b began to use a lease that was over. "" when
// no such fault covers b's answer, or the hold was shorter than the lease
// (the grant is then only possibly late: the caller says so).
func lateGrantSentence(h *history.History, b *Hold) string {
	ttl := h.Info.TTLMillis * 1e6
	if ttl <= 0 || h.Info.Renews {
		return ""
	}
	for _, f := range h.Faults {
		// The answer crossed the links while the fault held every answer
		// back (it arrived after the hold could have begun and before the
		// healing, which lets a held answer out at once).
		if f.Held <= ttl || f.Failed || f.Client != b.Client || b.Start < f.Start+f.Held || b.Start >= f.End {
			continue
		}
		granted := b.Start - f.Held
		return fmt.Sprintf("client %d was granted the lock at %s at the latest (the %s fault held its answers back %s), answer arrived at %s, lease %s: used after it expired, %s after its lease ran out.",
			b.Client, at(granted), f.Name, span(f.Held), at(b.Start), span(ttl), span(b.Start-granted-ttl))
	}
	return ""
}

// inFlightGranted reports whether the acquire a link fault aimed at an
// acquire in flight struck (its client's acquire in flight when the fault
// began, else its next one) was granted or may have been.
func inFlightGranted(h *history.History, f history.Fault) bool {
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Client != f.Client || op.Op != history.Acquire || op.Return < f.Start {
			continue
		}
		return op.Type != history.Fail
	}
	return false
}
