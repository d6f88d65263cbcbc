package locks

import (
	"context"

	"github.com/locktest/locktest/protocol"
)

// Fault points: named places between two steps of one client operation,
// where a fault that strikes there finds the client in the middle of a
// check-then-act (a scheme lists its own in Scheme.Points). PointAfterGrant
// is the controller's own: right after an acquire answered ok, before the
// client touches the resource.
const (
	PointAfterGrant = "after-grant"
	// PointWaiting is the controller's too: a client blocked in a
	// blocking acquire (--wait) while another holds the lock, frozen long
	// enough for its session or lease to run out while it waits.
	PointWaiting = "waiting"
	// PointAfterSetNX: between SETNX and EXPIRE (redis-setnx-expire); a
	// crash there leaves a key with no TTL.
	PointAfterSetNX = "after-setnx"
	// PointAfterCheck: in write, after the client found its lease valid
	// (its validity, its session) and before its answer, which is when
	// the resource changes.
	PointAfterCheck = "after-check"
	// PointAfterGet: in release, between GET (the owner compared in the
	// client) and the delete (redis-get-del).
	PointAfterGet = "after-get"
)

var (
	afterSetNX = protocol.Point{Name: PointAfterSetNX, Op: protocol.OpAcquire,
		Summary: "SETNX has set the key, EXPIRE not yet sent: a crash here leaves the lock without a TTL",
		Stops:   []string{protocol.StopCrash}}
	afterCheck = protocol.Point{Name: PointAfterCheck, Op: protocol.OpWrite,
		Summary: "the client found its lease still valid and is about to write: a pause here writes after the lease is gone",
		Stops:   []string{protocol.StopPause}}
	afterGet = protocol.Point{Name: PointAfterGet, Op: protocol.OpRelease,
		Summary: "GET found the key ours, the delete not yet sent: a pause here deletes the next holder's key",
		Stops:   []string{protocol.StopPause}}
)

type gapKey struct{}

type gapStop struct {
	point string
	stop  func(point string)
}

// WithGap returns ctx asking the scheme to call stop when its operation
// reaches point (the built-in worker passes one that freezes or kills its
// own process there). stop is called at most once per operation.
func WithGap(ctx context.Context, point string, stop func(point string)) context.Context {
	g := &gapStop{point: point, stop: stop}
	return context.WithValue(ctx, gapKey{}, g)
}

// Gap marks that the operation running under ctx has reached point: when
// the operation was asked to stop there (WithGap), it stops now; otherwise
// nothing happens.
func Gap(ctx context.Context, point string) {
	g, ok := ctx.Value(gapKey{}).(*gapStop)
	if !ok || g.point != point || g.stop == nil {
		return
	}
	stop := g.stop
	g.stop = nil
	stop(point)
}
