package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
)

// Read-write lock properties (RunInfo.ReadWrite: acquires carry a mode).
const (
	// KindRWExclusion: a writer's hold overlapped another client's hold
	// (reader or writer): the write lock did not exclude.
	KindRWExclusion Kind = "rw-exclusion"
	// KindReadersShare names the property that readers did share the lock:
	// a read-write lock whose readers never overlap although they had the
	// chance is needlessly exclusive. A finding about availability, not
	// safety: the property fails without anomalies, so the verdict is not
	// changed by it.
	KindReadersShare = "readers-share"
)

// holdMode returns the mode of the acquire that began hd ("" for an
// exclusive lock, which counts as a writer).
func holdMode(h *history.History, hd *Hold) string {
	if hd.AcquireIndex >= 0 && hd.AcquireIndex < len(h.Ops) {
		return h.Ops[hd.AcquireIndex].Mode
	}
	return ""
}

// ReadersShare reports whether a and b are two read holds of a read-write
// lock, which may overlap: the double-holder check skips such pairs.
func ReadersShare(h *history.History, a, b *Hold) bool {
	return h.Info.ReadWrite && holdMode(h, a) == history.ModeRead && holdMode(h, b) == history.ModeRead
}

// appendReadWrite appends, for a read-write run only, the rw-exclusion
// and readers-share properties and the rw-exclusion anomalies (other runs
// get nothing, so their results are unchanged).
func appendReadWrite(f *facts, props []Property, as []Anomaly) ([]Property, []Anomaly) {
	if !f.h.Info.ReadWrite {
		return props, as
	}
	t0 := time.Now()
	p, out, share := checkReadWriteBoth(f)
	p.Millis = float64(time.Since(t0).Nanoseconds()) / 1e6
	return append(props, p, share), append(as, out...)
}

// checkReadWriteBoth finds writers that overlapped another client's hold
// (rw-exclusion) and measures how much readers shared the lock
// (readers-share). A sweep over the holds sorted by start, as for double
// holders.
func checkReadWriteBoth(f *facts) (Property, []Anomaly, Property) {
	h, holds := f.h, f.holds
	p := Property{Name: string(KindRWExclusion), Engine: "interval sweep", Status: Pass}
	share := Property{Name: string(KindReadersShare), Engine: "interval sweep", Status: Pass}
	if !h.Info.ReadWrite {
		p.Status, p.Detail = Skipped, "not a read-write lock"
		share.Status, share.Detail = Skipped, "not a read-write lock"
		return p, nil, share
	}
	var out []Anomaly
	var active []int
	readerPairs, maxReaders, reads, writes := 0, 0, 0, 0
	for i := range holds {
		b := &holds[i]
		if holdMode(h, b) == history.ModeRead {
			reads++
		} else {
			writes++
		}
		kept := active[:0]
		for _, j := range active {
			if holds[j].End > b.Start {
				kept = append(kept, j)
			}
		}
		active = kept
		concurrentReaders := 0
		for _, j := range active {
			a := &holds[j]
			if a.Client == b.Client {
				continue
			}
			if ReadersShare(h, a, b) {
				readerPairs++
				concurrentReaders++
				continue
			}
			out = append(out, rwAnomaly(h, a, b))
		}
		if holdMode(h, b) == history.ModeRead {
			maxReaders = max(maxReaders, concurrentReaders+1)
		}
		if b.End > b.Start {
			active = append(active, i)
		}
	}
	p.Count = len(out)
	if len(out) > 0 {
		p.Status = Fail
	}
	p.Detail = fmt.Sprintf("%d read holds, %d write holds", reads, writes)

	chances := readerChances(f)
	share.Detail = fmt.Sprintf("%d overlapping reader pairs, at most %d readers at once; %d read acquires refused while only readers held the lock", readerPairs, maxReaders, chances)
	switch {
	case readerPairs > 0:
		share.Status = Pass
	case chances > 0:
		share.Status, share.Count = Fail, chances
		share.Detail = "needlessly exclusive (availability, not safety): " + share.Detail
	default:
		share.Status = Skipped
		share.Detail = "readers never had the chance to share: " + share.Detail
	}
	return p, out, share
}

// readerChances counts read acquires that failed because the lock was held
// while, for the whole acquire, it was held by readers only (at least one
// read hold covering it, no write hold overlapping it).
func readerChances(f *facts) int {
	h := f.h
	var readHolds, writeHolds []*Hold
	for k := range f.holds {
		hd := &f.holds[k]
		if holdMode(h, hd) == history.ModeRead {
			readHolds = append(readHolds, hd)
		} else {
			writeHolds = append(writeHolds, hd)
		}
	}
	n := 0
	for _, i := range f.heldFails {
		op := &h.Ops[i]
		if op.Mode != history.ModeRead || op.Return == history.Never {
			continue
		}
		covered := false
		for _, r := range readHolds {
			if r.Client != op.Client && r.Start <= op.Call && r.End >= op.Return {
				covered = true
				break
			}
		}
		if !covered {
			continue
		}
		clash := false
		for _, w := range writeHolds {
			if w.Start < op.Return && w.End > op.Call {
				clash = true
				break
			}
		}
		if !clash {
			n++
		}
	}
	return n
}

// rwAnomaly describes b overlapping a where at least one is a writer.
func rwAnomaly(h *history.History, a, b *Hold) Anomaly {
	end := min(a.End, b.End)
	role := func(hd *Hold) string {
		if holdMode(h, hd) == history.ModeRead {
			return "reader"
		}
		return "writer"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "client %d (%s) acquired the lock at %s while client %d (%s), which acquired it at %s, still held it",
		b.Client, role(b), at(b.Start), a.Client, role(a), at(a.Start))
	if s := clientFaultSentence(h, a.Client, a.Start, end); s != "" {
		sb.WriteString("; " + s)
	}
	sb.WriteString(": a writer must exclude every other holder.")
	return Anomaly{
		Kind:        KindRWExclusion,
		Clients:     []int{a.Client, b.Client},
		Start:       b.Start,
		End:         end,
		Ops:         []int64{a.AcquireOp, b.AcquireOp},
		Faults:      faultsDuring(h, b.Start, end),
		Explanation: sb.String(),
	}
}

// ReadWriteStats is the read-write summary of a history, for tests and
// reports: both properties, and the rw-exclusion anomalies.
func ReadWriteStats(h *history.History) (exclusion, share Property, anomalies []Anomaly) {
	f := newFacts(h)
	exclusion, anomalies, share = checkReadWriteBoth(f)
	sort.SliceStable(anomalies, func(i, j int) bool { return anomalies[i].Start < anomalies[j].Start })
	return exclusion, share, anomalies
}
