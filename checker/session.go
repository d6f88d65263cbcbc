package checker

import "github.com/locktest/locktest/history"

// Causes of a double holder of a session-based lock (RunInfo.Renews: a
// ZooKeeper session or an etcd lease that the client keeps alive).
const (
	// CauseSessionExpired: the earlier holder was frozen or cut off (a
	// client fault on it) long enough before the later grant for its
	// session to expire: the lock was lost by design, and the holder went
	// on believing in it.
	CauseSessionExpired Cause = "session-expired"
	// CauseSessionAlive: the later grant came while the earlier holder's
	// session was surely still alive (kept alive, no fault on its client
	// long enough to let it expire): the lock service broke its promise.
	CauseSessionAlive Cause = "session-alive"
)

// SessionCause attributes the double holder of holds a (the earlier) and b
// in a run whose lock lives in a session (RunInfo.Session).
//
// A renewed session (RunInfo.Renews: heartbeats or keep-alives every
// TTL/3, as the ZooKeeper and etcd clients send them) expires TTL after the
// last heartbeat the server heard, and the client sent one at most TTL/3
// before its heartbeats were stopped at F, so it cannot have expired
// before F + 2/3 TTL. Heartbeats stop with a fault on a's client (a pause,
// a partition that cuts it off, its crash) or on the servers (a frozen,
// killed or cut-off server may be the one a's session talks to). A grant
// to b at or after F + 2/3 TTL for such a fault that began before b's grant
// and ended after a's acquire is CauseSessionExpired.
//
// A session without heartbeats (a MariaDB connection) ends when the server
// closes it, idle for RunInfo.IdleTimeoutMillis (a's connection is idle
// from its acquire on: a grant to b at or after a.AcquireCall + the idle
// timeout), or when a server fault ends the server's sessions (a kill, a
// failover, a partition) after a's acquire and before b's grant: both are
// CauseSessionExpired.
//
// Any other is CauseSessionAlive: the session was kept alive, and the lock
// service broke its promise.
func SessionCause(h *history.History, a, b *Hold) Cause {
	info := h.Info
	ttl := info.TTLMillis * 1e6
	if idle := info.IdleTimeoutMillis * 1e6; idle > 0 && b.Start >= a.AcquireCall+idle {
		return CauseSessionExpired
	}
	for _, f := range h.Faults {
		if f.Failed || f.Start >= b.Start || f.End <= a.AcquireCall {
			continue
		}
		server := f.Name == "pause-server" || f.Name == "kill" || f.Name == "failover" || f.Name == "partition" && f.Client == 0
		client := f.Client == a.Client && (f.Name == "pause" || f.Name == "partition" || f.Name == "crash-client")
		switch {
		case !info.Renews:
			// No heartbeat to stop: only a server that lost its
			// sessions (a killed replica kept the primary's).
			if sessionCut(info, f) || f.Name == "partition" && f.Client == 0 {
				return CauseSessionExpired
			}
		case server || client:
			if b.Start >= max(f.Start, a.AcquireCall)+ttl*2/3 {
				return CauseSessionExpired
			}
		}
	}
	return CauseSessionAlive
}
