package checker

import "time"

// Linearizability engines (Options.Engine, Property.Engine).
const (
	// EngineLock is the lock sweep (lockcheck.go), the default.
	EngineLock = "lock sweep"
	// EnginePorcupine is porcupine's general search on the same model.
	EnginePorcupine = "porcupine"
)

// Options tunes Check. The zero value of a field means its default.
type Options struct {
	// Engine decides the linearizable property: EngineLock (default) or
	// EnginePorcupine. With EngineLock, porcupine runs only where the lock
	// sweep exceeds SearchBound, and the property says so.
	Engine string
	// SearchBound is the most configurations the lock sweep keeps open,
	// or explores at one return, before it gives up (default 4096).
	SearchBound int
	// SearchBudget bounds the CPU time the lock sweep gets, both passes
	// and the window proofs together (default 1m), with a wall-time
	// ceiling of 5 times that for a machine that starves it: a sweep that
	// runs out of either gives up as when it exceeds SearchBound (a proven
	// double grant still fails the property; otherwise porcupine decides,
	// within PorcupineTimeout, which is wall time), never a pass. CPU time,
	// so that the verdict does not depend on the machine's load; it is the
	// sweep's own thread's (budget.go). Where that cannot be read (not
	// Linux), wall time.
	SearchBudget time.Duration
	// LostHorizon bounds, in the lock sweep's first pass only, how long
	// after its client gave up a lost (indeterminate) operation may still
	// take effect (default 10ms). The first pass can only prove a history
	// linearizable; where it cannot, an exact pass without the bound
	// decides (see runLockSweep).
	LostHorizon time.Duration
	// PorcupineTimeout bounds porcupine's search (default 10s). A
	// search that runs out of time makes the property unknown, never a pass.
	// When the search finds the history illegal, locating the operation that
	// cannot be placed gets at most the same time again.
	PorcupineTimeout time.Duration
	// PorcupineMaxOps is the largest number of lock operations handed to the
	// search (default 50000), counted after dropping those the search
	// provably does not need (failed for errors, or failed "held" inside a
	// sure hold). Above it the linearizability property is unknown and the
	// interval checks decide the rest: the search's memory grows with the
	// square of the history's length.
	PorcupineMaxOps int
	// MinAcquires is the number of successful acquires below which a run is
	// inconclusive (default 10).
	MinAcquires int
	// Slack absorbs clock-rate differences between the server's lease timer
	// and the controller's clock (default 5ms).
	Slack time.Duration
}

// DefaultOptions returns the options Check uses for zero fields.
func DefaultOptions() Options {
	return Options{
		Engine:           EngineLock,
		SearchBound:      4096,
		SearchBudget:     time.Minute,
		LostHorizon:      10 * time.Millisecond,
		PorcupineTimeout: 10 * time.Second,
		PorcupineMaxOps:  50000,
		MinAcquires:      10,
		Slack:            5 * time.Millisecond,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Engine == "" {
		o.Engine = d.Engine
	}
	if o.SearchBound <= 0 {
		o.SearchBound = d.SearchBound
	}
	if o.SearchBudget <= 0 {
		o.SearchBudget = d.SearchBudget
	}
	if o.LostHorizon <= 0 {
		o.LostHorizon = d.LostHorizon
	}
	if o.PorcupineTimeout <= 0 {
		o.PorcupineTimeout = d.PorcupineTimeout
	}
	if o.PorcupineMaxOps <= 0 {
		o.PorcupineMaxOps = d.PorcupineMaxOps
	}
	if o.MinAcquires <= 0 {
		o.MinAcquires = d.MinAcquires
	}
	if o.Slack <= 0 {
		o.Slack = d.Slack
	}
	return o
}
