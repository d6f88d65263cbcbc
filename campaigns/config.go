// Package campaigns runs the safety matrix: every lock scheme (and variant)
// under every fault it can take, one cell per pair, each cell compared with
// its expected verdict. It turns a YAML config or --locks/--nemeses lists
// into a plan of cells, decides which faults apply to which scheme from the
// registries (locks.Schemes, nemesis.All, the local backend's topologies),
// runs the cells through a Runner (harness.Run in production, a fake in
// tests), keeps its state in the campaign directory after every run so an
// interrupted campaign can be resumed, and writes the reports: index.html
// (the matrix), results.json, junit.xml and summary.md.
package campaigns

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/reports"
)

// Config is a campaign file (YAML):
//
//	name: nightly
//	seed: 1            # seed of every cell's first run (default 1)
//	runs: 1            # runs per cell, seeds seed, seed+1, ... (default 1)
//	stop_early: true   # stop each run at its first certain violation (default true; false: full time limits)
//	defaults:          # every cell's settings unless it sets its own
//	  time_limit: 6s
//	  clients: 5
//	  ttl: 1s
//	  hold: 50ms..250ms
//	  think: 10ms..40ms
//	cells:
//	  - lock: redis-lua            # a lock variant (a row of the matrix)
//	    fence: true                # optional: fence, wait, topology, params, time_limit, ...
//	    expect:                    # fault (a column; "a+b" combines) -> safe | unsafe | either
//	      none: safe
//	      pause: unsafe
//
// A cell expected "safe" must have every run safe; "unsafe" at least one
// run unsafe; "either" any verdict but inconclusive or an error.
type Config struct {
	Name string `yaml:"name"`
	Seed *int64 `yaml:"seed"`
	Runs int    `yaml:"runs"`
	// StopEarly: each run stops at the first violation the online
	// checker is certain of (nil: true); false runs every cell its full
	// time limit, for complete anomaly counts and availability.
	StopEarly *bool        `yaml:"stop_early"`
	Defaults  Settings     `yaml:"defaults"`
	Cells     []CellConfig `yaml:"cells"`
}

// Settings are a cell's run parameters; zero values take the defaults.
type Settings struct {
	TimeLimit   Duration          `yaml:"time_limit"`
	Clients     int               `yaml:"clients"`
	TTL         Duration          `yaml:"ttl"`
	Hold        string            `yaml:"hold"`
	Think       string            `yaml:"think"`
	OpTimeout   Duration          `yaml:"op_timeout"`
	WaitTimeout Duration          `yaml:"wait_timeout"`
	Params      map[string]string `yaml:"params"`
}

// CellConfig is one lock variant and the faults to run it under, with the
// verdict expected under each.
type CellConfig struct {
	Lock     string            `yaml:"lock"`
	Topology string            `yaml:"topology"`
	Fence    bool              `yaml:"fence"`
	Wait     bool              `yaml:"wait"`
	Expect   map[string]string `yaml:"expect"`
	Settings `yaml:",inline"`
}

// Duration is a time.Duration written as "6s" in YAML.
type Duration time.Duration

// UnmarshalYAML reads "6s", "500ms".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return fmt.Errorf("line %d: bad duration %q (want e.g. 6s)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// ParseConfig reads a campaign config; unknown keys are errors, so a typo
// cannot silently drop an expectation.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("campaign config: %w", err)
	}
	if len(c.Cells) == 0 {
		return nil, fmt.Errorf("campaign config: no cells")
	}
	for i, cell := range c.Cells {
		if cell.Lock == "" {
			return nil, fmt.Errorf("campaign config: cell %d has no lock", i+1)
		}
		if len(cell.Expect) == 0 {
			return nil, fmt.Errorf("campaign config: cell %d (%s) has no expect: map a fault to safe, unsafe or either", i+1, cell.Lock)
		}
		for nem, e := range cell.Expect {
			switch e {
			case reports.ExpectSafe, reports.ExpectUnsafe, reports.ExpectEither:
			default:
				return nil, fmt.Errorf("campaign config: cell %d (%s): %s: expect %q, want safe, unsafe or either", i+1, cell.Lock, nem, e)
			}
		}
	}
	if c.Runs < 0 || c.Runs > 100 {
		return nil, fmt.Errorf("campaign config: runs must be 1..100 (got %d)", c.Runs)
	}
	return &c, nil
}

// LoadConfig reads a campaign config file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(b)
}

// Merge fills the zero fields of s from d.
func (s Settings) Merge(d Settings) Settings {
	if s.TimeLimit == 0 {
		s.TimeLimit = d.TimeLimit
	}
	if s.Clients == 0 {
		s.Clients = d.Clients
	}
	if s.TTL == 0 {
		s.TTL = d.TTL
	}
	if s.Hold == "" {
		s.Hold = d.Hold
	}
	if s.Think == "" {
		s.Think = d.Think
	}
	if s.OpTimeout == 0 {
		s.OpTimeout = d.OpTimeout
	}
	if s.WaitTimeout == 0 {
		s.WaitTimeout = d.WaitTimeout
	}
	if len(d.Params) > 0 {
		p := map[string]string{}
		for k, v := range d.Params {
			p[k] = v
		}
		for k, v := range s.Params {
			p[k] = v
		}
		s.Params = p
	}
	return s
}

// BuiltinDefaults are the settings of a campaign that sets none: short
// runs with a 1 s lease, so that faults sized from the TTL hit often.
var BuiltinDefaults = Settings{
	TimeLimit:   Duration(30 * time.Second),
	Clients:     5,
	TTL:         Duration(time.Second),
	Hold:        "50ms..250ms",
	Think:       "10ms..40ms",
	OpTimeout:   Duration(time.Second),
	WaitTimeout: Duration(5 * time.Second),
}
