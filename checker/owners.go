package checker

import (
	"fmt"
	"strings"

	"github.com/locktest/locktest/history"
)

// Owners and lock operations: the history's operations as the model reads
// them, and their descriptions.

// owners interns owner ids for the engines: 0 is the unknown owner. known
// marks the ids an acquire carries.
type owners struct {
	ids   map[string]int32
	names []string
	known []bool
}

// newOwners interns owners, about n of them (0: unknown).
func newOwners(n int) *owners {
	return &owners{ids: make(map[string]int32, n), names: []string{""}, known: []bool{false}}
}

// isKnown reports whether an acquire in the history carries owner id.
func (o *owners) isKnown(id int32) bool {
	return o != nil && id > 0 && int(id) < len(o.known) && o.known[id]
}

func (o *owners) id(name string) int32 {
	if name == "" {
		return 0
	}
	if id, ok := o.ids[name]; ok {
		return id
	}
	id := int32(len(o.names))
	o.ids[name] = id
	o.names = append(o.names, name)
	o.known = append(o.known, false)
	return id
}

func (o *owners) name(id int32) string {
	if id <= 0 || int(id) >= len(o.names) {
		return ""
	}
	return o.names[id]
}

// lockOpOf converts a history operation; ok is false for operations the
// lock checks do not need: reads and writes, and acquires and releases
// that failed for another reason than "held" or "not-owner" (an error, a
// timeout): the model allows those in every state without effect, so
// dropping them is exact.
func lockOpOf(op *history.Operation, ow *owners) (lockOp, bool) {
	var k linKind
	switch op.Op {
	case history.Acquire:
		k = linAcquire
	case history.Release:
		k = linRelease
	default:
		return lockOp{}, false
	}
	lo := lockOp{kind: k, client: int32(op.Client), call: op.Call, ret: op.Return, index: int32(op.Index),
		shared: k == linAcquire && op.Mode == history.ModeRead}
	switch {
	case op.Type == history.OK:
		lo.out = outOK
	case op.Type == history.Info || op.Return == history.Never:
		lo.out, lo.ret, lo.done = outUnknown, history.Never, op.Completed
	case k == linAcquire && op.Reason == history.ReasonHeld:
		lo.out = outHeld
	case k == linRelease && op.Reason == history.ReasonNotOwner:
		lo.out = outNotOwner
	default:
		return lockOp{}, false
	}
	if lo.out != outHeld {
		lo.owner = ow.id(op.Owner) // (a failed acquire names nobody)
	}
	if k == linAcquire && lo.owner > 0 {
		ow.known[lo.owner] = true
	}
	return lo, true
}

func describeLin(in *lockOp, ow *owners) string {
	verb := "acquire"
	if in.kind == linRelease {
		verb = "release"
	} else if in.shared {
		verb = "read acquire"
	}
	res := [...]string{"ok", "held", "not-owner", "indeterminate"}[in.out]
	if n := ow.name(in.owner); n != "" {
		return fmt.Sprintf("client %d %s(%s) -> %s", in.client, verb, n, res)
	}
	return fmt.Sprintf("client %d %s -> %s", in.client, verb, res)
}

// describeStateRW describes s, naming the readers of a read-write lock (rs:
// the model's reader sets).
func describeStateRW(s lockState, ow *owners, rs *readerSets) string {
	if s.readers != 0 && rs != nil {
		var sb strings.Builder
		sb.WriteString("held by readers: ")
		for k, r := range rs.get(s.readers) {
			if k > 0 {
				sb.WriteString(", ")
			}
			describeHolder(&sb, r.client, r.owner, r.depth, ow)
		}
		return sb.String()
	}
	if s.client == 0 {
		return "free"
	}
	if s.client < 0 {
		return "held by a lost acquire of some client, which no release could free"
	}
	var sb strings.Builder
	sb.WriteString("held by ")
	describeHolder(&sb, s.client, s.owner, s.depth, ow)
	return sb.String()
}

// describeHolder writes "client 3 (owner-name) 2 times".
func describeHolder(sb *strings.Builder, client, owner, depth int32, ow *owners) {
	fmt.Fprintf(sb, "client %d", client)
	if owner == ownerFresh {
		sb.WriteString(" (owner unknown)")
	} else if n := ow.name(owner); n != "" {
		fmt.Fprintf(sb, " (%s)", n)
	}
	if depth > 1 {
		fmt.Fprintf(sb, " %d times", depth)
	}
}
