package nemesis

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// ScheduleVersion is the version of the schedule.json format.
const ScheduleVersion = 1

// ScheduleFile is the name of the schedule a run writes in its directory.
const ScheduleFile = "schedule.json"

// Schedule is the exact fault schedule of a run (schedule.json): every
// fault as it was triggered, aimed by a targeting rule (never a server
// name or a pid), with its length, point and parameters. A run draws it
// from its seed and writes it; `locktest run --schedule FILE` replays it
// instead of drawing.
type Schedule struct {
	Version int   `json:"version"`
	Seed    int64 `json:"seed"`
	// ReplayedFrom is the file the faults were replayed from, "" when
	// they were drawn.
	ReplayedFrom string `json:"replayed_from"`
	// Proxied: the run's client-server links went through the proxies (a
	// network-speed fault, or proxied, which writes no entry); its replay
	// puts them in place again. Omitted when false.
	Proxied bool    `json:"proxied,omitempty"`
	Faults  []Entry `json:"faults"`
}

// Entry is one fault of a schedule.
type Entry struct {
	Nemesis string  `json:"nemesis"` // the fault's name, as in --nemesis
	Trigger Trigger `json:"trigger"`
	Target  Rule    `json:"target"` // the targeting rule
	Length  string  `json:"length"` // a Go duration: how long it lasts
	Point   string  `json:"point"`  // the fault point of a client fault, "" for none
	// Params are the fault's own choices (a partition's shape, a clock
	// jump); the --param settings of the command line are not repeated.
	Params map[string]string `json:"params"`
	// Fired (written after a run): the fault struck, as history fault
	// FaultID. A replayed fault whose trigger never came is written with
	// Fired false, never dropped.
	Fired   bool  `json:"fired"`
	FaultID int64 `json:"fault_id,omitempty"`
	// FiredAt is where a replayed fault struck, when that is not its
	// trigger: the grant of the first opportunity past it at which its
	// fault was free (one of the same kind may still be under way at the
	// trigger), or for a time trigger the time it struck.
	FiredAt *Trigger `json:"fired_at,omitempty"`
}

// Trigger is when a fault strikes: the first opportunity once the run
// has had AfterGrant grants (a fault struck right after a grant strikes
// right after that grant), or At (a Go duration) after the faults began.
type Trigger struct {
	AfterGrant int64  `json:"after_grant,omitempty"`
	At         string `json:"at,omitempty"`
}

// UnmarshalJSON reads a trigger, refusing a key it does not know.
func (t *Trigger) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("trigger: want an object such as {\"after_grant\":3} or {\"at\":\"2.5s\"}")
	}
	for k := range raw {
		if k != "after_grant" && k != "at" {
			return fmt.Errorf("unknown trigger %q (known: after_grant, at)", k)
		}
	}
	type plain Trigger
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	*t = Trigger(p)
	return nil
}

// afterGrant is the trigger of a fault struck once k grants happened.
func afterGrant(k int64) Trigger { return Trigger{AfterGrant: k} }

// at is the trigger of a fault struck d after the faults began.
func at(d time.Duration) Trigger { return Trigger{At: d.Round(time.Millisecond).String()} }

// String renders the trigger for a line of text.
func (t Trigger) String() string {
	if t.At != "" {
		return "at " + t.At
	}
	return fmt.Sprintf("after grant #%d", t.AfterGrant)
}

// Rule is how a fault picks what it hits, by role, never by name.
type Rule string

// Targeting rules.
const (
	RuleHolder      Rule = "holder"            // the client that was just granted the lock
	RuleAnyClient   Rule = "client:any"        // the client whose request reached the fault point
	RuleWaiter      Rule = "waiter"            // a client blocked in a waiting acquire
	RuleAcquirer    Rule = "acquirer"          // the client sending an acquire nobody else holds
	RuleGranters    Rule = "granters"          // just enough of the servers that granted the current lease
	RuleAnyServer   Rule = "server:any"        // one server, drawn by the seed
	RuleLeader      Rule = "leader"            // the leader of an ensemble
	RulePrimary     Rule = "primary"           // the primary of a replicated topology
	RuleHolderMinor Rule = "holder|minority"   // the holder cut from a minority of the servers
	RuleSplit       Rule = "majority|minority" // servers and clients in two halves
	RuleBridge      Rule = "bridge"            // two halves of the servers that share one
)

// rulesOf are the targeting rules each fault uses.
var rulesOf = map[string][]Rule{
	"pause":        {RuleHolder, RuleAnyClient, RuleWaiter},
	"crash-client": {RuleHolder, RuleAnyClient},
	"pause-server": {RuleGranters, RuleAnyServer, RuleLeader},
	"kill":         {RuleGranters, RuleAnyServer, RuleLeader},
	"clock":        {RuleGranters},
	"clock-client": {RuleHolder},
	"failover":     {RulePrimary},
	"partition":    {RuleHolder, RuleHolderMinor, RuleAcquirer, RuleAnyServer, RuleLeader, RuleSplit, RuleBridge},
	FaultDelay:     {RuleAcquirer, RuleHolder},
	FaultSlowNode:  {RuleGranters, RuleAnyServer},
	FaultStall:     {RuleAcquirer, RuleHolder},
	FaultReset:     {RuleAcquirer, RuleHolder},
	FaultBandwidth: {RuleAcquirer, RuleHolder},
	FaultLoss:      {RuleAcquirer, RuleHolder},
}

// ruleOfShape is the targeting rule of each partition shape.
var ruleOfShape = map[string]Rule{
	"isolate-holder": RuleHolder, "holder-minority": RuleHolderMinor, "lost-reply": RuleAcquirer, "lost-renewal": RuleHolder,
	"isolate-server": RuleAnyServer, "isolate-leader": RuleLeader, "split": RuleSplit, "bridge": RuleBridge,
}

// LoadSchedule reads and validates a schedule file; its error is one line
// that names the file.
func LoadSchedule(path string) (Schedule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Schedule{}, fmt.Errorf("--schedule: %w", err)
	}
	s, err := ParseSchedule(b)
	if err != nil {
		return Schedule{}, fmt.Errorf("--schedule %s: %w", path, err)
	}
	return s, nil
}

// ParseSchedule reads and validates a schedule: unknown keys, nemeses,
// triggers, rules, points or durations are errors.
func ParseSchedule(b []byte) (Schedule, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Schedule
	if err := dec.Decode(&s); err != nil {
		return Schedule{}, oneLine(err)
	}
	if dec.More() {
		return Schedule{}, errors.New("trailing data after the schedule")
	}
	if s.Version != ScheduleVersion {
		return Schedule{}, fmt.Errorf("version %d: want %d", s.Version, ScheduleVersion)
	}
	for i, e := range s.Faults {
		if err := e.Validate(); err != nil {
			return Schedule{}, fmt.Errorf("faults[%d]: %w", i, err)
		}
	}
	return s, nil
}

// oneLine strips the decoder's error down to one line.
func oneLine(err error) error {
	return errors.New(strings.ReplaceAll(strings.TrimPrefix(err.Error(), "json: "), "\n", " "))
}

// Validate checks one entry: a known fault, one trigger, a rule of that
// fault's, durations Go can read.
func (e Entry) Validate() error {
	rules, ok := rulesOf[e.Nemesis]
	if !ok {
		return fmt.Errorf("unknown nemesis %q (known: %s)", e.Nemesis, strings.Join(schedulable(), ", "))
	}
	switch t := e.Trigger; {
	case t.AfterGrant != 0 && t.At != "":
		return fmt.Errorf("%s: trigger has both after_grant and at", e.Nemesis)
	case t.AfterGrant < 0:
		return fmt.Errorf("%s: trigger after_grant %d: want a grant number from 1", e.Nemesis, t.AfterGrant)
	case t.At != "":
		if d, err := time.ParseDuration(t.At); err != nil || d < 0 {
			return fmt.Errorf("%s: trigger at %q: want a duration such as 2.5s", e.Nemesis, t.At)
		}
	case t.AfterGrant == 0:
		return fmt.Errorf("%s: no trigger (want after_grant or at)", e.Nemesis)
	}
	if !slices.Contains(rules, e.Target) {
		return fmt.Errorf("%s: unknown target rule %q (known: %s)", e.Nemesis, e.Target, joinRules(rules))
	}
	if d, err := time.ParseDuration(e.Length); err != nil || d < 0 {
		return fmt.Errorf("%s: length %q: want a duration such as 1.5s", e.Nemesis, e.Length)
	}
	return e.validateOwn()
}

// validateOwn checks what only some faults carry: points, shapes, jumps,
// toxics.
func (e Entry) validateOwn() error {
	if _, ok := kindOf[e.Nemesis]; ok {
		_, err := toxicOf(e)
		return err
	}
	switch e.Nemesis {
	case "pause", "crash-client":
		if e.Point == "" {
			return fmt.Errorf("%s: no point (e.g. after-grant)", e.Nemesis)
		}
	case "partition":
		shape := e.Params["shape"]
		if r, ok := ruleOfShape[shape]; !ok {
			return fmt.Errorf("partition: unknown shape %q in params", shape)
		} else if r != e.Target {
			return fmt.Errorf("partition: shape %s aims at %q, not %q", shape, r, e.Target)
		}
	case "clock":
		if _, err := time.ParseDuration(e.Params["jump"]); err != nil {
			return fmt.Errorf("clock: params jump %q: want a signed duration such as +2s", e.Params["jump"])
		}
	case "failover":
		if _, err := ParseFailover(e.Params["mode"]); err != nil {
			return fmt.Errorf("failover: params mode: %w", err)
		}
	}
	return nil
}

// schedulable lists the faults a schedule can hold.
func schedulable() []string {
	var out []string
	for _, i := range All {
		if _, ok := rulesOf[i.Name]; ok {
			out = append(out, i.Name)
		}
	}
	return out
}

func joinRules(rules []Rule) string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

// Names lists the faults the schedule holds, in registry order.
func (s Schedule) Names() []string {
	var out []string
	for _, i := range All {
		if slices.ContainsFunc(s.Faults, func(e Entry) bool { return e.Nemesis == i.Name }) {
			out = append(out, i.Name)
		}
	}
	return out
}

// Replayed lists the faults a replay of the schedule injects, in registry
// order: those its entries name and, when the run went through the
// proxies and none of them puts the proxies in place, proxied.
func (s Schedule) Replayed() []string {
	names := s.Names()
	if !s.Proxied || slices.ContainsFunc(names, func(n string) bool { i, _ := lookup(n); return i.Needs.Proxies }) {
		return names
	}
	var out []string
	for _, i := range All {
		if i.Name == FaultProxied || slices.Contains(names, i.Name) {
			out = append(out, i.Name)
		}
	}
	return out
}

// Write writes the schedule to path, indented.
func (s Schedule) Write(path string) error {
	if s.Faults == nil {
		s.Faults = []Entry{}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// lengthOf reads an entry's length (validated: it parses).
func (e Entry) lengthOf() time.Duration {
	d, _ := time.ParseDuration(e.Length)
	return d
}

// dur renders a length for an entry.
func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }
