package checker

import "github.com/locktest/locktest/history"

// Causes of a double holder of a session-based lock (RunInfo.Renews: a
// ZooKeeper session or an etcd lease that the client keeps alive).
const (
	// CauseSessionExpired: the earlier holder was frozen or cut off (a
	// client fault on it) long enough before the later grant for its
	// session to expire: the lock was lost by design, and the holder went
	// on believing in it.
	CauseSessionExpired = "session-expired"
	// CauseSessionAlive: the later grant came while the earlier holder's
	// session was surely still alive (kept alive, no fault on its client
	// long enough to let it expire): the lock service broke its promise.
	CauseSessionAlive = "session-alive"
)

// SessionCause attributes the double holder of holds a (the earlier) and b
// in a run whose clients keep a session alive (heartbeats or keep-alives
// every TTL/3, as the ZooKeeper and etcd clients do). The server expires a
// session TTL after the last heartbeat it heard, and the client sent one at
// most TTL/3 before its heartbeats were stopped at F, so the session cannot
// have expired before F + 2/3 TTL. Heartbeats stop with a fault on a's
// client (a pause, a partition that cuts it off, its crash) or on the
// servers (a frozen, killed or cut-off server may be the one a's session
// talks to). A grant to b at or after F + 2/3 TTL for such a fault that
// began before b's grant and ended after a's acquire is
// CauseSessionExpired; any other is CauseSessionAlive: the session was
// kept alive, and the lock service broke its promise.
func SessionCause(h *history.History, a, b *Hold) string {
	ttl := h.Info.TTLMillis * 1e6
	for _, f := range h.Faults {
		if f.Start >= b.Start || f.End <= a.AcquireCall {
			continue
		}
		switch {
		case f.Client == a.Client && f.Name != "clock-client" && f.Name != "failover":
		case f.Client == 0 && (f.Name == "pause-server" || f.Name == "kill" || f.Name == "partition"):
		default:
			continue
		}
		from := max(f.Start, a.AcquireCall)
		if b.Start >= from+ttl*2/3 {
			return CauseSessionExpired
		}
	}
	return CauseSessionAlive
}
