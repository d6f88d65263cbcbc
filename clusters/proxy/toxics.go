package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// Kind is a kind of toxic: Toxiproxy's own (timeout, reset_peer,
// bandwidth) or one of locktest's (registered with Toxiproxy under the
// same name), whose random draws are seeded by the run's --seed.
type Kind string

const (
	// Delay holds every chunk back by a latency +/- a jitter drawn per
	// chunk from the run's seed (Toxiproxy's latency toxic draws its
	// jitter from an unseeded source).
	Delay Kind = "locktest_delay"
	// Loss holds back a share of the chunks, as TCP does with a lost
	// segment: each loss costs a retransmission timeout, which doubles
	// while the retransmission is lost too. A TCP stream never loses data
	// in the middle: a lossy link is a link whose data arrives late, by
	// bursts.
	Loss Kind = "locktest_loss"
	// Stall passes nothing and closes nothing (Toxiproxy's timeout toxic
	// with no timeout); the data sent meanwhile is lost, and the
	// connections it held are closed when it is removed.
	Stall Kind = "timeout"
	// Reset resets a connection as soon as data arrives on it (Toxiproxy's
	// reset_peer with no timeout, and the link's connections set to close
	// with a reset).
	Reset Kind = "reset_peer"
	// Bandwidth limits the rate (Toxiproxy's bandwidth toxic, in KB/s).
	Bandwidth Kind = "bandwidth"
)

// Direction is which way of a link a toxic acts on.
type Direction string

const (
	Both       Direction = "both"
	Upstream   Direction = "upstream"   // client to server: the requests
	Downstream Direction = "downstream" // server to client: the answers
)

// ParseDirection reads a direction ("" is Both).
func ParseDirection(s string) (Direction, error) {
	switch d := Direction(s); d {
	case "":
		return Both, nil
	case Both, Upstream, Downstream:
		return d, nil
	}
	return "", fmt.Errorf("unknown direction %q (known: %s, %s, %s)", s, Both, Upstream, Downstream)
}

// streams are Toxiproxy's streams d names.
func (d Direction) streams() []string {
	switch d {
	case Upstream:
		return []string{stream.Upstream.String()}
	case Downstream:
		return []string{stream.Downstream.String()}
	}
	return []string{stream.Upstream.String(), stream.Downstream.String()}
}

// Toxic is one toxic to put on links.
type Toxic struct {
	Kind      Kind
	Direction Direction
	Latency   time.Duration // Delay
	Jitter    time.Duration // Delay: +/- this, drawn per chunk
	RateKB    int64         // Bandwidth, KB/s
	Share     float64       // Loss: the share of chunks lost (0..1)
}

// attributes are the toxic's attributes as Toxiproxy reads them.
func (t Toxic) attributes(seed uint64) (any, error) {
	switch t.Kind {
	case Delay:
		return map[string]any{"latency_us": t.Latency.Microseconds(), "jitter_us": t.Jitter.Microseconds(), "seed": seed}, nil
	case Loss:
		if t.Share < 0 || t.Share >= 1 {
			return nil, fmt.Errorf("loss share %v out of [0, 1)", t.Share)
		}
		return map[string]any{"share": t.Share, "rto_ms": initialRTO.Milliseconds(), "seed": seed}, nil
	case Stall:
		return toxics.TimeoutToxic{Timeout: 0}, nil
	case Reset:
		return toxics.ResetToxic{Timeout: 0}, nil
	case Bandwidth:
		if t.RateKB <= 0 {
			return nil, fmt.Errorf("bandwidth rate %d KB/s: not positive", t.RateKB)
		}
		return toxics.BandwidthToxic{Rate: t.RateKB}, nil
	}
	return nil, fmt.Errorf("unknown toxic %q", t.Kind)
}

// Apply puts t on every link of links and returns the function that takes
// it off again (call it once, on every exit path). On an error nothing of
// t stays.
func (s *Set) Apply(links []*Link, t Toxic) (remove func() error, err error) {
	type placed struct {
		l    *Link
		name string
	}
	var done []placed
	remove = func() error {
		if t.Kind == Reset {
			for _, l := range links {
				l.setAbrupt(false)
			}
		}
		var errs []error
		for _, p := range done {
			if err := p.l.proxy.Toxics.RemoveToxic(context.Background(), p.name); err != nil {
				errs = append(errs, fmt.Errorf("remove %s from %s: %w", p.name, p.l.proxy.Name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, l := range links {
		if t.Kind == Reset {
			l.setAbrupt(true)
		}
		for _, st := range t.Direction.streams() {
			n := s.counter.Add(1)
			attrs, err := t.attributes(uint64(s.seed)*1000003 + uint64(n))
			if err != nil {
				return nil, errors.Join(err, remove())
			}
			name := fmt.Sprintf("lt%d-%s", n, st)
			body, err := json.Marshal(map[string]any{"name": name, "type": string(t.Kind), "stream": st, "toxicity": 1.0, "attributes": attrs})
			if err != nil {
				return nil, errors.Join(err, remove())
			}
			if _, err := l.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
				return nil, errors.Join(fmt.Errorf("add %s to %s: %w", t.Kind, l.proxy.Name, err), remove())
			}
			done = append(done, placed{l, name})
		}
	}
	return remove, nil
}

// setAbrupt makes the link's connections close with a reset (SO_LINGER
// 0) while on: those it has now and those it opens until it is turned off.
// What the reset fault's toxic closes, the other end then sees reset.
func (l *Link) setAbrupt(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.abrupt = on
	if !on {
		return
	}
	for c := range l.conns {
		_ = c.SetLinger(0)
	}
}

// initialRTO is the first retransmission timeout of a lost chunk (Linux's
// minimum RTO is 200 ms).
const initialRTO = 200 * time.Millisecond

// maxRTO caps the doubling of the retransmission timeout.
const maxRTO = 3200 * time.Millisecond

// seeded is what locktest's toxics share: the run's seed, and a source of
// their own per stream drawn from it (Toxiproxy makes a stream's state when
// the stream starts, or when the toxic is added to a running one).
type seeded struct {
	Seed    uint64 `json:"seed"`
	streams atomic.Uint64
}

// NewState gives each stream its own seeded source.
func (t *seeded) NewState() any {
	return rand.New(rand.NewPCG(t.Seed, t.streams.Add(1)))
}

// GetBufferSize lets chunks queue while earlier ones are held back.
func (t *seeded) GetBufferSize() int { return 1024 }

// delayToxic is Delay.
type delayToxic struct {
	LatencyUs int64 `json:"latency_us"`
	JitterUs  int64 `json:"jitter_us"`
	seeded
}

func (t *delayToxic) draw(r *rand.Rand) time.Duration {
	d := t.LatencyUs
	if t.JitterUs > 0 {
		d += r.Int64N(2*t.JitterUs+1) - t.JitterUs
	}
	return time.Duration(max(d, 0)) * time.Microsecond
}

func (t *delayToxic) Pipe(stub *toxics.ToxicStub) {
	r := stateRand(stub, t.Seed)
	pipeHeld(stub, func() time.Duration { return t.draw(r) }, true)
}

// lossToxic is Loss.
type lossToxic struct {
	Share float64 `json:"share"`
	RTOMs int64   `json:"rto_ms"`
	seeded
}

func (t *lossToxic) Pipe(stub *toxics.ToxicStub) {
	r := stateRand(stub, t.Seed)
	pipeHeld(stub, func() time.Duration {
		var wait time.Duration
		for rto := time.Duration(t.RTOMs) * time.Millisecond; r.Float64() < t.Share; rto = min(2*rto, maxRTO) {
			wait += rto
		}
		return wait
	}, false)
}

// pipeHeld passes every chunk on after holding it back hold() (counted
// from its arrival when sinceArrival, else from now) until the link closes
// or the toxic is interrupted.
func pipeHeld(stub *toxics.ToxicStub, hold func() time.Duration, sinceArrival bool) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			d := hold()
			if sinceArrival {
				d -= time.Since(c.Timestamp)
			}
			if !holdChunk(stub, c, d) {
				return
			}
		}
	}
}

// holdChunk passes chunk c on after d; false when the toxic was interrupted
// meanwhile (c is passed on at once: no data is dropped).
func holdChunk(stub *toxics.ToxicStub, c *stream.StreamChunk, d time.Duration) bool {
	if d <= 0 {
		stub.Output <- c
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		stub.Output <- c
		return true
	case <-stub.Interrupt:
		stub.Output <- c
		return false
	}
}

// stateRand is the stub's seeded source (a toxic added while a stream
// was running has one too: Toxiproxy makes the state then).
func stateRand(stub *toxics.ToxicStub, seed uint64) *rand.Rand {
	if r, ok := stub.State.(*rand.Rand); ok {
		return r
	}
	return rand.New(rand.NewPCG(seed, 0))
}

func init() {
	toxics.Register(string(Delay), new(delayToxic))
	toxics.Register(string(Loss), new(lossToxic))
}
