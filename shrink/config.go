package shrink

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/nemesis"
)

// Config is what one candidate changes of the run being shrunk: the
// settings shrinking cuts down. Everything else (lock, TTL, holds, seed,
// cluster...) stays as the original run had it.
type Config struct {
	Nemeses   []string          `json:"nemeses"` // empty: --nemesis none
	Clients   int               `json:"clients"`
	TimeLimit time.Duration     `json:"time_limit_ns"`
	StopEarly bool              `json:"stop_early"`
	Params    map[string]string `json:"params,omitempty"`
	// Schedule is the fault schedule the candidate replays; nil when the
	// run is shrunk without one (its faults are drawn by the seed).
	Schedule *Schedule `json:"-"`
	// Faults describes the schedule's faults, for shrink.json.
	Faults []string `json:"faults,omitempty"`
}

// Clone returns a copy of c that can be changed alone.
func (c Config) Clone() Config {
	out := c
	out.Nemeses = slices.Clone(c.Nemeses)
	out.Params = maps.Clone(c.Params)
	if c.Schedule != nil {
		out.Schedule = c.Schedule.Clone()
	}
	out.describe()
	return out
}

// describe fills Faults from the schedule.
func (c *Config) describe() {
	c.Faults = nil
	if c.Schedule == nil {
		return
	}
	c.Faults = make([]string, 0, len(c.Schedule.Faults))
	for _, f := range c.Schedule.Faults {
		c.Faults = append(c.Faults, f.Describe())
	}
}

// dropOrphanParams removes the --param settings of the faults c no longer
// injects (the harness refuses a --param of a fault the run does not
// inject), and says which it removed.
func (c *Config) dropOrphanParams() []string {
	var gone []string
	for _, k := range slices.Sorted(maps.Keys(c.Params)) {
		if f, ok := nemesis.ParamFault(k); ok && !slices.Contains(c.Nemeses, f) {
			delete(c.Params, k)
			gone = append(gone, k)
		}
	}
	return gone
}

// withNemeses is c with only the faults names, and without the --param
// settings of the others; change says so in words.
func (c Config) withNemeses(names []string) (out Config, change string) {
	out = c.Clone()
	out.Nemeses = names
	change = fmt.Sprintf("--nemesis %s -> %s", c.NemesisFlag(), out.NemesisFlag())
	if gone := out.dropOrphanParams(); len(gone) > 0 {
		change += fmt.Sprintf(" (and their --param %s)", strings.Join(gone, ", "))
	}
	return out, change
}

// NemesisFlag is the value of --nemesis for c.
func (c Config) NemesisFlag() string {
	if len(c.Nemeses) == 0 {
		return "none"
	}
	return strings.Join(c.Nemeses, ",")
}

// Summary says c in a few words: "pause, 2 clients, 4s, stop-early, 1 fault".
func (c Config) Summary() string {
	s := fmt.Sprintf("%s, %d clients, %s", c.NemesisFlag(), c.Clients, c.TimeLimit)
	if c.StopEarly {
		s += ", stop-early"
	}
	if len(c.Params) > 0 {
		s += fmt.Sprintf(", %d params", len(c.Params))
	}
	if c.Schedule != nil {
		s += fmt.Sprintf(", %d scheduled faults", len(c.Schedule.Faults))
	}
	return s
}

// Apply returns the run options of base with c's settings: what a
// candidate runs. The TTL and holds are base's as recorded (no sizing).
func (c Config) Apply(base harness.Options) harness.Options {
	o := base
	o.Nemesis = c.NemesisFlag()
	o.Clients = c.Clients
	o.TimeLimit = c.TimeLimit
	o.StopEarly = c.StopEarly
	o.Params = maps.Clone(c.Params)
	o.SizeForFaults = false
	return o
}

// ConfigOf is the Config of a run's options.
func ConfigOf(o harness.Options) Config {
	var ns []string
	for _, n := range strings.Split(o.Nemesis, ",") {
		if n = strings.TrimSpace(n); n != "" && n != "none" {
			ns = append(ns, n)
		}
	}
	return Config{Nemeses: ns, Clients: o.Clients, TimeLimit: o.TimeLimit, StopEarly: o.StopEarly, Params: maps.Clone(o.Params)}
}

// CommandLine is the `locktest run` command line that runs o, with
// --schedule FILE when schedule is not "": what repro.sh holds.
func CommandLine(o harness.Options, schedule string) []string {
	args := []string{"locktest", "run"}
	if o.ClientCmd != "" {
		args = append(args, "--client-cmd", o.ClientCmd)
	}
	if o.Lock != "" {
		args = append(args, "--lock", o.Lock)
	}
	if o.Topology != "" {
		args = append(args, "--topology", o.Topology)
	}
	args = append(args, "--nemesis", orNone(o.Nemesis), "--clients", fmt.Sprint(o.Clients),
		"--time-limit", o.TimeLimit.String(), "--ttl", o.TTL.String(),
		"--hold", rangeFlag(o.Hold.Min, o.Hold.Max), "--think", rangeFlag(o.Think.Min, o.Think.Max),
		"--op-timeout", o.OpTimeout.String(), "--seed", fmt.Sprint(o.Seed))
	if o.Fence {
		args = append(args, "--fence")
	}
	if o.Wait {
		args = append(args, "--wait", "--wait-timeout", o.WaitTimeout.String())
	}
	if o.StopEarly {
		args = append(args, "--stop-early")
	}
	if o.Cluster != "" && o.Cluster != "local" {
		args = append(args, "--cluster", o.Cluster)
	}
	for _, k := range slices.Sorted(maps.Keys(o.Images)) {
		args = append(args, "--image", k+"="+o.Images[k])
	}
	for _, k := range slices.Sorted(maps.Keys(o.Params)) {
		args = append(args, "--param", k+"="+o.Params[k])
	}
	if schedule != "" {
		args = append(args, "--schedule", schedule)
	}
	return args
}

// ShellLine quotes args for a POSIX shell.
func ShellLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func rangeFlag(lo, hi time.Duration) string { return lo.String() + ".." + hi.String() }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
