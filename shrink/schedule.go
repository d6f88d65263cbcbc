package shrink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/locktest/locktest/nemesis"
)

// ScheduleFile is the name of the fault schedule every run writes
// (`locktest run --schedule FILE` replays it).
const ScheduleFile = nemesis.ScheduleFile

// Schedule is a run's schedule.json: its faults in the order they were
// drawn, each kept as the JSON object it was, and the file's other fields
// kept as they were. Deleting faults or shortening a length gives a
// schedule that `locktest run --schedule` replays.
type Schedule struct {
	Faults []Fault `json:"-"`
	rest   map[string]json.RawMessage
}

// Fault is one element of a schedule's faults, an opaque JSON object
// except for its length and whether it fired; Write keeps every other
// field as it was read.
type Fault struct {
	fields map[string]json.RawMessage
}

// LoadSchedule reads a schedule file, one the harness can replay
// (nemesis.LoadSchedule: unknown keys, rules or faults are refused, so
// that a candidate's schedule is never refused halfway through a shrink).
func LoadSchedule(path string) (*Schedule, error) {
	if _, err := nemesis.LoadSchedule(path); err != nil {
		return nil, err
	}
	var s Schedule
	if err := readJSON(path, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// UnmarshalJSON reads a schedule, keeping every field.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &s.rest); err != nil {
		return err
	}
	var faults []map[string]json.RawMessage
	if raw, ok := s.rest["faults"]; ok {
		if err := json.Unmarshal(raw, &faults); err != nil {
			return fmt.Errorf("faults: %w", err)
		}
	}
	s.Faults = make([]Fault, len(faults))
	for i, f := range faults {
		s.Faults[i] = Fault{fields: f}
	}
	return nil
}

// MarshalJSON writes the schedule with its current faults.
func (s Schedule) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(s.rest)+1)
	for k, v := range s.rest {
		out[k] = v
	}
	faults := make([]map[string]json.RawMessage, len(s.Faults))
	for i, f := range s.Faults {
		faults[i] = f.fields
	}
	out["faults"] = faults
	return json.Marshal(out)
}

// Write writes the schedule to path, indented.
func (s *Schedule) Write(path string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// With returns a copy of s holding the faults keep (indices into s.Faults).
func (s *Schedule) With(keep []int) *Schedule {
	c := &Schedule{rest: s.rest, Faults: make([]Fault, 0, len(keep))}
	for _, i := range keep {
		c.Faults = append(c.Faults, s.Faults[i])
	}
	return c
}

// Clone returns a copy of s whose faults can be changed alone.
func (s *Schedule) Clone() *Schedule {
	c := &Schedule{rest: s.rest, Faults: make([]Fault, len(s.Faults))}
	for i, f := range s.Faults {
		c.Faults[i] = f.clone()
	}
	return c
}

func (f Fault) clone() Fault {
	m := make(map[string]json.RawMessage, len(f.fields))
	for k, v := range f.fields {
		m[k] = v
	}
	return Fault{fields: m}
}

// MarshalJSON writes the fault as it was read, with its changes.
func (f Fault) MarshalJSON() ([]byte, error) { return json.Marshal(f.fields) }

// UnmarshalJSON reads a fault, keeping every field.
func (f *Fault) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &f.fields) }

func (f Fault) str(key string) string {
	var s string
	_ = json.Unmarshal(f.fields[key], &s)
	return s
}

// Nemesis is the fault's name ("pause", "kill"...).
func (f Fault) Nemesis() string { return f.str("nemesis") }

// ID is the fault_id the fault had in its run's history, 0 if none.
func (f Fault) ID() int64 {
	var id int64
	_ = json.Unmarshal(f.fields["fault_id"], &id)
	return id
}

// Fired reports whether the fault's trigger fired in its run (a fault
// without the field is taken as fired).
func (f Fault) Fired() bool {
	raw, ok := f.fields["fired"]
	if !ok {
		return true
	}
	var fired bool
	return json.Unmarshal(raw, &fired) != nil || fired
}

// Length is how long the fault lasts; ok false when it has no length.
func (f Fault) Length() (time.Duration, bool) {
	d, err := time.ParseDuration(f.str("length"))
	return d, err == nil && d > 0
}

// WithLength returns a copy of the fault that lasts d.
func (f Fault) WithLength(d time.Duration) Fault {
	c := f.clone()
	b, _ := json.Marshal(d.String())
	c.fields["length"] = b
	return c
}

// Describe names the fault in plain words: "pause 1.5s (after-grant)".
func (f Fault) Describe() string {
	s := f.Nemesis()
	if s == "" {
		s = "fault"
	}
	if d, ok := f.Length(); ok {
		s += " " + d.String()
	}
	if p := f.str("point"); p != "" {
		s += " (" + p + ")"
	}
	return s
}
