package checker

import (
	"context"
	"slices"
)

// gradedCheck returns the check of the property that reports anomalies of
// kind, its anomalies graded as Check grades them (setSeverities): in a
// fenced run a lock-level anomaly is a violation only with damage to the
// resource, so there the checks of the damage run too.
func gradedCheck(kind Kind) func(context.Context, *facts, Options) []Anomaly {
	check := propertyCheck(kind)
	return func(ctx context.Context, f *facts, o Options) []Anomaly {
		r := Result{Fence: f.h.Info.Fence, Anomalies: check(ctx, f, o)}
		if r.Fence && lockLevel(kind) {
			_, lost, _ := checkLostUpdate(f)
			_, stale := checkFencing(f)
			r.Anomalies = slices.Concat(r.Anomalies, lost, stale)
		}
		setSeverities(&r)
		return r.Anomalies
	}
}

// propertyCheck returns the check of the property that reports anomalies
// of kind: only that one runs on each candidate. A kind it does not know
// gets the whole check.
func propertyCheck(kind Kind) func(context.Context, *facts, Options) []Anomaly {
	slackOf := func(o Options) int64 { return int64(o.Slack) }
	two := func(f func(*facts) (Property, []Anomaly)) func(context.Context, *facts, Options) []Anomaly {
		return func(_ context.Context, fs *facts, _ Options) []Anomaly { _, as := f(fs); return as }
	}
	slacked := func(f func(*facts, int64) (Property, []Anomaly)) func(context.Context, *facts, Options) []Anomaly {
		return func(_ context.Context, fs *facts, o Options) []Anomaly { _, as := f(fs, slackOf(o)); return as }
	}
	switch kind {
	case KindDoubleHolder:
		return slacked(checkDoubleHolder)
	case KindForeignRelease:
		return two(checkForeignRelease)
	case KindReleaseOKOnExpired:
		return slacked(checkReleaseOKOnExpired)
	case KindUsedAfterValidity, KindCheckThenAct:
		return slacked(checkUsedAfterValidity)
	case KindLostUpdate:
		return func(_ context.Context, fs *facts, _ Options) []Anomaly { _, as, _ := checkLostUpdate(fs); return as }
	case KindStaleWriteAccepted, KindStaleWriteRejected:
		return two(checkFencing)
	case KindTokenReused, KindTokenRegressed:
		return two(checkTokenOrder)
	case KindDeadlock:
		return slacked(checkDeadlock)
	case KindNonLinearizable:
		return func(ctx context.Context, fs *facts, o Options) []Anomaly {
			_, as := checkLinearizableCtx(ctx, fs, o)
			return as
		}
	case KindRWExclusion:
		return func(_ context.Context, fs *facts, _ Options) []Anomaly { _, as, _ := checkReadWriteBoth(fs); return as }
	}
	return func(ctx context.Context, fs *facts, o Options) []Anomaly { return CheckContext(ctx, fs.h, o).Anomalies }
}
