package lostgen

// Label is what a history proves about one injected double grant.
type Label string

// Labels.
const (
	// Certain: the earlier holder's acquire returned ok before the second
	// acquire was invoked, its lease (counted conservatively from its
	// call, less Margin) outlives the second acquire's return, which was
	// ok, and its client invoked no release of it by then: no
	// linearization exists, whatever the open operations did.
	Certain Label = "certain"
	// Explainable: the generator built a linearization: the earlier holder
	// is a lost acquire whose grant moves to MoveTo (free lock, no acquire
	// placed there), so its lease ends before the second grant; acquires
	// refused after its moved lease are placed at their calls, inside it.
	Explainable Label = "explainable"
	// Unknown: neither was proven; Why says what stood in the way.
	Unknown Label = "unknown"
)

// Verdicts of Truth.Linearizable.
const (
	Yes          = "yes"     // a linearization exists (no injection, or every one explainable apart)
	No           = "no"      // some injection is Certain
	UnknownTruth = "unknown" // neither
)

// Injection is one double grant the server made on purpose.
type Injection struct {
	Label        Label  `json:"label"`
	Why          string `json:"why"`
	At           int64  `json:"at_ns"`         // when the server granted it
	Op           int64  `json:"op"`            // OpID of the acquire granted
	Client       int    `json:"client"`        // its client
	Lost         bool   `json:"lost"`          // its reply was lost
	Holder       int64  `json:"holder_op"`     // OpID of the acquire whose lease was live
	HolderClient int    `json:"holder_client"` // its client
	HolderLost   bool   `json:"holder_lost"`   // the holder's reply was lost (an unknown holder)
	HolderGrant  int64  `json:"holder_grant_ns"`
	// MoveTo, for Explainable: where the holder's grant is placed in the
	// linearization the generator built (0 otherwise).
	MoveTo int64 `json:"move_to_ns,omitempty"`
}

// Truth is the ground truth of a generated history.
type Truth struct {
	Seed int64 `json:"seed"`
	// Linearizable: Yes, No or UnknownTruth, for the lock operations.
	Linearizable string      `json:"linearizable"`
	Why          string      `json:"why"`
	Injections   []Injection `json:"injections"`

	Ops         int     `json:"ops"`          // operations invoked
	Events      int     `json:"events"`       // lines written, header included
	Lost        int     `json:"lost"`         // acquires and releases whose reply was lost
	LostApplied int     `json:"lost_applied"` // of those, applied by the server
	LostGranted int     `json:"lost_granted"` // lost acquires the server granted: unknown holders
	MaxOpenLost int     `json:"max_open_lost"`
	MeanOpen    float64 `json:"mean_open_lost"` // time-weighted, over the whole history
	End         int64   `json:"end_ns"`         // time of the last event
	// FinalHolder is the OpID of the acquire whose key the server holds
	// at the end, its lease still running (0 when the key is free);
	// FinalHolderLost: that acquire's reply was lost, so no client knows
	// it holds the lock (without expiry: for good).
	FinalHolder     int64 `json:"final_holder_op,omitempty"`
	FinalHolderLost bool  `json:"final_holder_lost,omitempty"`

	// Unavailable is the longest stretch between two grants (server
	// times) of acquires that returned ok (or from the start): the lock
	// as the clients saw it unavailable, and why.
	Unavailable Stretch `json:"unavailable"`

	// Trace is the server's log (Config.Trace only): every operation it
	// applied, in order.
	Trace []Step `json:"-"`
}

// StepKind is what the server did with an operation.
type StepKind uint8

// Step kinds.
const (
	StepGrant  StepKind = iota + 1 // acquire granted
	StepRefuse                     // acquire refused: the key was held
	StepDelete                     // release deleted the key
	StepKeep                       // release deleted nothing
)

// Step is one operation the server applied.
type Step struct {
	At       int64 // server time
	Op       int64 // OpID
	Kind     StepKind
	Expires  int64 // grant: when its lease runs out (history.Never without expiry)
	Injected bool  // grant: an injected double grant
}

// Stretch is a stretch of the run between two grants of acquires that
// returned ok, and what the server did meanwhile.
type Stretch struct {
	From int64 `json:"from_ns"`
	To   int64 `json:"to_ns"`
	// LostGrants counts the lost acquires granted in it: holders nobody
	// knew of.
	LostGrants int `json:"lost_grants"`
	// RefusedUnderLost counts the answered refusals while a lost acquire
	// held the key; RefusedUnderKnown those while an acquire that
	// returned ok (or an injected grant's holder) held it.
	RefusedUnderLost  int `json:"refused_under_lost"`
	RefusedUnderKnown int `json:"refused_under_known"`
}
