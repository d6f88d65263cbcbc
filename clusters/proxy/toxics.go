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
	return &heldState{r: rand.New(rand.NewPCG(t.Seed, t.streams.Add(1)))}
}

// GetBufferSize lets chunks queue while earlier ones are held back.
func (t *seeded) GetBufferSize() int { return 1024 }

// Cleanup (Toxiproxy calls it as the toxic is removed) lets out at once
// the chunk the stream held when it was interrupted: no data is dropped,
// and the chunks still queued follow it in order.
func (t *seeded) Cleanup(stub *toxics.ToxicStub) {
	if st, ok := stub.State.(*heldState); ok && st.pending != nil {
		// Bounded as Toxiproxy bounds its own flush: a link whose writer
		// is gone reads nothing more.
		_ = stub.WriteOutput(st.pending, cleanupWrite)
		st.pending = nil
	}
}

// cleanupWrite bounds Cleanup's wait for the link to take the held chunk.
const cleanupWrite = 5 * time.Second

// heldState is a stream's state in the toxics that hold chunks back: its
// seeded source, and the chunk it holds until due. Toxiproxy interrupts a
// stream's toxic whenever a toxic is added to or removed from the same
// direction of the link (another fault's toxic, for one), then runs it
// again: the held chunk stays held across that, for its full time; only
// the toxic's removal lets it out early (Cleanup).
type heldState struct {
	r       *rand.Rand
	pending *stream.StreamChunk
	due     time.Time
}

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
	st := stateOf(stub, t.Seed)
	pipeHeld(stub, st, func() time.Duration { return t.draw(st.r) }, true)
}

// lossToxic is Loss.
type lossToxic struct {
	Share float64 `json:"share"`
	RTOMs int64   `json:"rto_ms"`
	seeded
}

func (t *lossToxic) Pipe(stub *toxics.ToxicStub) {
	st := stateOf(stub, t.Seed)
	pipeHeld(stub, st, func() time.Duration {
		var wait time.Duration
		for rto := time.Duration(t.RTOMs) * time.Millisecond; st.r.Float64() < t.Share; rto = min(2*rto, maxRTO) {
			wait += rto
		}
		return wait
	}, false)
}

// pipeHeld passes every chunk on after holding it back hold() (counted
// from its arrival when sinceArrival, else from now) until the link closes
// or the toxic is interrupted; a chunk held when it is interrupted stays
// in st for the next run (or Cleanup).
func pipeHeld(stub *toxics.ToxicStub, st *heldState, hold func() time.Duration, sinceArrival bool) {
	for {
		if st.pending == nil {
			select {
			case <-stub.Interrupt:
				return
			case c := <-stub.Input:
				if c == nil {
					stub.Close()
					return
				}
				from := time.Now()
				if sinceArrival {
					from = c.Timestamp
				}
				st.pending, st.due = c, from.Add(hold())
			}
		}
		if !st.release(stub) {
			return
		}
	}
}

// release passes the held chunk on once it is due; false when the toxic
// was interrupted first, or while the link was not taking it (the chunk
// stays held).
func (st *heldState) release(stub *toxics.ToxicStub) bool {
	if d := time.Until(st.due); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-stub.Interrupt:
			return false
		}
	}
	select {
	case stub.Output <- st.pending:
		st.pending = nil
		return true
	case <-stub.Interrupt:
		return false
	}
}

// stateOf is the stub's state (a toxic added while a stream was running
// has one too: Toxiproxy makes the state then).
func stateOf(stub *toxics.ToxicStub, seed uint64) *heldState {
	if st, ok := stub.State.(*heldState); ok {
		return st
	}
	st := &heldState{r: rand.New(rand.NewPCG(seed, 0))}
	stub.State = st
	return st
}

func init() {
	toxics.Register(string(Delay), new(delayToxic))
	toxics.Register(string(Loss), new(lossToxic))
}
