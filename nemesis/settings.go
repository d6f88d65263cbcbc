package nemesis

import (
	"fmt"
	"strings"
)

// Settings are the faults' --param settings, parsed once, before anything
// starts (ParseSettings, which `locktest run` calls when it validates its
// options); each fault reads its own from Env.Settings. The zero value is
// every fault's default.
type Settings struct {
	// Pause is how long pause freezes a client, in multiples of the TTL
	// (--param pause=LO..HI); zero: 1.5..3 (PauseLengths).
	Pause [2]float64
	// PauseAt and CrashAt are the points pause and crash-client strike at
	// (--param pause-at, crash-at); nil: every point, and after-grant.
	PauseAt, CrashAt []string
	// PauseServer and Kill are --param pause-server and kill: "leader"
	// aims the fault at the leader of zk3/etcd3; "": any server.
	PauseServer, Kill string
	// Clock are the directions the clock fault jumps in, in turn (1
	// forward, -1 back; --param clock); nil: forward (ClockDirections).
	Clock []int
	// Failover is FailoverKill or FailoverIsolate (--param failover);
	// "": FailoverKill.
	Failover string
	// Partition are the shapes --param partition names; nil: none named
	// (the defaults, PartitionShapes, or on a topology whose Sentinels
	// elect a master, a split aimed at it).
	Partition []string
}

// ParseSettings reads the faults' --param settings from params, the run's
// --param keys (keys no fault reads are left alone); its error is one line
// naming the key.
func ParseSettings(params map[string]string) (Settings, error) {
	var s Settings
	var err error
	if v := params["pause"]; v != "" {
		if s.Pause[0], s.Pause[1], err = ParsePause(v); err != nil {
			return Settings{}, fmt.Errorf("--param pause: %w", err)
		}
	}
	if s.PauseAt, err = ParsePoints(params["pause-at"]); err != nil {
		return Settings{}, fmt.Errorf("--param pause-at: %w", err)
	}
	if s.CrashAt, err = ParsePoints(params["crash-at"]); err != nil {
		return Settings{}, fmt.Errorf("--param crash-at: %w", err)
	}
	s.PauseServer, s.Kill = params["pause-server"], params["kill"]
	if v := params["clock"]; v != "" {
		if s.Clock, err = ParseClockDirections(v); err != nil {
			return Settings{}, err // its error names the param
		}
	}
	if s.Failover, err = ParseFailover(params["failover"]); err != nil {
		return Settings{}, fmt.Errorf("--param failover: %w", err)
	}
	if v := params["partition"]; strings.TrimSpace(v) != "" {
		if s.Partition, err = ParseShapes(v); err != nil {
			return Settings{}, fmt.Errorf("--param partition: %w", err)
		}
	}
	return s, nil
}

// PauseLengths are the shortest and longest pause, in multiples of the
// TTL.
func (s Settings) PauseLengths() (lo, hi float64) {
	if s.Pause == [2]float64{} {
		lo, hi, _ = ParsePause("")
		return lo, hi
	}
	return s.Pause[0], s.Pause[1]
}

// ClockDirections are the directions the clock fault jumps in, in turn.
func (s Settings) ClockDirections() []int {
	if s.Clock == nil {
		dirs, _ := ParseClockDirections("")
		return dirs
	}
	return s.Clock
}

// aimsAtLeader reports whether server fault name (kill, pause-server) is
// aimed at the leader (--param NAME=leader).
func (s Settings) aimsAtLeader(name string) bool {
	switch name {
	case "kill":
		return s.Kill == "leader"
	case "pause-server":
		return s.PauseServer == "leader"
	}
	return false
}
