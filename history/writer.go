package history

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Recorder appends events to a history file as they happen. Each event is
// written with one write(2) call as soon as it is recorded, so a crash of the
// harness loses at most the event being written. Recorder assigns Seq and
// Time under one lock, so the file is ordered by time.
type Recorder struct {
	mu     sync.Mutex
	w      io.Writer
	closer io.Closer
	base   int64
	seq    int64
	err    error
	events []Event // kept in memory when keep is set
	keep   bool
	now    func() int64
	watch  func(Event) // sees every event, in order, under mu: must not block
}

// NewRecorder returns a Recorder that writes to w, with time 0 at base (a
// Monotonic reading). With keep set it also keeps every event in memory.
func NewRecorder(w io.Writer, base int64, keep bool) *Recorder {
	r := &Recorder{w: w, base: base, keep: keep, now: Monotonic}
	if c, ok := w.(io.Closer); ok {
		r.closer = c
	}
	return r
}

// Create opens path for appending a new history and returns its Recorder.
func Create(path string, base int64, keep bool) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	return NewRecorder(f, base, keep), nil
}

// Now returns the current time of the run, in ns since its base.
func (r *Recorder) Now() int64 { return r.now() - r.base }

// Base returns the CLOCK_MONOTONIC reading at time 0.
func (r *Recorder) Base() int64 { return r.base }

// Record stamps e with the next Seq and the current time, writes it and
// returns it. f, if not nil, runs under the recorder's lock just before the
// event is stamped: the guarded resource uses it to make its state change and
// its event one atomic step.
func (r *Recorder) Record(e Event, f func(*Event)) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f != nil {
		f(&e)
	}
	e.Seq = r.seq
	r.seq++
	e.Time = r.now() - r.base
	r.write(e)
	return e
}

// RecordAt is Record with a given time, for events whose time was taken
// elsewhere (the run header at time 0).
func (r *Recorder) RecordAt(e Event, t int64) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Seq = r.seq
	r.seq++
	e.Time = t
	r.write(e)
	return e
}

func (r *Recorder) write(e Event) {
	if r.keep {
		r.events = append(r.events, e)
	}
	if r.watch != nil {
		r.watch(e)
	}
	if r.err != nil {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		r.err = fmt.Errorf("encode event %d: %w", e.Seq, err)
		return
	}
	b = append(b, '\n')
	if _, err := r.w.Write(b); err != nil {
		r.err = fmt.Errorf("write history: %w", err)
	}
}

// Events returns a copy of the events kept in memory (nil unless keep).
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Watch makes f see every event recorded from now on, in order. f runs
// under the recorder's lock: it must return at once and must not record.
func (r *Recorder) Watch(f func(Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watch = f
}

// Err returns the first write error, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close closes the underlying file and returns the first error seen.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closer != nil {
		if err := r.closer.Close(); err != nil && r.err == nil {
			r.err = err
		}
		r.closer = nil
	}
	return r.err
}
