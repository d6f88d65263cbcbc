package history

import (
	"unicode/utf8"
)

// decodeEventFast decodes one history line into e (which must be zero)
// without reflection: the events a run writes are flat objects of known
// keys with integer and plain string values. It reports false, leaving e
// to be discarded, on anything else (a nested object or array, null, an
// escape in a string, a key it does not know exactly, a number that is not
// a plain integer, malformed JSON), and Parse then asks encoding/json,
// which decides. Where it reports true, e is what json.Unmarshal gives
// (FuzzDecodeEvent, TestDecodeEventFast). Strings that repeat (owners,
// reasons, errors) come from in, when not nil, shared.
func decodeEventFast(b []byte, e *Event, in *interner) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		if i, ok = decodeField(b, i, key, e, in); !ok {
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// decodeField decodes the value at b[i:] into e's field named key (e is
// discarded when it reports false).
func decodeField(b []byte, i int, key []byte, e *Event, in *interner) (int, bool) {
	num := func(dst *int64) bool {
		var ok bool
		*dst, i, ok = plainInt(b, i)
		return ok
	}
	str := func(dst *string) bool {
		v, j, ok := plainString(b, i)
		*dst, i = string(v), j
		return ok
	}
	shared := func(dst *string, intern func([]byte) string) bool {
		v, j, ok := plainString(b, i)
		*dst, i = intern(v), j
		return ok
	}
	var n int64
	var ok bool
	switch string(key) {
	case "seq":
		ok = num(&e.Seq)
	case "time":
		ok = num(&e.Time)
	case "op_id":
		ok = num(&e.OpID)
	case "valid":
		ok = num(&e.Valid)
	case "latency":
		ok = num(&e.Latency)
	case "fault_id":
		ok = num(&e.FaultID)
	case "client":
		ok = num(&n)
		e.Client = int(n)
	case "pid":
		ok = num(&n)
		e.PID = int(n)
	case "token":
		ok = num(&n)
		e.Token = Int64(n)
	case "value":
		ok = num(&n)
		e.Value = Int64(n)
	case "prev":
		ok = num(&n)
		e.Prev = Int64(n)
	case "type":
		var v []byte
		v, i, ok = plainString(b, i)
		e.Type = Type(internType(v))
	case "op":
		var v []byte
		v, i, ok = plainString(b, i)
		e.Op = Op(internOp(v))
	case "owner":
		ok = shared(&e.Owner, in.owner)
	case "removed":
		ok = shared(&e.Removed, in.word)
	case "reason":
		ok = shared(&e.Reason, in.word)
	case "error":
		ok = shared(&e.Error, in.word)
	case "mode":
		ok = shared(&e.Mode, in.word)
	case "fault":
		ok = str(&e.Fault)
	case "target":
		ok = str(&e.Target)
	case "point":
		ok = str(&e.Point)
	case "rule":
		ok = str(&e.Rule)
	case "length":
		ok = str(&e.Length)
	case "detail":
		ok = str(&e.Detail)
	}
	return i, ok
}

// interner shares the strings of a history that repeat: the reasons,
// errors and modes of answers (a few values, on most operations), kept in
// a table of at most maxVocabulary of them, and the owners an acquire's
// answer and then its release both carry, kept in a small table of the
// latest ones (recentOwners, by hash). A nil interner shares none.
type interner struct {
	vocabulary map[string]string
	owners     [recentOwners]string
}

const (
	maxVocabulary = 1 << 12
	recentOwners  = 1 << 10
)

// word returns b as a string of the vocabulary.
func (in *interner) word(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in.vocabulary[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.vocabulary == nil {
		in.vocabulary = map[string]string{}
	}
	if len(in.vocabulary) < maxVocabulary {
		in.vocabulary[s] = s
	}
	return s
}

// owner returns b as a string, the same as the last owner of its hash.
func (in *interner) owner(b []byte) string {
	if in == nil || len(b) == 0 {
		return string(b)
	}
	h := uint32(2166136261) // FNV-1a
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	slot := &in.owners[h%recentOwners]
	if *slot == string(b) {
		return *slot
	}
	*slot = string(b)
	return *slot
}

// internType and internOp return the constant for a known value, so that
// the millions of events of a long history share them.
func internType(s []byte) string {
	for _, t := range [...]Type{Invoke, OK, Fail, Info, Run, RunEnd, FaultStart, FaultEnd, ClientStart, ClientExit, Note} {
		if string(t) == string(s) {
			return string(t)
		}
	}
	return string(s)
}

func internOp(s []byte) string {
	for _, o := range [...]Op{Acquire, Release, Read, Write} {
		if string(o) == string(s) {
			return string(o)
		}
	}
	return string(s)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] without escapes or control
// characters, of valid UTF-8 (encoding/json would replace invalid bytes):
// its bytes and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	start := i + 1
	ascii := true
	for j := start; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			s := b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, i, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, i, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, i, false
}

// plainInt reads a JSON integer at b[i] (no fraction, no exponent, no
// leading zero) that fits an int64, and the index after it.
func plainInt(b []byte, i int) (int64, int, bool) {
	j := i
	neg := false
	if j < len(b) && b[j] == '-' {
		neg = true
		j++
	}
	if j >= len(b) || b[j] < '0' || b[j] > '9' {
		return 0, i, false
	}
	if b[j] == '0' && j+1 < len(b) && b[j+1] >= '0' && b[j+1] <= '9' {
		return 0, i, false
	}
	var u uint64
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		if u > (1<<63)/10 {
			return 0, i, false
		}
		u = u*10 + uint64(b[j]-'0')
		if u > 1<<63 {
			return 0, i, false
		}
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, i, false
	}
	if neg {
		return -int64(u), j, true // -(1<<63) wraps to itself: MinInt64
	}
	if u > 1<<63-1 {
		return 0, i, false
	}
	return int64(u), j, true
}
