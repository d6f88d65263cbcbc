package checker

import (
	"fmt"
	"strings"

	"github.com/locktest/locktest/history"
)

// checkDoubleHolder finds holds of different clients that overlap: two
// clients that surely believed they held the lock at once (on a read-write
// lock, unless both held it to read). One anomaly per
// overlapping pair. The sweep keeps the holds still open at each start; each
// of them overlaps the new hold, so the work is O(holds + pairs) after the
// sort Holds did.
//
// In lease runs each anomaly gets a Cause (see leaseCause).
func checkDoubleHolder(f *facts, slack int64) (Property, []Anomaly) {
	h, holds := f.h, f.holds
	p := Property{Name: string(KindDoubleHolder), Engine: "interval sweep", Status: Pass}
	var out []Anomaly
	var active []int // indices into holds, still open
	for i := range holds {
		b := &holds[i]
		kept := active[:0]
		for _, j := range active {
			if holds[j].End > b.Start {
				kept = append(kept, j)
			}
		}
		active = kept
		for _, j := range active {
			a := &holds[j]
			if a.Client == b.Client {
				continue // a restarted client's stale hold: not two clients
			}
			if a.Shared && b.Shared {
				continue // two readers of a read-write lock
			}
			out = append(out, doubleHolderAnomaly(h, a, b, slack))
		}
		if b.End > b.Start {
			active = append(active, i)
		}
	}
	p.Count = len(out)
	if len(out) > 0 {
		p.Status = Fail
	}
	return p, out
}

// leaseCause classifies a double holder in a lease run: a started first,
// b's hold started while a still believed it held the lock. Each grant
// happened at some time between its acquire's invocation and its return,
// so either grant may have come first (b's reply may have arrived late).
//
//   - CauseLeaseBroken when neither order lets a lease run out first: b's
//     grant came (no later than b.Start) before a's lease could have
//     expired on correct clocks (a.AcquireCall + TTL - slack), and a's
//     grant came before b's could have (b.AcquireCall + TTL - slack).
//   - Otherwise CauseLeaseExpired: one lease could have run out before the
//     other grant and its holder kept believing in it (paused past its
//     TTL, or it got its grant's reply late); the second result says
//     which hold was the stale one (a or b).
//   - A lease renewed while its holder runs (RunInfo.Renews, Redisson's
//     watchdog) could have lapsed only once the renewals stopped: a fault
//     on a's client that began at F (a pause, a partition, a crash) stops
//     them, and the last renewal was at most TTL/3 before F, so a grant to
//     b at or after F + 2/3 TTL - slack is CauseLeaseExpired. b's lease
//     can lapse before its first renewal, which its client starts only
//     once the reply arrived: the reversed order is as for any lease.
//     Any other is CauseUnknown: the renewals are not in the history.
//
// A lock that lives in a session (RunInfo.Session) that is renewed
// (ZooKeeper, etcd) or that the server ends when idle (MariaDB's
// connections) is classified by SessionCause instead.
//
// It returns "" outside lease and session runs.
func leaseCause(h *history.History, a, b *Hold, slack int64) (cause Cause, stale *Hold) {
	info := h.Info
	ttl := info.TTLMillis * 1e6
	if info.Session && (info.Renews && ttl > 0 || info.IdleTimeoutMillis > 0) {
		return SessionCause(h, a, b), a
	}
	if !info.Lease || ttl <= 0 {
		return "", nil
	}
	aFirst := b.Start >= a.AcquireCall+ttl-slack // a's lease may have run out before b's grant
	bFirst := a.Start >= b.AcquireCall+ttl-slack // b granted first, its lease may have run out before a's grant
	switch {
	case !aFirst && !bFirst:
		return CauseLeaseBroken, nil
	case info.Renews && bFirst:
		return CauseLeaseExpired, b
	case info.Renews && renewalsStopped(h, a, b, ttl, slack):
		return CauseLeaseExpired, a
	case info.Renews:
		return CauseUnknown, nil
	case aFirst:
		return CauseLeaseExpired, a
	}
	return CauseLeaseExpired, b
}

// renewalsStopped reports whether a fault on a's client (a pause, a
// partition, its crash) began at some F, after a's acquire was asked, such
// that b's hold started at or after F + 2/3 TTL - slack: a's renewed lease
// could have lapsed by then.
func renewalsStopped(h *history.History, a, b *Hold, ttl, slack int64) bool {
	for _, f := range h.Faults {
		if f.Failed || f.Client != a.Client || f.Start >= b.Start || f.End <= a.AcquireCall {
			continue
		}
		if f.Name == "clock-client" || f.Name == "failover" {
			continue
		}
		if b.Start >= max(f.Start, a.AcquireCall)+ttl*2/3-slack {
			return true
		}
	}
	return false
}

// doubleHolderAnomaly describes a, which started first, overlapping b.
func doubleHolderAnomaly(h *history.History, a, b *Hold, slack int64) Anomaly {
	end := min(a.End, b.End)
	cause, stale := leaseCause(h, a, b, slack)
	ttl := h.Info.TTLMillis * 1e6
	var sb strings.Builder
	fmt.Fprintf(&sb, "client %d acquired the lock at %s while client %d, which acquired it at %s",
		b.Client, at(b.Start), a.Client, at(a.Start))
	switch cause {
	case CauseLeaseBroken:
		// b's grant (before b.Start) came before a's lease could expire
		// (no earlier than a.AcquireCall+ttl-slack): the server broke it.
		fmt.Fprintf(&sb, " (lease %s, still valid until %s at least)", span(ttl), at(a.AcquireCall+ttl-slack))
	case CauseLeaseExpired:
		if stale == a && !h.Info.Renews {
			fmt.Fprintf(&sb, " (lease %s, so expired by %s at the latest)", span(ttl), at(a.Start+ttl))
		} else {
			fmt.Fprintf(&sb, " (lease %s)", span(ttl))
		}
	case CauseUnknown:
		fmt.Fprintf(&sb, " (lease %s, renewed while its holder runs)", span(ttl))
	case CauseSessionExpired, CauseSessionAlive:
		if ttl > 0 {
			fmt.Fprintf(&sb, " (session timeout %s)", span(ttl))
		}
	}
	switch a.EndReason {
	case "release":
		fmt.Fprintf(&sb, ", still believed it held it until %s", at(a.End))
	case "client-exit":
		fmt.Fprintf(&sb, ", still believed it held it until its process ended at %s", at(a.End))
	case "declined":
		fmt.Fprintf(&sb, ", still used it until %s (then it declined the resource, knowing the lock lost)", at(a.End))
	case "validity":
		fmt.Fprintf(&sb, ", still used it until %s (its validity ended at %s)", at(a.End), at(a.ValidUntil))
	default:
		fmt.Fprintf(&sb, ", still believed it held it at the end of the history (%s)", at(a.End))
	}
	if s := clientFaultSentence(h, a.Client, a.Start, end); s != "" {
		sb.WriteString("; " + s)
	}
	sb.WriteString(".")
	switch cause {
	case CauseLeaseBroken:
		fmt.Fprintf(&sb, " The lease broke its promise: client %d was granted the lock before client %d's lease could have run out on correct clocks (a clock jump, a failover or lost state on the server).", b.Client, a.Client)
	case CauseLeaseExpired:
		switch {
		case stale == b:
			if s := lateGrantSentence(h, b); s != "" {
				sb.WriteString(" Lost by design: " + s)
				break
			}
			fmt.Fprintf(&sb, " Lost by design: client %d asked for the lock at %s and its answer came only at %s, so its grant could have come first and its lease could have run out before client %d was granted the lock; client %d then used a lease that had already expired.", b.Client, at(b.AcquireCall), at(b.Start), a.Client, b.Client)
		case stale == a && lateGrantSentence(h, a) != "":
			// a's own grant came late: its lease was over as it began.
			sb.WriteString(" Lost by design: " + lateGrantSentence(h, a))
		case h.Info.Renews:
			fmt.Fprintf(&sb, " Lost by design: a fault on client %d stopped the renewals of its lease long enough before client %d was granted the lock for the lease to run out, and client %d went on as if it still held it.", a.Client, b.Client, a.Client)
		default:
			fmt.Fprintf(&sb, " Lost by design: client %d's lease could have run out before client %d was granted the lock, and client %d went on as if it still held it.", a.Client, b.Client, a.Client)
		}
	case CauseSessionExpired:
		if idle := h.Info.IdleTimeoutMillis * 1e6; idle > 0 && b.Start >= a.AcquireCall+idle {
			fmt.Fprintf(&sb, " Lost by design: client %d's connection sat idle from its acquire until client %d's grant, %s, longer than the server keeps an idle connection (wait_timeout %s); the server closed it and freed the lock with it, and client %d went on as if it still held it.", a.Client, b.Client, span(b.Start-a.Start), span(idle), a.Client)
		} else if f, ok := sessionCutDuring(h, a, b); ok {
			fmt.Fprintf(&sb, " Lost by design: the %s of %s at %s ended every session of the server, and with client %d's session its lock, before client %d's grant; client %d went on as if it still held it.", f.Name, f.Target, at(f.Start), a.Client, b.Client, a.Client)
		} else {
			fmt.Fprintf(&sb, " Lost by design: a fault cut client %d off from the servers, held its heartbeats back (or ended the server's sessions) before client %d's grant, long enough for its session, and with it the lock, to end, and client %d went on as if it still held it.", a.Client, b.Client, a.Client)
		}
	case CauseSessionAlive:
		fmt.Fprintf(&sb, " The lock service broke its promise: client %d was granted the lock while client %d's session was surely still alive (no fault could have stopped its heartbeats long enough).", b.Client, a.Client)
	case CauseUnknown:
		fmt.Fprintf(&sb, " Whether the lease broke its promise is unknown: client %d's lease is renewed while it runs and the renewals are not recorded, so it may have lapsed (if client %d stopped renewing, e.g. paused) or been broken.", a.Client, a.Client)
	}
	return Anomaly{
		Kind:        KindDoubleHolder,
		Clients:     []int{a.Client, b.Client},
		Start:       b.Start,
		End:         end,
		Ops:         []int64{a.AcquireOp, b.AcquireOp},
		Faults:      faultsDuring(h, b.Start, end),
		Cause:       cause,
		Explanation: sb.String(),
	}
}

// checkLeaseContract grades the double holders of a lease run by cause: it
// fails when any of them is lease-broken (the lock service granted the lock
// while an earlier lease was surely still valid); lease-expired ones are
// the lease working as designed against a client that outlived it, and do
// not fail it.
func checkLeaseContract(info history.RunInfo, doubles []Anomaly) Property {
	p := Property{Name: "lease-contract", Engine: "interval sweep", Status: Pass}
	if !info.Lease || info.TTLMillis <= 0 {
		p.Status = Skipped
		p.Detail = "the lock has no lease"
		return p
	}
	n := map[Cause]int{}
	for _, a := range doubles {
		n[a.Cause]++
	}
	p.Count = n[CauseLeaseBroken] + n[CauseSessionAlive]
	if p.Count > 0 {
		p.Status = Fail
	}
	if len(doubles) == 0 {
		p.Detail = "no double holder"
		return p
	}
	if info.Session && info.Renews {
		p.Detail = plural(len(doubles), "double holder", "double holders") + fmt.Sprintf(
			": %d session-alive (granted while the holder's session was surely alive), %d session-expired (lost by design)",
			n[CauseSessionAlive], n[CauseSessionExpired])
		return p
	}
	parts := []string{
		fmt.Sprintf("%d lease-broken", n[CauseLeaseBroken]),
		fmt.Sprintf("%d lease-expired (lost by design)", n[CauseLeaseExpired]),
	}
	if n[CauseUnknown] > 0 {
		parts = append(parts, fmt.Sprintf("%d unknown (renewed lease)", n[CauseUnknown]))
	}
	p.Detail = plural(len(doubles), "double holder", "double holders") + ": " + strings.Join(parts, ", ")
	return p
}

// sessionCutDuring returns the first fault that ended every session
// (sessionCut) during a's hold, before b's grant.
func sessionCutDuring(h *history.History, a, b *Hold) (history.Fault, bool) {
	for _, f := range h.Faults {
		if sessionCut(h.Info, f) && cutDuring(f.Start, a) && f.Start < b.Start {
			return f, true
		}
	}
	return history.Fault{}, false
}
