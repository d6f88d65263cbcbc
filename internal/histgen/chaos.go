package histgen

import (
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/locktest/locktest/history"
)

// FromBytes decodes data into a small arbitrary lock history, for fuzzing
// and for differential tests that want edge cases a simulated server never
// produces: outcomes that contradict each other, equal times, releases of
// owners nobody acquired, operations that never complete.
//
// The first byte chooses the run's flags (lease, reentrant, renewing; TTL
// 2 to 9 ms) and the number of clients (2 to 4). Every following 4 bytes
// are one operation: its client and kind and outcome, the gap since that
// client's previous operation ended (0 to 3 ms, in halves), its duration,
// and which owner a release names. Times are whole or half milliseconds,
// so ties are common. Each client runs one operation at a time.
func FromBytes(data []byte) Output { return fromBytes(data, false) }

// FromBytesRW is FromBytes for a read-write lock: the last byte of an
// acquire chooses its mode (read or write).
func FromBytesRW(data []byte) Output { return fromBytes(data, true) }

func fromBytes(data []byte, rw bool) Output {
	if len(data) == 0 {
		data = []byte{0}
	}
	flags := data[0]
	info := &history.RunInfo{
		FormatVersion: history.FormatVersion,
		Lock:          "chaos",
		Nemeses:       []string{"none"},
		Clients:       2 + int(flags>>6)%3,
		Cluster:       "simulated",
		Version:       "histgen",
	}
	if flags&1 != 0 {
		info.Lease = true
		info.TTLMillis = 2 + int64(flags>>1&7)
		info.Renews = flags&0x10 != 0 && flags&0x20 != 0
	}
	info.Reentrant = flags&0x30 == 0x20
	info.ReadWrite = rw

	type pending struct {
		e    history.Event
		time int64
	}
	var evs []pending
	free := make([]int64, info.Clients+1) // when each client's last operation ended
	last := make([]string, info.Clients+1)
	acquired := 0
	var opID int64
	const half = 500_000 // ns
	for k := 1; k+3 < len(data); k += 4 {
		b0, b1, b2, b3 := data[k], data[k+1], data[k+2], data[k+3]
		c := 1 + int(b0)%info.Clients
		call := free[c] + int64(b1%7)*half
		dur := int64(b2%7) * half
		opID++
		inv := history.Event{Type: history.Invoke, Client: c, OpID: opID}
		done := history.Event{Client: c, OpID: opID}
		never := false
		if b0&0x80 == 0 {
			inv.Op, done.Op = history.Acquire, history.Acquire
			if rw {
				inv.Mode = history.ModeWrite
				if b3&1 == 0 {
					inv.Mode = history.ModeRead
				}
			}
			switch b0 >> 4 & 7 {
			case 0, 1, 2:
				acquired++
				done.Type, done.Owner = history.OK, "o"+strconv.Itoa(acquired)
				last[c] = done.Owner
			case 3, 4:
				done.Type, done.Reason = history.Fail, history.ReasonHeld
			case 5:
				done.Type, done.Error = history.Info, "timeout"
			case 6:
				never = true
			default:
				done.Type, done.Reason = history.Fail, history.ReasonError
			}
		} else {
			inv.Op, done.Op = history.Release, history.Release
			switch b3 % 4 {
			case 0, 1:
				inv.Owner = last[c]
			case 2:
				if acquired > 0 {
					inv.Owner = "o" + strconv.Itoa(1+int(b3>>2)%acquired)
				}
			default:
				inv.Owner = "x" + strconv.Itoa(int(b3>>2)%3) // an owner no acquire carries
			}
			switch b0 >> 4 & 7 {
			case 0, 1, 2:
				done.Type = history.OK
			case 3, 4:
				done.Type, done.Reason = history.Fail, history.ReasonNotOwner
			case 5:
				done.Type, done.Error = history.Info, "timeout"
			case 6:
				never = true
			default:
				done.Type, done.Reason = history.Fail, history.ReasonError
			}
		}
		evs = append(evs, pending{inv, call})
		if never {
			free[c] = call + dur
			continue
		}
		evs = append(evs, pending{done, call + dur})
		free[c] = call + dur
	}
	slices.SortStableFunc(evs, func(a, b pending) int {
		switch {
		case a.time < b.time:
			return -1
		case a.time > b.time:
			return 1
		}
		return 0
	})
	out := Output{Events: make([]history.Event, 0, len(evs)+2)}
	out.Events = append(out.Events, history.Event{Type: history.Run, Info: info})
	end := int64(0)
	for _, p := range evs {
		e := p.e
		e.Time = p.time
		end = max(end, p.time)
		out.Events = append(out.Events, e)
	}
	out.Events = append(out.Events, history.Event{Type: history.RunEnd, Time: end + 1, Detail: "done"})
	for i := range out.Events {
		out.Events[i].Seq = int64(i)
	}
	return out
}

// Chaos returns FromBytes of ops random operations drawn from seed.
func Chaos(seed uint64, ops int) Output { return FromBytes(chaosBytes(seed, ops)) }

// ChaosRW returns FromBytesRW of ops random operations drawn from seed.
func ChaosRW(seed uint64, ops int) Output { return FromBytesRW(chaosBytes(seed, ops)) }

func chaosBytes(seed uint64, ops int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0xc4a05))
	data := make([]byte, 1+4*ops)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data
}
