package reports

import "github.com/locktest/locktest/checker"

// causeWords says in plain words what a double holder's cause
// (checker.Anomaly.Cause) means; "" for no cause.
func causeWords(cause string) string {
	switch checker.Cause(cause) {
	case checker.CauseLeaseExpired:
		return "the earlier holder's lease could have run out before the lock was granted again, and that holder went on as if it still held the lock (e.g. it was paused past its TTL). Only fencing tokens protect against this."
	case checker.CauseLeaseBroken:
		return "the lock service broke its promise: it granted the lock again before the earlier holder's lease could have expired on a correct clock (a clock jump, a failover, lost state)."
	case checker.CauseSessionExpired:
		return "the earlier holder's session could have ended before the lock was granted again (the holder was frozen or cut off long enough for it to expire, its connection sat idle longer than the server keeps one, or a server fault ended the server's sessions): lost by design, and that holder went on as if it still held the lock. Only fencing tokens protect against this."
	case checker.CauseSessionAlive:
		return "the lock service broke its promise: it granted the lock again while the earlier holder's session was surely still alive (kept alive, no fault on its client long enough to let it expire)."
	case checker.CauseUnknown:
		return "the lease is renewed while its holder runs and the renewals are not recorded, so whether it had run out before the lock was granted again cannot be told."
	case "":
		return ""
	}
	return cause
}

// causeShort is a cause's label in tight places (matrix cells, tables).
func causeShort(cause string) string {
	switch checker.Cause(cause) {
	case checker.CauseLeaseExpired:
		return "lease expired (by design)"
	case checker.CauseLeaseBroken:
		return "lease broken (service at fault)"
	case checker.CauseSessionExpired:
		return "session expired (by design)"
	case checker.CauseSessionAlive:
		return "session alive (service at fault)"
	case checker.CauseUnknown:
		return "cause unknown (renewed lease)"
	}
	return cause
}
