package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/proxy"
	"github.com/locktest/locktest/history"
)

// proxiedOnly is FaultProxied: the harness puts the proxies in place (its
// Needs), and it injects nothing.
type proxiedOnly struct{}

func (proxiedOnly) Name() string { return FaultProxied }

func (proxiedOnly) Run(ctx context.Context, _ *Env) error {
	<-ctx.Done()
	return nil
}

// The network-speed faults: slow, lossy and half-broken links, made by the
// proxies on the client-server links (clusters/proxy).
const (
	// FaultProxied is no fault, through the proxies: the baseline of the
	// others (history.Proxied).
	FaultProxied   = history.Proxied
	FaultDelay     = "delay"
	FaultSlowNode  = "slow-node"
	FaultStall     = "stall"
	FaultReset     = "reset"
	FaultBandwidth = "bandwidth"
	FaultLoss      = "loss"
)

// The aims of the client-link faults (--param delay-at=...).
const (
	// AimInFlight: as a client sends an acquire that can succeed (nobody
	// holds the lock), its links; the answers to it are delayed (as
	// partition's lost-reply aims).
	AimInFlight = history.AimInFlight
	// AimHolder: right after a grant, the holder's links, both ways: its
	// renewals, session heartbeats and release.
	AimHolder = "holder"
)

// Aims are the aims a client-link fault draws from.
var Aims = []string{AimInFlight, AimHolder}

// DefaultAims are the aims a client-link fault draws from when --param
// delay-at does not say: the ones that can hurt the lock. A late answer
// to an acquire in flight (a grant used after its lease ran out) hurts
// every lease; slowing the holder's links hurts only a lock whose holder
// keeps it alive over them (session heartbeats, lease renewals): a plain
// lease runs out on the server whatever the holder's links do.
func DefaultAims(t history.Traits) []string {
	if t.Session || t.Renews {
		return Aims
	}
	return []string{AimInFlight}
}

// netSpeedNeeds: the run's network (namespaces, root) and the proxies.
var netSpeedNeeds = Needs{Net: true, Proxies: true}

// NetSpeedFaults are the network-speed faults' declarations (in All).
var NetSpeedFaults = []Info{
	{FaultProxied, "no fault, with every client-server link through its proxy: the baseline of the network-speed faults (none, through the proxies); needs root",
		func() Nemesis { return proxiedOnly{} }, netSpeedNeeds, nil, ""},
	{FaultDelay, "latency on a client's links through their proxies, 1.2-2.5x the TTL by default (--param delay=50ms..200ms, jitter=10ms, delay-direction=both|upstream|downstream): on the answers to an acquire in flight (the grant arrives late) or both ways on the holder's links right after a grant (its renewals and session heartbeats late), drawn by the seed among those that can hurt the lock (the holder's links only for a lock with a session or renewals; --param delay-at=in-flight,holder chooses); needs root",
		func() Nemesis { return &netSpeed{name: FaultDelay} }, netSpeedNeeds,
		&Param{Check: checkDelayRange(FaultDelay), Keys: map[string]func(string) error{"jitter": checkJitter, "delay-direction": checkDirection, "delay-at": checkAims}}, ""},
	{FaultSlowNode, "right after a grant, one server (one of those that granted it, when the grant names them) answers every client late: its links delayed both ways by 0.5-2x the TTL (--param slow-node=LO..HI); Redlock's slow minority; needs root",
		func() Nemesis { return &netSpeed{name: FaultSlowNode} }, netSpeedNeeds, &Param{Check: checkDelayRange(FaultSlowNode)}, ""},
	{FaultStall, "a client's links stop passing data without closing (Toxiproxy's timeout toxic) for 1.5-3x the TTL, at an acquire in flight or at the holder; what was sent meanwhile is lost and the stalled connections are closed when it heals; needs root",
		func() Nemesis { return &netSpeed{name: FaultStall} }, netSpeedNeeds, nil, ""},
	{FaultReset, "a client's connections are reset as soon as data crosses them (Toxiproxy's reset_peer), for 0.5-1x the TTL, at an acquire in flight or at the holder: requests reset mid-way; needs root",
		func() Nemesis { return &netSpeed{name: FaultReset} }, netSpeedNeeds, nil, ""},
	{FaultBandwidth, "rate-limit a client's links to 1-4 KB/s (--param bandwidth=LO..HI, KB/s) for 1.5-3x the TTL, at an acquire in flight or at the holder; needs root",
		func() Nemesis { return &netSpeed{name: FaultBandwidth} }, netSpeedNeeds, &Param{Check: checkBandwidth}, ""},
	{FaultLoss, "lose a share of the data on a client's links (--param loss=0.3) for 1.5-3x the TTL, as TCP does: each loss holds the stream back a retransmission timeout (200 ms, doubling); at an acquire in flight or at the holder; needs root",
		func() Nemesis { return &netSpeed{name: FaultLoss} }, netSpeedNeeds, &Param{Check: checkLoss}, ""},
}

// speedParams are a network-speed fault's --param settings.
type speedParams struct {
	lo, hi    time.Duration   // delay (delay, slow-node); both 0: scaled from the TTL
	jitter    time.Duration   // delay
	direction proxy.Direction // delay; "" for each aim's own
	aims      []string        // delay, stall, reset, bandwidth, loss
	rateLo    int64           // bandwidth, KB/s
	rateHi    int64
	share     float64 // loss
}

// parseSpeedParams reads fault's settings from params (checked before the
// run: an error here is a bug of the checks).
func parseSpeedParams(fault string, params map[string]string) (speedParams, error) {
	p := speedParams{aims: Aims, rateLo: 1, rateHi: 4, share: 0.3}
	var err error
	switch fault {
	case FaultDelay, FaultSlowNode:
		if p.lo, p.hi, err = ParseDelayRange(params[fault]); err != nil {
			return p, fmt.Errorf("--param %s: %w", fault, err)
		}
	case FaultBandwidth:
		if p.rateLo, p.rateHi, err = ParseRate(params[fault]); err != nil {
			return p, fmt.Errorf("--param bandwidth: %w", err)
		}
	case FaultLoss:
		if p.share, err = ParseShare(params[fault]); err != nil {
			return p, fmt.Errorf("--param loss: %w", err)
		}
	}
	if fault != FaultDelay {
		return p, nil
	}
	if p.jitter, err = parseJitter(params["jitter"]); err != nil {
		return p, err
	}
	if v := strings.TrimSpace(params["delay-direction"]); v != "" {
		if p.direction, err = proxy.ParseDirection(v); err != nil {
			return p, fmt.Errorf("--param delay-direction: %w", err)
		}
	}
	if v := strings.TrimSpace(params["delay-at"]); v != "" {
		if p.aims, err = parseAims(v); err != nil {
			return p, err
		}
	}
	return p, nil
}

// splitRange splits "LO..HI" in two; "X" is X..X.
func splitRange(s string) (lo, hi string) {
	a, b, found := strings.Cut(s, "..")
	if !found {
		b = a
	}
	return strings.TrimSpace(a), strings.TrimSpace(b)
}

// ParseDelayRange reads "50ms..200ms" or "100ms" ("" for the default,
// scaled from the TTL: 0, 0).
func ParseDelayRange(s string) (lo, hi time.Duration, err error) {
	if strings.TrimSpace(s) == "" {
		return 0, 0, nil
	}
	a, b := splitRange(s)
	lo, err1 := time.ParseDuration(strings.TrimSpace(a))
	hi, err2 := time.ParseDuration(strings.TrimSpace(b))
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("%q: want LO..HI or one duration (e.g. 50ms..200ms)", s)
	case lo <= 0 || hi < lo || hi > time.Minute:
		return 0, 0, fmt.Errorf("%q: want 0 < LO <= HI <= 1m", s)
	}
	return lo, hi, nil
}

// CheckJitter refuses a delay whose --param jitter is not less than the
// shortest delay it can draw (LO of --param delay, or 1.2x ttl, the
// default's): each answer is held latency +/- jitter, drawn per chunk
// (Toxiproxy's latency toxic's semantics), and clamped at 0, so such a
// jitter lets answers through undelayed and the held time the history
// records for the fault (latency - jitter) would be nothing.
func CheckJitter(params map[string]string, ttl time.Duration) error {
	jitter, err := parseJitter(params["jitter"])
	if err != nil || jitter == 0 {
		return err
	}
	lo, _, err := ParseDelayRange(params[FaultDelay])
	if err != nil {
		return fmt.Errorf("--param %s: %w", FaultDelay, err)
	}
	what := "--param delay's LO"
	if lo == 0 {
		lo, what = time.Duration(float64(ttl)*1.2), "1.2x the TTL" // drawToxic's default
	}
	if jitter >= lo {
		return fmt.Errorf("--param jitter=%s: want less than the shortest delay (%s, %s): each answer is held the delay +/- the jitter", params["jitter"], lo, what)
	}
	return nil
}

func parseJitter(s string) (time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 || d > time.Minute {
		return 0, fmt.Errorf("--param jitter=%s: want a duration from 0 to 1m (e.g. 10ms)", s)
	}
	return d, nil
}

// ParseRate reads the bandwidth param: "LO..HI" or "N", whole KB/s.
func ParseRate(s string) (lo, hi int64, err error) {
	if strings.TrimSpace(s) == "" {
		return 1, 4, nil
	}
	a, b := splitRange(s)
	lo, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	hi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("%q: want LO..HI or one rate, whole KB/s (e.g. 1..4)", s)
	case lo < 1 || hi < lo || hi > 1<<20:
		return 0, 0, fmt.Errorf("%q: want 1 <= LO <= HI <= 1048576 KB/s", s)
	}
	return lo, hi, nil
}

// ParseShare reads the loss param: a share in (0, 1) ("" is 0.3).
func ParseShare(s string) (float64, error) {
	if strings.TrimSpace(s) == "" {
		return 0.3, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(v > 0 && v < 1) { // NaN too
		return 0, fmt.Errorf("%q: want a share of the data between 0 and 1 (e.g. 0.3)", s)
	}
	return v, nil
}

func parseAims(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if !slices.Contains(Aims, a) {
			return nil, fmt.Errorf("--param delay-at: unknown aim %q (known: %s)", a, strings.Join(Aims, ", "))
		}
		out = append(out, a)
	}
	return out, nil
}

// The checks of the network-speed faults' --param values, each one line
// naming the param.
func checkDelayRange(fault string) func(string) error {
	return func(v string) error {
		if _, _, err := ParseDelayRange(v); err != nil {
			return fmt.Errorf("--param %s: %w", fault, err)
		}
		return nil
	}
}

func checkJitter(v string) error {
	_, err := parseJitter(v)
	return err
}

func checkDirection(v string) error {
	if _, err := proxy.ParseDirection(strings.TrimSpace(v)); err != nil {
		return fmt.Errorf("--param delay-direction: %w", err)
	}
	return nil
}

func checkAims(v string) error {
	_, err := parseAims(v)
	return err
}

func checkBandwidth(v string) error {
	if _, _, err := ParseRate(v); err != nil {
		return fmt.Errorf("--param bandwidth: %w", err)
	}
	return nil
}

func checkLoss(v string) error {
	if _, err := ParseShare(v); err != nil {
		return fmt.Errorf("--param loss: %w", err)
	}
	return nil
}
