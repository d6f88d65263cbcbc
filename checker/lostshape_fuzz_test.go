package checker

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// lostShapeFromBytes decodes a small history of issue 17's shape from
// fuzz bytes: one lease lock of a few milliseconds, lost acquires naming
// no owner that their client waits on for an op timeout many leases long
// (so that several are open at once, any of them holding the lock
// anonymously), and clean-up releases naming the lost acquire's owner,
// which no acquire carries, mostly refused "not-owner". The first byte
// picks the clients (2-5), the lease (1-3 ms) and the op timeout (4-11
// leases); then each 3 bytes are one operation: its client and kind, the
// pause before it, its duration and outcome.
func lostShapeFromBytes(data []byte) (*history.History, error) {
	if len(data) == 0 {
		data = []byte{0}
	}
	flags := data[0]
	clients := 2 + int(flags)%4
	ttl := int64(1+int(flags>>2)%3) * int64(time.Millisecond)
	timeout := ttl * int64(4+int(flags>>4)%8)
	info := &history.RunInfo{FormatVersion: history.FormatVersion, Lock: "lost-shape", Nemeses: []string{"none"},
		Clients: clients, Cluster: "simulated", Version: "fuzz", TTLMillis: ttl / int64(time.Millisecond)}
	info.Lease = true
	type timed struct {
		e history.Event
		t int64
	}
	const half = int64(500 * time.Microsecond)
	var evs []timed
	free := make([]int64, clients+1)
	last, lost := make([]string, clients+1), make([]string, clients+1)
	var opID int64
	for k := 1; k+2 < len(data); k += 3 {
		b0, b1, b2 := data[k], data[k+1], data[k+2]
		c := 1 + int(b0)%clients
		call := free[c] + int64(b1%5)*half
		end := call + int64(1+b2%4)*half
		opID++
		inv := history.Event{Type: history.Invoke, Client: c, OpID: opID, Op: history.Acquire}
		done := history.Event{Client: c, OpID: opID, Op: history.Acquire, Type: history.OK}
		switch b0 >> 3 % 8 {
		case 0, 1:
			done.Owner = "o" + strconv.FormatInt(opID, 10)
			last[c] = done.Owner
		case 2:
			done.Type, done.Reason = history.Fail, history.ReasonHeld
		case 3, 4:
			done.Type, done.Error, end = history.Info, "timeout", call+timeout
			lost[c] = "l" + strconv.FormatInt(opID, 10) // its owner, which no acquire carries
		case 5:
			inv.Op, done.Op, inv.Owner = history.Release, history.Release, last[c]
			if b2>>2&1 == 0 {
				done.Type, done.Reason = history.Fail, history.ReasonNotOwner
			}
		case 6:
			inv.Op, done.Op, inv.Owner = history.Release, history.Release, lost[c]
			if b2>>2&3 != 0 {
				done.Type, done.Reason = history.Fail, history.ReasonNotOwner
			}
		default:
			inv.Op, done.Op, inv.Owner = history.Release, history.Release, last[c]
			if b2>>2&1 == 0 {
				inv.Owner = lost[c]
			}
			done.Type, done.Error, end = history.Info, "timeout", call+timeout
		}
		evs = append(evs, timed{inv, call}, timed{done, end})
		free[c] = end
	}
	slices.SortStableFunc(evs, func(a, b timed) int { return cmpInt64(a.t, b.t) })
	out := []history.Event{{Type: history.Run, Info: info}}
	endAt := int64(0)
	for _, p := range evs {
		e := p.e
		e.Time = p.t
		endAt = max(endAt, p.t)
		out = append(out, e)
	}
	out = append(out, history.Event{Type: history.RunEnd, Time: endAt + 1, Detail: "done"})
	for i := range out {
		out[i].Seq = int64(i)
	}
	return history.FromEvents(out)
}

// FuzzLostShape: on any small history of issue 17's shape decoded from
// the input (lostShapeFromBytes), the lock sweep gives porcupine's verdict
// wherever porcupine gives one, and the window proof (windowproof.go),
// forced at some of its returns, fails none that porcupine passes. The seed corpus (and, in the normal run,
// TestLostShapeFuzzCorpus's 400 random inputs) runs in the normal test run:
//
//	go test ./checker/ -run XXX -fuzz FuzzLostShape
func FuzzLostShape(f *testing.F) {
	for seed := range uint64(64) {
		f.Add(lostShapeBytes(seed, 6+int(seed%19)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1+3*28 {
			data = data[:1+3*28] // keep porcupine's search small
		}
		h, err := lostShapeFromBytes(data)
		if err != nil {
			t.Skip(err)
		}
		v := judge(h, time.Second)
		requireAgree(t, "fuzz", h, v)
		windowsSound(t, "fuzz", h, v.porcupine) // (never a window failure porcupine passes)
	})
}

// lostShapeBytes is a random input of ops operations for lostShapeFromBytes.
func lostShapeBytes(seed uint64, ops int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x17))
	data := make([]byte, 1+3*ops)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data
}

// TestLostShapeFuzzCorpus runs FuzzLostShape's check on random inputs, and
// shows that the shape's rules decided something on them.
func TestLostShapeFuzzCorpus(t *testing.T) {
	n := 400
	if testing.Short() || raceEnabled {
		n = 100
	}
	var rules ruleCounts
	decided, windows, windowFails := 0, 0, 0
	for seed := range uint64(n) {
		h, err := lostShapeFromBytes(lostShapeBytes(1000+seed, 8+int(seed%21)))
		require.NoError(t, err)
		v := judge(h, time.Second)
		if requireAgree(t, "lost shape", h, v) {
			decided++
		}
		if seed%4 == 0 {
			// The window proof, forced at some returns: never a failure
			// porcupine passes.
			tr, f := windowsSound(t, "lost shape", h, v.porcupine)
			windows, windowFails = windows+tr, windowFails+f
		}
		kept, dropped, m := prepareLock(h, int64(DefaultOptions().Slack))
		r := runLockSweep(kept, dropped, m, DefaultOptions()).s.rules
		rules.spent += r.spent
		rules.expiredOverFree += r.expiredOverFree
		rules.refusedAtOnce += r.refusedAtOnce
	}
	t.Logf("%d histories, %d decided by porcupine; rules %+v; %d relaxed windows swept, %d returns with one that cannot be ordered", n, decided, rules, windows, windowFails)
	require.Positive(t, windows)
	require.Greater(t, decided, n/2)
	require.Positive(t, rules.expiredOverFree)
	require.Positive(t, rules.refusedAtOnce)
}
