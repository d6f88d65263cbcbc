package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestDeadlock(t *testing.T) {
	tests := []struct {
		name     string
		info     func(*history.RunInfo)
		build    func(b *hb)
		want     int
		explains []string
	}{
		{name: "crashed holder", build: func(b *hb) {
			b.faultAt("crash-client", "client 2", 4100, -1)
			b.clientLife(2, 0, 4100)
			b.acq(2, 4000, 4010, "b")
			for t := 4200.0; t < 16500; t += 1000 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
		}, want: 1, explains: []string{"client 2 crashed at 4.10 s holding the lock (crash-client) and nobody could acquire it for the remaining 12.00 s (13 acquires failed: held"}},
		// A failover during the last hold brought back a lock row whose
		// release the replica had not applied: the explanation says so.
		{name: "after a failover", build: func(b *hb) {
			b.acq(3, 1000, 1010, "c")
			b.fault++
			b.add(1100, history.Event{Type: history.FaultStart, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 3})
			b.add(1300, history.Event{Type: history.Note, Client: 3, Detail: history.FailoverNote + "promoted mysql-2"})
			b.rel(3, 1790, 1800, "c", history.Fail, "-")
			b.add(2500, history.Event{Type: history.FaultEnd, Fault: "failover", FaultID: b.fault, Target: "primary", Client: 3})
			for t := 1900.0; t < 14000; t += 1000 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
		}, want: 1, explains: []string{"client 3, the last sure holder, called release at 1.79 s", "A failover promoted a replica at 1.30 s, during or after client 3's last hold"}},
		{name: "too short", build: func(b *hb) {
			b.acq(2, 0, 10, "b")
			b.rel(2, 20, 21, "b", history.Info, "")
			for t := 100.0; t < 4000; t += 1000 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
		}},
		{name: "too few failures", build: func(b *hb) {
			b.acqFail(1, 0, 1, history.ReasonHeld)
			b.acqFail(1, 9000, 9001, history.ReasonHeld)
		}},
		{name: "failures while held are fine", build: func(b *hb) {
			b.acq(2, 0, 10, "b")
			for t := 100.0; t < 9000; t += 1000 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
			b.rel(2, 9500, 9501, "b", history.OK, "b")
		}},
		{name: "other failure reasons do not count", build: func(b *hb) {
			for t := 100.0; t < 9000; t += 1000 {
				b.acqFail(1, t, t+1, history.ReasonError)
			}
		}},
		{name: "lost release, then a new holder", build: func(b *hb) {
			b.acq(2, 0, 10, "b")
			b.rel(2, 20, 21, "b", history.Info, "")
			for t := 100.0; t < 7000; t += 1000 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
			b.acq(3, 8000, 8001, "c")
		}, want: 1, explains: []string{"client 2, the last sure holder, called release at 20.0 ms, which was indeterminate and nobody could acquire it for 6.00 s"}},
		{name: "threshold from the run", info: func(i *history.RunInfo) { i.DeadlockMs = 1000 }, build: func(b *hb) {
			for t := 100.0; t < 2000; t += 500 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
		}, want: 1, explains: []string{"no client surely held the lock since the start of the run"}},
		{name: "threshold from the TTL", info: func(i *history.RunInfo) { i.Lease, i.TTLMillis = true, 500 }, build: func(b *hb) {
			for t := 100.0; t < 2500; t += 500 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
		}, want: 1},
		{name: "below the TTL threshold", info: func(i *history.RunInfo) { i.Lease, i.TTLMillis = true, 500 }, build: func(b *hb) {
			for t := 100.0; t < 1900; t += 500 {
				b.acqFail(1, t, t+1, history.ReasonHeld)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			if tt.info != nil {
				tt.info(&b.info)
			}
			tt.build(b)
			h := b.build(t)
			p, as := checkDeadlock(newFacts(h), int64(DefaultOptions().Slack))
			require.Len(t, as, tt.want)
			require.Equal(t, tt.want, p.Count)
			for _, s := range tt.explains {
				require.Contains(t, as[0].Explanation, s)
			}
		})
	}
}

func TestUnionHolds(t *testing.T) {
	holds := []Hold{
		{Client: 1, Start: 0, End: 10},
		{Client: 2, Start: 5, End: 20},
		{Client: 3, Start: 6, End: 8},
		{Client: 1, Start: 30, End: 40},
	}
	require.Equal(t, []heldSpan{{0, 20, 1}, {30, 40, 3}}, unionHolds(holds))
}
