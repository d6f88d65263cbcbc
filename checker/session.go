package checker

import (
	"slices"

	"github.com/locktest/locktest/history"
)

// LinkFaults are the faults that slow, stall or break one client's links
// (nemesis.NetSpeedFaults but slow-node): its heartbeats are late or lost
// while one is in place, as they are while it is paused or cut off.
var LinkFaults = []string{"delay", "stall", "reset", "bandwidth", "loss"}

// ConnectionCuttingFaults are the link faults that end the connections of
// the client they strike: a session without heartbeats (a MariaDB
// connection) ends with them.
var ConnectionCuttingFaults = []string{"stall", "reset"}

// SlowNodeFault delays one server's links from every client: the session a
// holder keeps on that server gets its heartbeats late.
const SlowNodeFault = "slow-node"

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
// a partition that cuts it off, its crash, a link fault that holds them
// back: LinkFaults) or on the servers (a frozen, killed, cut-off or slow
// server may be the one a's session talks to). A grant
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
		server := f.Name == "pause-server" || f.Name == "kill" || f.Name == "failover" || f.Name == "partition" && f.Client == 0 || f.Name == SlowNodeFault
		client := f.Client == a.Client && (f.Name == "pause" || f.Name == "partition" || f.Name == "crash-client" || slices.Contains(LinkFaults, f.Name))
		switch {
		case !info.Renews:
			// No heartbeat to stop: only a server that lost its
			// sessions (a killed replica kept the primary's), or a's
			// connection closed under it (a stall closes its connections
			// as it heals; a reset resets them).
			if sessionCut(info, f) || f.Name == "partition" && f.Client == 0 || f.Client == a.Client && slices.Contains(ConnectionCuttingFaults, f.Name) {
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
