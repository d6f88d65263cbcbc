package nemesis

import (
	"fmt"
	"math"
	"time"

	"github.com/locktest/locktest/clusters/proxy"
)

// maxLossProbes bounds the probes of a lossy link. Each probe's request
// and answer escape a loss of share s with the odds (1-s)^2, so n probes
// all escape it with the odds (1-s)^(2n): lossProbes sizes n for odds below
// lossProofOdds (0.3: 13 probes), up to maxLossProbes.
const (
	maxLossProbes = 200
	lossProofOdds = 1e-4
)

// lossProbes is how many probes a loss of share s needs (see
// maxLossProbes), and the odds that they all escape it.
func lossProbes(s float64) (n int, escape float64) {
	per := (1 - s) * (1 - s)
	n = int(math.Ceil(math.Log(lossProofOdds) / math.Log(per)))
	n = min(max(n, 1), maxLossProbes)
	return n, math.Pow(per, float64(n))
}

// prove probes link, which t has just struck for d, and returns an error
// when the probe saw no effect: a delayed link answered in less than the
// delay, a stalled one answered, a reset one answered, a rate-limited one
// answered faster than its rate allows. A probe that could not be made
// (the server down at that moment: a kill racing the strike) proves
// nothing either way and is only noted.
func (s *striker) prove(link *proxy.Link, t proxy.Toxic, d time.Duration) error {
	what := fmt.Sprintf("the %s on %s->%s", s.fault, link.Client.Name, link.Server.Name)
	timeout := min(probeTimeout, d/3)
	var want time.Duration // the least time to the first byte
	switch t.Kind {
	case proxy.Delay:
		ways := time.Duration(1)
		if t.Direction == proxy.Both {
			ways = 2
		}
		want = ways * max(t.Latency-t.Jitter, 0) * 9 / 10
		timeout = ways*(t.Latency+t.Jitter) + time.Second
	case proxy.Loss:
		timeout = 8 * time.Second
		want = 200 * time.Millisecond * 9 / 10
	case proxy.Bandwidth:
		timeout = 5 * time.Second
	}
	probes, escape := 1, 0.0
	if t.Kind == proxy.Loss {
		probes, escape = lossProbes(t.Share)
	}
	var m proxy.Measure
	for i := 0; i < probes; i++ {
		var err error
		if m, err = link.Probe(s.ctx, timeout); err != nil {
			note(s.env, fmt.Sprintf("%s not measured: %v", what, err))
			return nil
		}
		if t.Kind != proxy.Loss || m.FirstByte >= want || m.Bytes == 0 {
			break
		}
	}
	got := measured(m)
	if t.Kind == proxy.Loss && m.Bytes > 0 && m.FirstByte < want && escape >= lossProofOdds {
		// Too rare a loss to show in maxLossProbes probes: not a proof
		// that it is not there.
		note(s.env, fmt.Sprintf("%s not shown: %d probes all escaped a loss of %.1f%% (odds %.2g)", what, probes, 100*t.Share, escape))
		return nil
	}
	switch {
	case t.Kind == proxy.Stall && !m.Silent:
		return fmt.Errorf("%s %w: %s within %s", what, ErrLinkFaultNoEffect, got, timeout)
	case t.Kind == proxy.Reset && !m.Reset:
		return fmt.Errorf("%s %w: %s", what, ErrLinkFaultNoEffect, got)
	case t.Kind == proxy.Stall || t.Kind == proxy.Reset:
	case m.Reset:
		note(s.env, fmt.Sprintf("%s not measured: the server closed the probe's connection", what))
		return nil
	case m.Silent:
		// Slower than the probe's patience: in effect.
	case t.Kind == proxy.Bandwidth:
		want = time.Duration(m.Bytes) * time.Millisecond / time.Duration(t.RateKB) / 2
		fallthrough
	default:
		if m.FirstByte < want {
			return fmt.Errorf("%s %w: %s, expected at least %s", what, ErrLinkFaultNoEffect, got, want.Round(time.Millisecond))
		}
	}
	note(s.env, fmt.Sprintf("%s measured: %s", what, got))
	return nil
}

// measured says what a probe saw.
func measured(m proxy.Measure) string {
	switch {
	case m.Reset:
		return "the connection was reset before any answer"
	case m.Silent:
		return "no answer"
	}
	return fmt.Sprintf("the answer's first %d bytes after %s", m.Bytes, m.FirstByte.Round(time.Millisecond))
}
