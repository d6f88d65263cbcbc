package harness

import (
	"fmt"
	"sync"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// Detection is what the online checker saw during a run: the first
// violation, as soon as it was certain: a double holder (two clients that
// surely believed they held the lock at once, as checker.Holds defines
// holds) or a history that is no longer linearizable.
type Detection struct {
	// ViolationAt is when the violation began (the anomaly's start), and
	// CertainAt when the online checker was certain of it: run time, since
	// the start of the history.
	ViolationAt time.Duration `json:"violation_at_ns"`
	CertainAt   time.Duration `json:"certain_at_ns"`
	Clients     []int         `json:"clients"`
	Kind        string        `json:"kind"`
	// Stopped: the run stopped there (Options.StopEarly).
	Stopped bool `json:"stopped,omitempty"`
}

// detector runs checker.OnlineHolds (double holders) and
// checker.Incremental (linearizability) over the events of a run as they
// are recorded, in its own goroutine: the recorder hands it each event without
// waiting (a queue of its own; the workload never waits for the checker).
type detector struct {
	info    history.RunInfo
	holds   *checker.OnlineHolds
	inc     *checker.Incremental
	rec     *history.Recorder
	onFound func()

	mu     sync.Mutex
	queue  []history.Event
	closed bool
	wake   chan struct{}
	done   chan struct{}
	found  *Detection
}

// detect starts a detector on rec for a run described by info; onFound
// runs once, in the detector's goroutine, when a violation is certain.
func detect(rec *history.Recorder, info history.RunInfo, onFound func()) *detector {
	d := &detector{
		info: info, holds: checker.NewOnlineHolds(info),
		inc: checker.NewIncremental(info, checker.DefaultOptions()), rec: rec, onFound: onFound,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	rec.Watch(func(e history.Event) {
		d.mu.Lock()
		d.queue = append(d.queue, e)
		d.mu.Unlock()
		select {
		case d.wake <- struct{}{}:
		default:
		}
	})
	go d.loop()
	return d
}

func (d *detector) loop() {
	defer close(d.done)
	for {
		d.mu.Lock()
		batch, closed := d.queue, d.closed
		d.queue = nil
		d.mu.Unlock()
		for _, e := range batch {
			if e.Type == history.Note || d.found != nil {
				continue
			}
			var found *Detection
			if a := d.holds.Add(e); a != nil {
				found = &Detection{ViolationAt: time.Duration(a.Start), CertainAt: time.Duration(e.Time), Clients: a.Clients, Kind: string(a.Kind)}
			}
			// The online lock checker models an exclusive lock: read-write
			// runs get the double-holder check only.
			if !d.info.ReadWrite {
				if as := d.inc.Add(e); found == nil && len(as) > 0 {
					found = &Detection{ViolationAt: time.Duration(as[0].Start), CertainAt: time.Duration(e.Time), Clients: as[0].Clients, Kind: string(as[0].Kind)}
				}
			}
			if found == nil {
				continue
			}
			d.mu.Lock()
			d.found = found
			d.mu.Unlock()
			d.rec.Record(history.Event{Type: history.Note, Detail: fmt.Sprintf(
				"online checker: a %s violation that began at %.3fs (clients %v) is certain", found.Kind, found.ViolationAt.Seconds(), found.Clients)}, nil)
			if d.onFound != nil {
				d.onFound()
			}
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-d.wake
		}
	}
}

// finish waits until the detector has read every event recorded (call it
// after the last one) and returns what it found, nil if nothing.
func (d *detector) finish() *Detection {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.found
}
