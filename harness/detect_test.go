package harness

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// feedDetector records events (times in ms) through a recorder watched by
// a detector and returns what it found.
func feedDetector(t *testing.T, info history.RunInfo, events []history.Event) *Detection {
	t.Helper()
	var buf bytes.Buffer
	rec := history.NewRecorder(&buf, 0, false)
	rec.RecordAt(history.Event{Type: history.Run, Info: &info}, 0)
	d := detect(rec, info, nil)
	for _, e := range events {
		rec.RecordAt(e, e.Time*1e6)
	}
	return d.finish()
}

func TestDetectorDoubleHolder(t *testing.T) {
	acq := func(c int, id int64, call, ret int64, owner string) []history.Event {
		return []history.Event{
			{Type: history.Invoke, Client: c, Op: history.Acquire, OpID: id, Time: call},
			{Type: history.OK, Client: c, Op: history.Acquire, OpID: id, Owner: owner, Time: ret},
		}
	}
	rel := func(c int, id int64, call, ret int64, owner string) []history.Event {
		return []history.Event{
			{Type: history.Invoke, Client: c, Op: history.Release, OpID: id, Owner: owner, Time: call},
			{Type: history.OK, Client: c, Op: history.Release, OpID: id, Owner: owner, Removed: owner, Time: ret},
		}
	}
	cat := func(parts ...[]history.Event) []history.Event {
		var out []history.Event
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	lease := history.RunInfo{FormatVersion: history.FormatVersion, Lock: "t", Traits: history.Traits{Lease: true}, TTLMillis: 100, Clients: 2}

	// Client 2 granted while client 1, past its lease, still holds.
	d := feedDetector(t, lease, cat(acq(1, 1, 0, 1, "a"), acq(2, 2, 150, 151, "b"), rel(1, 3, 300, 301, "a")))
	require.NotNil(t, d)
	require.Equal(t, string(checker.KindDoubleHolder), d.Kind)
	require.Equal(t, []int{1, 2}, d.Clients)
	require.Equal(t, 151*time.Millisecond, d.CertainAt)

	// Released first: nothing.
	require.Nil(t, feedDetector(t, lease, cat(acq(1, 1, 0, 1, "a"), rel(1, 2, 50, 51, "a"), acq(2, 3, 52, 53, "b"))))

	// A crashed holder holds nothing from its crash on.
	crash := history.Event{Type: history.FaultStart, Fault: "crash-client", FaultID: 1, Client: 1, Target: "client 1", Time: 120}
	require.Nil(t, feedDetector(t, lease, cat(acq(1, 1, 0, 1, "a"), []history.Event{crash}, acq(2, 2, 150, 151, "b"))))

	// A client that checks its own validity is left to the final check.
	careful := lease
	careful.ChecksValidity = true
	require.Nil(t, feedDetector(t, careful, cat(acq(1, 1, 0, 1, "a"), acq(2, 2, 150, 151, "b"))))

	// Two readers of a read-write lock share it: nothing, from either
	// online check.
	rw := history.RunInfo{FormatVersion: history.FormatVersion, Lock: "t", Clients: 2, ReadWrite: true}
	read := func(evs []history.Event) []history.Event {
		for i := range evs {
			evs[i].Mode = history.ModeRead
		}
		return evs
	}
	require.Nil(t, feedDetector(t, rw, cat(read(acq(1, 1, 0, 1, "a")), read(acq(2, 2, 10, 11, "b")), rel(1, 3, 20, 21, "a"), rel(2, 4, 22, 23, "b"))))

	// Without a lease, a grant while the lock is held is not linearizable
	// either; the double holder is what is reported first.
	mutex := history.RunInfo{FormatVersion: history.FormatVersion, Lock: "t", Clients: 2}
	d = feedDetector(t, mutex, cat(acq(1, 1, 0, 1, "a"), acq(2, 2, 10, 11, "b")))
	require.NotNil(t, d)
	require.Equal(t, string(checker.KindDoubleHolder), d.Kind)
}
