package checker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
)

// Severity is how much an anomaly weighs: "violation" breaks the
// verdict; "contained" is a lock-level violation whose damage fencing
// tokens stopped; "info" is shown only.
type Severity string

// Anomaly severities.
const (
	SeverityViolation Severity = "violation"
	SeverityContained Severity = "contained"
	SeverityInfo      Severity = "info"
)

// lockLevel reports whether kind is a violation of the lock itself, whose
// damage fencing tokens can contain.
func lockLevel(kind Kind) bool {
	switch kind {
	case KindDoubleHolder, KindForeignRelease, KindReleaseOKOnExpired, KindNonLinearizable:
		return true
	}
	return false
}

// dataLevel reports whether kind is damage to the guarded resource.
func dataLevel(kind Kind) bool {
	return kind == KindLostUpdate || kind == KindStaleWriteAccepted
}

// Check decides, property by property, whether the lock kept its promises in
// history h, and gives the verdict:
//
//   - Unsafe when any anomaly is a violation. Lock-level anomalies
//     (double holder, foreign release, release ok on an expired lease,
//     non-linearizable) are violations, except in fenced runs without damage
//     to the resource (no lost update, no stale write accepted), where they
//     are "contained". Lost updates, accepted stale writes and deadlocks are
//     always violations; rejected stale writes are info.
//   - Inconclusive when nothing was violated but the run cannot vouch for the
//     lock: a property is unknown (e.g. the search timed out), too few
//     successful acquires or clients acquired, a nemesis never injected a
//     fault, or none of a nemesis's faults struck where it could matter
//     (see struck: a client fault on a holder, a server fault while the
//     lock was held, a failover promoting under a live lease).
//   - Safe otherwise.
//
// Check works from the history alone and never reports an unknown property
// as a pass.
func Check(h *history.History, opts Options) Result {
	return CheckContext(context.Background(), h, opts)
}

// CheckContext is Check, stopped when ctx is done: the properties decided
// by then keep their status, the others are Interrupted, and the verdict
// is never safe (a violation found before still makes it unsafe). It
// returns within about a second of ctx being done; Interrupted on the
// result says whether it was.
func CheckContext(ctx context.Context, h *history.History, opts Options) Result {
	opts = opts.withDefaults()
	r := Result{
		Lock:           h.Info.Lock,
		Nemeses:        append([]string{}, h.Info.Nemeses...),
		Seed:           h.Info.Seed,
		Fence:          h.Info.Fence,
		StartupMs:      h.Info.StartupMillis,
		ClusterReused:  h.Info.ClusterReused,
		Mirrors:        h.Info.Mirrors,
		Truncated:      h.Truncated,
		Interrupted:    h.Ended == history.EndedInterrupted,
		StoppedEarly:   h.Ended == history.EndedEarly,
		Anomalies:      []Anomaly{},
		FirstViolation: -1,
	}
	f := &facts{h: h}
	if ctx.Err() == nil {
		f = newFacts(h)
		r.Counts = f.counts
		r.Counts.FaultsOnHolder = faultsOnHolders(h, f.holds, int64(opts.Slack))
	}

	stopped := false
	run := func(name string, check func() (Property, []Anomaly)) {
		if stopped = stopped || ctx.Err() != nil; stopped {
			r.Properties = append(r.Properties, Property{Name: name, Status: Interrupted,
				Detail: "the check was interrupted before this property was decided"})
			return
		}
		t0 := time.Now()
		p, as := check()
		if ctx.Err() != nil && p.Status == Unknown {
			p.Status, stopped = Interrupted, true
		}
		p.Millis = float64(time.Since(t0).Nanoseconds()) / 1e6
		r.Properties = append(r.Properties, p)
		r.Anomalies = append(r.Anomalies, as...)
	}
	slack := int64(opts.Slack)
	var doubles []Anomaly
	run(string(KindDoubleHolder), func() (Property, []Anomaly) {
		p, as := checkDoubleHolder(f, slack)
		doubles = as
		return p, as
	})
	run("lease-contract", func() (Property, []Anomaly) { return checkLeaseContract(h.Info, doubles), nil })
	run(string(KindForeignRelease), func() (Property, []Anomaly) { return checkForeignRelease(f) })
	run(string(KindReleaseOKOnExpired), func() (Property, []Anomaly) { return checkReleaseOKOnExpired(f, slack) })
	run(string(KindUsedAfterValidity), func() (Property, []Anomaly) { return checkUsedAfterValidity(f, slack) })
	run(string(KindLostUpdate), func() (Property, []Anomaly) {
		p, as, final := checkLostUpdate(f)
		r.Counts.ResourceFinal = final
		return p, as
	})
	run("fencing", func() (Property, []Anomaly) { return checkFencing(f) })
	run("token-order", func() (Property, []Anomaly) { return checkTokenOrder(f) })
	run(string(KindDeadlock), func() (Property, []Anomaly) { return checkDeadlock(f, slack) })
	run("linearizable", func() (Property, []Anomaly) { return checkLinearizableCtx(ctx, f, opts) })
	if !stopped {
		r.Properties, r.Anomalies = appendReadWrite(f, r.Properties, r.Anomalies) // read-write runs only (readwrite.go)
	}
	r.CheckInterrupted = stopped

	setSeverities(&r)
	sortAnomalies(r.Anomalies)
	for _, a := range r.Anomalies {
		if a.Severity == SeverityViolation {
			r.FirstViolation = a.Start
			break
		}
	}
	r.Verdict, r.Why = verdict(h, &r, f.holds, opts)
	if h.Truncated {
		r.Why += " (history truncated)"
	}
	if r.Interrupted {
		r.Why += " (the run was interrupted before its time limit)"
	}
	return r
}

// setSeverities grades the anomalies and notes contained ones on their
// properties.
func setSeverities(r *Result) {
	damaged := false
	for _, a := range r.Anomalies {
		if dataLevel(a.Kind) {
			damaged = true
		}
	}
	contained := map[string]int{} // property name -> contained anomalies
	for i := range r.Anomalies {
		a := &r.Anomalies[i]
		switch {
		case a.Kind == KindStaleWriteRejected || a.Kind == KindCheckThenAct:
			a.Severity = SeverityInfo
		case a.Kind == KindDeadlock && a.Severity == SeverityInfo:
			// Unavailability explained by lost answers (checkDeadlock).
		case lockLevel(a.Kind) && r.Fence && !damaged:
			a.Severity = SeverityContained
			contained[propertyOf(a.Kind)]++
		default:
			a.Severity = SeverityViolation
		}
	}
	for i := range r.Properties {
		p := &r.Properties[i]
		if n := contained[p.Name]; n > 0 {
			note := "contained by fencing"
			if p.Detail != "" {
				note = p.Detail + "; " + note
			}
			p.Detail = note
		}
	}
}

func propertyOf(kind Kind) string {
	switch kind {
	case KindNonLinearizable:
		return "linearizable"
	case KindStaleWriteAccepted, KindStaleWriteRejected:
		return "fencing"
	case KindTokenReused, KindTokenRegressed:
		return "token-order"
	}
	return string(kind)
}

// sortAnomalies orders anomalies by start, then end, then kind.
func sortAnomalies(as []Anomaly) {
	sort.SliceStable(as, func(i, j int) bool {
		a, b := &as[i], &as[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Kind < b.Kind
	})
}

// kindNames are the kinds in the order Why lists them, with their names.
var kindNames = []struct {
	kind      Kind
	one, many string
}{
	{KindDoubleHolder, "double holder", "double holders"},
	{KindForeignRelease, "foreign release", "foreign releases"},
	{KindReleaseOKOnExpired, "release ok on an expired lease", "releases ok on expired leases"},
	{KindUsedAfterValidity, "use after validity (client bug)", "uses after validity (client bug)"},
	{KindLostUpdate, "lost update", "lost updates"},
	{KindStaleWriteAccepted, "stale write accepted", "stale writes accepted"},
	{KindNonLinearizable, "non-linearizable history", "non-linearizable histories"},
	{KindTokenReused, "fencing token granted twice", "fencing tokens granted twice"},
	{KindTokenRegressed, "fencing token lower than an earlier grant's", "fencing tokens lower than earlier grants'"},
	{KindRWExclusion, "writer overlapping another holder", "writers overlapping other holders"},
}

// summarize lists the anomalies of the given severity by kind:
// "2 double holders, 1 lost update"; double holders of a lease run say
// their causes: "3 double holders (1 lease-broken, 2 lease-expired)".
func summarize(as []Anomaly, severity Severity) string {
	n := map[Kind]int{}
	causes := map[Cause]int{}
	for _, a := range as {
		if a.Severity == severity {
			n[a.Kind]++
			if a.Kind == KindDoubleHolder && a.Cause != "" {
				causes[a.Cause]++
			}
		}
	}
	var parts []string
	for _, k := range kindNames {
		if c := n[k.kind]; c > 0 {
			part := plural(c, k.one, k.many)
			if k.kind == KindDoubleHolder && len(causes) > 0 {
				var cs []string
				for _, cause := range []Cause{CauseLeaseBroken, CauseSessionAlive, CauseLeaseExpired, CauseSessionExpired, CauseUnknown} {
					if m := causes[cause]; m > 0 {
						cs = append(cs, fmt.Sprintf("%d %s", m, cause))
					}
				}
				part += " (" + strings.Join(cs, ", ") + ")"
			}
			parts = append(parts, part)
		}
		delete(n, k.kind)
	}
	// A kind without a name still counts: a violation must never be
	// left out of the verdict.
	rest := make([]Kind, 0, len(n))
	for k := range n {
		if k != KindDeadlock {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}

func verdict(h *history.History, r *Result, holds []Hold, opts Options) (Verdict, string) {
	// Unsafe: any violation.
	safety := summarize(r.Anomalies, SeverityViolation)
	var deadlocks []int64
	for _, a := range r.Anomalies {
		if a.Kind == KindDeadlock && a.Severity == SeverityViolation {
			deadlocks = append(deadlocks, a.End-a.Start)
		}
	}
	if safety != "" || len(deadlocks) > 0 {
		var parts []string
		if safety != "" {
			parts = append(parts, safety)
		}
		switch len(deadlocks) {
		case 0:
		case 1:
			parts = append(parts, "liveness: deadlock of "+span(deadlocks[0]))
		default:
			parts = append(parts, fmt.Sprintf("liveness: %d deadlocks, the longest %s", len(deadlocks), span(slices.Max(deadlocks))))
		}
		return Unsafe, strings.Join(parts, "; ")
	}

	// Inconclusive: the run cannot vouch for the lock.
	var why []string
	for _, p := range r.Properties {
		if p.Status == Unknown || p.Status == Interrupted {
			why = append(why, fmt.Sprintf("%s %s: %s", p.Name, p.Status, p.Detail))
		}
	}
	c := &r.Counts
	if c.AcquiresOK < opts.MinAcquires {
		why = append(why, fmt.Sprintf("only %s (at least %d needed)", plural(c.AcquiresOK, "successful acquire", "successful acquires"), opts.MinAcquires))
	}
	if c.ClientsAcquired < 2 {
		if c.ClientsAcquired == 0 {
			why = append(why, "no client acquired the lock (at least 2 needed)")
		} else {
			why = append(why, "only 1 client acquired the lock (at least 2 needed)")
		}
	}
	why = append(why, nemesisGaps(h, holds, int64(opts.Slack))...)
	if h.Ended == history.EndedEarly {
		// The run was cut short for a violation that this check does not
		// find: the two checkers disagree, and a cut run vouches for
		// nothing.
		why = append(why, "the run was stopped early for a violation the online checker saw, which this check does not confirm (a disagreement between the checkers: please report it)")
	}
	if len(why) > 0 {
		return Inconclusive, strings.Join(why, "; ")
	}

	// Safe.
	faults := "no faults"
	switch {
	case c.FaultsOnHolder > 0:
		faults = plural(c.FaultsOnHolder, "fault", "faults") + " while the lock was held"
	case c.Faults > 0:
		faults = plural(c.Faults, "fault", "faults")
	}
	head := fmt.Sprintf("%s by %d clients, %s", plural(c.AcquiresOK, "acquire", "acquires"), c.ClientsAcquired, faults)
	rejected := 0
	for _, a := range r.Anomalies {
		if a.Kind == KindStaleWriteRejected {
			rejected++
		}
	}
	if contained := summarize(r.Anomalies, SeverityContained); contained != "" {
		return Safe, fmt.Sprintf("%s: %s contained by fencing (%s rejected)", head, contained, plural(rejected, "stale write", "stale writes"))
	}
	if rejected > 0 {
		return Safe, fmt.Sprintf("%s: no anomaly (%s rejected by fencing)", head, plural(rejected, "stale write", "stale writes"))
	}
	return Safe, head + ": no anomaly"
}

// nemesisGaps says which configured nemeses did not exercise the lock: those
// that never injected a fault, and those whose faults all target clients
// ("pause", "crash-client") but never started while their client held the
// lock.
func nemesisGaps(h *history.History, holds []Hold, slack int64) []string {
	type tally struct {
		faults, struck, failed int
		replicas               int  // kills of a replica (KilledReplica)
		onClient               bool // aimed at one client
		// sessionKills: kills of the server holding a session lock while a
		// client held it (sessionKill) that struck nothing; killWait the
		// least wait, after its holder let go, of the first grant after
		// one (-1: none).
		sessionKills int
		killWait     int64
	}
	by := map[string]*tally{}
	var byClient map[int][]Hold
	if len(h.Faults) > 0 {
		byClient = holdsByClient(holds)
	}
	var promotions []int64 // after the kill, of failovers that promoted a replica
	misses := map[failoverMiss]int{}
	regrantWait := int64(-1) // the least wait of a missNoRegrant failover, -1 when no grant followed
	for _, f := range h.Faults {
		t := by[f.Name]
		if t == nil {
			t = &tally{killWait: -1}
			by[f.Name] = t
		}
		t.faults++
		if f.Failed {
			t.failed++
		}
		if f.Name == "kill" && strings.HasSuffix(f.Detail, history.KilledReplica) {
			t.replicas++
		}
		_, t.onClient = faultClient(f)
		if sessionKill(h, f) {
			// struck's rule for such a kill, with the wait for the reason
			// from the same pass.
			w, held, regranted := killRegrant(h, f, holds)
			switch {
			case regranted:
				t.struck++
			case held:
				t.sessionKills++
				if w >= 0 && (t.killWait < 0 || w < t.killWait) {
					t.killWait = w
				}
			}
		} else if struck(h, f, holds, byClient, slack) {
			t.struck++
		}
		if p, ok := h.Promotion(f); ok {
			promotions = append(promotions, p.Time-f.Start)
		}
		if f.Name == "failover" && !f.Failed {
			miss, wait := failoverMissed(h, f, holds, slack)
			misses[miss]++
			if miss == missNoRegrant && wait >= 0 && (regrantWait < 0 || wait < regrantWait) {
				regrantWait = wait
			}
		}
	}
	var why []string
	seen := map[string]bool{}
	for _, n := range h.Info.Nemeses {
		if n == "" || n == "none" || n == history.Proxied || seen[n] {
			continue
		}
		seen[n] = true
		t := by[n]
		switch {
		case t == nil:
			why = append(why, NeverInjected(n))
		case t.struck > 0:
		case t.failed == t.faults:
			why = append(why, fmt.Sprintf("every %s fault failed to take effect (see the fault table)", n))
		case n == "failover" && len(promotions) == 0:
			w := "no failover promoted a replica"
			if slices.ContainsFunc(h.Faults, func(f history.Fault) bool { _, ok := h.NoPromotion(f); return ok }) {
				w += " (the topology promoted none: the fault table says how its servers stood)"
			}
			why = append(why, w)
		case n == "failover" && (misses[missKept] > 0 || misses[missNoRegrant] > 0 || misses[missLate] > 0):
			why = append(why, failoverMissWhy(misses, regrantWait)...)
		case n == "failover":
			lease := ""
			if h.Info.Lease && !h.Info.Renews && h.Info.TTLMillis > 0 {
				lease = fmt.Sprintf(" and its lease (TTL %s) live", span(h.Info.TTLMillis*1e6))
			}
			came := "the promotion came " + span(promotions[0]) + " after the failure"
			if len(promotions) > 1 {
				came = "the promotions came " + span(slices.Min(promotions)) + " or more after the failures"
			}
			why = append(why, fmt.Sprintf("no failover promoted a replica while a client held the lock%s: %s; holds and leases longer than that (e.g. --ttl 6s --hold 3s..4s) let the failover matter", lease, came))
		case t.sessionKills > 0:
			came := "no client was granted the lock after it"
			if t.killWait >= 0 {
				came = "the first grant after it came " + span(t.killWait) + " after the holder let go"
			}
			why = append(why, fmt.Sprintf("no %s gave the lock away twice: the sessions holding the lock end with the server, and no other client was granted it by the restarted server while its holder still held it (%s); holds longer than the server's restart (e.g. --hold 2s..3s) let the kill matter", n, came))
		case t.replicas == t.faults:
			why = append(why, fmt.Sprintf("every %s took down a replica, never the primary whose sessions hold the lock", n))
		case t.onClient:
			why = append(why, NoneWhileHeld(n, true))
		default:
			why = append(why, NoneWhileHeld(n, false))
		}
	}
	return why
}

// NeverInjected is the reason a run whose nemesis n injected no fault
// proves nothing.
func NeverInjected(n string) string { return fmt.Sprintf("nemesis %s never injected a fault", n) }

// NoneWhileHeld is the reason a run whose nemesis n injected faults, none
// of them while a client held the lock (its own client, for a fault aimed
// at one client: onClient), proves nothing.
func NoneWhileHeld(n string, onClient bool) string {
	if onClient {
		return fmt.Sprintf("no %s fault started while its client held the lock", n)
	}
	return fmt.Sprintf("no %s fault started while a client held the lock", n)
}

// failoverMissWhy says why failovers that promoted a replica while a client
// held the lock could not give it away twice (failoverMissed).
func failoverMissWhy(misses map[failoverMiss]int, regrantWait int64) []string {
	var why []string
	if misses[missKept] > 0 {
		why = append(why, "no failover lost a live holder's lock: the promoted replica had applied every write the primary had committed, the holder's grant included, and this lock lives in those rows (a failover loses it only with a write the replica had not applied: the failover holds the replica's applier back before the grant it strikes after, and this grant came before)")
	}
	if misses[missLate] > 0 {
		why = append(why, "a failover's replica was promoted only after the failover had stopped waiting for a promotion: when it came is not known, only when it was seen, so it proves nothing either way (the fault table says how the topology's servers stood)")
	}
	if misses[missNoRegrant] > 0 {
		came := "no grant came after the promotion"
		if regrantWait >= 0 {
			came = "the first grant after the promotion came " + span(regrantWait) + " after the holder let go"
		}
		why = append(why, fmt.Sprintf("no failover's promoted replica granted the lock while a holder whose lock the failover lost still held it: %s (the other clients reached the promoted replica too late; longer holds, or a shorter --op-timeout, let the failover matter)", came))
	}
	return why
}

// faultClient returns the client a fault is aimed at (a "client N" target,
// or a partition that cut one client off).
func faultClient(f history.Fault) (int, bool) {
	if c, ok := clientTarget(f.Target); ok {
		return c, true
	}
	if (f.Name == "partition" || slices.Contains(LinkFaults, f.Name)) && f.Client > 0 {
		return f.Client, true
	}
	return 0, false
}

// struck reports whether fault f struck where it could matter:
//   - a client fault at a fault point inside the client's steps (gap);
//   - a fault aimed at a client, while that client held the lock (a
//     lost-reply partition or a link fault aimed at an acquire in flight,
//     aimed at the acquire its client sends next: when that acquire was
//     granted or may have been);
//   - a failover, when it lost the lock of a client that held it at the
//     promotion, and the promoted replica granted it again before that
//     client let go (see failoverMissed);
//   - any other (server) fault, while some client held the lock.
func struck(h *history.History, f history.Fault, holds []Hold, byClient map[int][]Hold, slack int64) bool {
	if f.Failed {
		return false // it never took effect
	}
	if f.Name == "kill" && strings.HasSuffix(f.Detail, history.KilledReplica) {
		return false // the lock lives on the primary, which went on serving
	}
	if sessionKill(h, f) {
		_, _, regranted := killRegrant(h, f, holds)
		return regranted
	}
	if slices.Contains(LinkFaults, f.Name) && strings.HasPrefix(f.Detail, history.AimInFlight) {
		// Aimed at the acquire its client was sending (invoked just
		// before the fault was recorded): it matters when that acquire
		// could have been granted.
		return inFlightGranted(h, f)
	}
	if f.Name == "partition" && strings.HasPrefix(f.Detail, "lost-reply") {
		// Aimed at the acquire its client was about to send: it matters
		// when that acquire could have been granted.
		i := sort.Search(len(h.Ops), func(i int) bool { return h.Ops[i].Call >= f.Start })
		for ; i < len(h.Ops); i++ {
			if op := &h.Ops[i]; op.Client == f.Client && op.Op == history.Acquire {
				return op.Type != history.Fail
			}
		}
		return false
	}
	if gap(f) {
		// The client stopped itself at a fault point, which it reaches
		// only in the middle of the lock's own steps (its SETNX set the
		// key, its GET found the key its own, its check passed): where the
		// fault was aimed, holding or not.
		return true
	}
	if c, ok := faultClient(f); ok {
		return heldAt(byClient[c], f.Start) || (h.Info.Wait && waitingAt(h, c, f.Start))
	}
	if f.Name == "failover" {
		miss, _ := failoverMissed(h, f, holds, slack)
		return miss == missNone
	}
	for i := range holds {
		if holds[i].Start <= f.Start && f.Start <= holds[i].End {
			return true
		}
	}
	return false
}

// sessionKill reports whether f (not failed) kills the server whose
// sessions hold a lock that lives in a session nobody renews elsewhere
// (MySQL's FOR UPDATE and GET_LOCK, on the one server or the primary: as
// sessionCut says, where the lock model frees the lock; a ZooKeeper or
// etcd session is a lease the ensemble keeps and renews, which outlives
// one server). Every session on
// that server ends with it, and with them the lock, while its holder goes
// on believing in it: the kill gives the lock away twice only when the
// server is back and grants it to another client before that holder lets
// go, as a failover does (failoverMissed). A kill with holds shorter than
// the server's restart (MariaDB's takes seconds) cannot, and proves
// nothing.
func sessionKill(h *history.History, f history.Fault) bool {
	return f.Name == "kill" && sessionCut(h.Info, f) // the lock model frees the lock there too
}

// killRegrant says, for a sessionKill f, whether a client held the lock
// at the kill, whether a client other than such a holder was granted the
// lock after the kill, before that holder let go (regrantAfter), and
// otherwise how long after the holder let go the first grant after the
// kill came (-1: none came, or nobody held the lock at the kill).
func killRegrant(h *history.History, f history.Fault, holds []Hold) (wait int64, held, regranted bool) {
	wait = -1
	for _, hd := range holds {
		if hd.Start > f.Start || hd.End < f.Start {
			continue
		}
		held = true
		w, again := regrantAfter(h, hd, f.Start)
		if again {
			return 0, true, true
		}
		if w >= 0 && (wait < 0 || w < wait) {
			wait = w
		}
	}
	return wait, held, false
}

// Why a failover could not give the lock away twice (failoverMissed).
type failoverMiss int

const (
	missNone      failoverMiss = iota // it could, and struck
	missNoPromote                     // no replica was promoted
	missNoHolder                      // nobody held the lock (with a live lease) at the promotion
	missKept                          // the promoted replica had every live holder's grant
	missNoRegrant                     // nobody was granted the lock again before the holders it failed let go
	missLate                          // the promotion was seen late (history.PromotedLate): when it came is not known
)

// failoverMissed says whether failover f gave the lock away twice where it
// could, from what the run recorded: missNone when the replica was
// promoted while a client held the lock (in a lease run, with its lease
// still live: a promotion after the lease surely ran out cannot break it),
// the promotion lost that client's grant, and another client was granted
// the lock by the promoted replica before that client let go (see
// regrantAfter). Every scheme on a topology that fails over loses its lock
// so: a failover run is unsafe, safe only when fencing tokens contained
// the second grant, or inconclusive.
//
// The grant is lost when the lock lives in a session (every session on the
// failed primary ends with it), or when the promotion note does not say
// that the promoted replica had applied every write the primary had
// committed (history.PromotedWithEveryWrite): what the primary committed
// before the fault began (the grant of a holder from before it) is then
// on the new primary, and the lock with it.
//
// For missNoRegrant, wait is how long after the holder let go the first
// grant after the promotion came (-1: none came); otherwise 0.
func failoverMissed(h *history.History, f history.Fault, holds []Hold, slack int64) (failoverMiss, int64) {
	note, ok := h.Promotion(f)
	if !ok {
		return missNoPromote, 0
	}
	if history.Late(note) {
		return missLate, 0
	}
	p := note.Time
	ttl := h.Info.TTLMillis * 1e6
	kept := !h.Info.Session && strings.HasSuffix(note.Detail, history.PromotedWithEveryWrite)
	miss, wait := missNoHolder, int64(0)
	for _, hd := range holds {
		if hd.Start > p || hd.End < p {
			continue
		}
		if h.Info.Lease && !h.Info.Renews && ttl > 0 && p >= hd.Start+ttl+slack {
			continue // the lease surely ran out before the promotion
		}
		if kept && hd.Start <= f.Start {
			miss = max(miss, missKept)
			continue // its grant was on the promoted replica
		}
		w, regranted := regrantAfter(h, hd, p)
		if regranted {
			return missNone, 0
		}
		if miss != missNoRegrant || w < wait || wait < 0 {
			wait = w
		}
		miss = missNoRegrant
	}
	return miss, wait
}

// regrantAfter reports whether a client other than hd's was surely
// granted the lock after promotion p while hd held it: its acquire
// answered ok from p until hd's end. (An acquire still on its way when hd
// let go, or whose answer was lost, may have been granted before or after:
// it shows nothing, and a run whose only such grants came so would be
// called safe without a double holder the failover could have caused.) If
// none was, wait is how long after hd's end the first grant after p came,
// to any client (-1: none came).
func regrantAfter(h *history.History, hd Hold, p int64) (int64, bool) {
	first := int64(-1)
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Op != history.Acquire || op.Type != history.OK || op.Return < p {
			continue
		}
		if op.Client != hd.Client && op.Return <= hd.End {
			return 0, true
		}
		if first < 0 || op.Return < first {
			first = op.Return
		}
	}
	if first < 0 {
		return -1, false
	}
	return first - hd.End, false
}

// waitingAt reports whether client c was blocked in an acquire at t (a
// waiter, with --wait): the last operation it invoked before t is an
// acquire that had not returned by then.
func waitingAt(h *history.History, c int, t int64) bool {
	i := sort.Search(len(h.Ops), func(i int) bool { return h.Ops[i].Call > t })
	for i--; i >= 0; i-- {
		if op := &h.Ops[i]; op.Client == c {
			return op.Op == history.Acquire && op.Return > t
		}
	}
	return false
}

// holdsByClient groups holds (sorted by start) by client.
func holdsByClient(holds []Hold) map[int][]Hold {
	m := map[int][]Hold{}
	for _, hd := range holds {
		m[hd.Client] = append(m[hd.Client], hd)
	}
	return m
}

// heldAt reports whether one of holds (one client's, sorted by start, not
// overlapping) covers t.
func heldAt(holds []Hold, t int64) bool {
	i := sort.Search(len(holds), func(i int) bool { return holds[i].Start > t })
	// The end counts: a crashed holder's hold ends when its crash starts.
	return i > 0 && t <= holds[i-1].End
}

// faultsOnHolders counts the faults that struck where they could matter
// (see struck).
func faultsOnHolders(h *history.History, holds []Hold, slack int64) int {
	if len(h.Faults) == 0 {
		return 0
	}
	n := 0
	byClient := holdsByClient(holds)
	for _, f := range h.Faults {
		if struck(h, f, holds, byClient, slack) {
			n++
		}
	}
	return n
}

// clientSet is a set of client numbers, dense for the usual small ones.
type clientSet struct {
	dense  []bool
	sparse map[int]bool
	n      int
}

func (s *clientSet) add(c int) {
	if c >= 0 && c < 1<<16 {
		s.dense = grown(s.dense, c)
		if !s.dense[c] {
			s.dense[c] = true
			s.n++
		}
		return
	}
	if s.sparse == nil {
		s.sparse = map[int]bool{}
	}
	if !s.sparse[c] {
		s.sparse[c] = true
		s.n++
	}
}
