package history

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkFast asserts that decodeEventFast either declines line or decodes
// it exactly as encoding/json does, and declines whatever json rejects,
// with and without sharing strings (through sharedStrings, which has seen
// the lines checked before).
func checkFast(t *testing.T, line []byte) bool {
	t.Helper()
	var want, got, shared Event
	werr := json.Unmarshal(line, &want)
	ok := decodeEventFast(line, &got, nil)
	sharedMu.Lock()
	okShared := decodeEventFast(line, &shared, &sharedStrings)
	sharedMu.Unlock()
	require.Equal(t, ok, okShared, "line %q", line)
	if werr != nil {
		require.False(t, ok, "fast path accepted what encoding/json rejects: %q (%v)", line, werr)
		return false
	}
	if ok {
		require.Equal(t, want, got, "line %q", line)
		require.Equal(t, want, shared, "line %q, strings shared", line)
	}
	return ok
}

var (
	sharedMu      sync.Mutex
	sharedStrings interner
)

func TestDecodeEventFast(t *testing.T) {
	for _, c := range []struct {
		line string
		fast bool
	}{
		{`{"seq":1,"time":13595,"type":"client-start","client":1,"pid":100000}`, true},
		{`{"seq":7,"time":-5,"type":"ok","client":3,"op":"acquire","op_id":4,"owner":"c3-1","token":12,"latency":600}`, true},
		{` { "seq" : 0 , "type" : "note" , "detail" : "héllo" } `, true},
		{`{}`, true},
		{`{"token":0,"value":-9223372036854775808,"prev":9223372036854775807}`, true},
		{`{"seq":1,"seq":2}`, true},
		{`{"type":"weird-type","op":"other"}`, true},
		{`{"seq":9223372036854775808}`, false},
		{`{"seq":1.5}`, false},
		{`{"seq":1e3}`, false},
		{`{"seq":01}`, false},
		{`{"seq":-}`, false},
		{`{"Seq":1}`, false},
		{`{"detail":"a\"b"}`, false},
		{`{"detail":"a\u00e9"}`, false},
		{"{\"detail\":\"\xff\"}", false},
		{"{\"detail\":\"a\tb\"}", false},
		{`{"token":null}`, false},
		{`{"nodes":["a","b"]}`, false},
		{`{"seq":0,"type":"run","info":{"lock":"x"}}`, false},
		{`{"seq":1,}`, false},
		{`{"seq":1} x`, false},
		{`{"seq":1`, false},
		{`{"seq" 1}`, false},
		{`[1]`, false},
		{``, false},
		{`{"unknown":1}`, false},
		{`{"seq":"1"}`, false},
		{`{"type":1}`, false},
	} {
		require.Equal(t, c.fast, checkFast(t, []byte(c.line)), "line %q", c.line)
	}
}

// TestDecodeEventFastHistories: every line of the recorded histories in
// the repository decodes as encoding/json decodes it, most of them on the
// fast path.
func TestDecodeEventFastHistories(t *testing.T) {
	var files []string
	for _, pat := range []string{"../*/testdata/*.jsonl", "../*/testdata/*/*.jsonl", "../*/*/testdata/*.jsonl", "../*/*/testdata/*/*.jsonl"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	lines, fast := 0, 0
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines++
			if checkFast(t, sc.Bytes()) {
				fast++
			}
		}
		require.NoError(t, fh.Close())
	}
	t.Logf("%d files, %d lines, %d on the fast path", len(files), lines, fast)
	require.Greater(t, fast, lines/2)
}

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"seq":7,"time":-5,"type":"ok","client":3,"op":"acquire","op_id":4,"owner":"c3-1","token":12,"latency":600}`,
		`{"seq":1,"type":"fault-start","fault":"partition","fault_id":2,"target":"redis-1","point":"after-grant","detail":"x"}`,
		`{"seq":1,"type":"fault-start","fault":"pause","fault_id":3,"target":"client 2","point":"after-grant","rule":"holder","length":"2.5s"}`,
		`{"seq":1,"type":"fail","reason":"held","error":"e","mode":"read","removed":"-","valid":5,"value":1,"prev":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFast(t, b)
	})
}

// TestLeadingTime: the time read from a line's start is the one the line
// decodes to, and only lines in the recorder's shape are read that way.
func TestLeadingTime(t *testing.T) {
	for _, c := range []struct {
		line string
		time int64
		ok   bool
	}{
		{`{"seq":3,"time":97791025,"type":"invoke","client":41}`, 97791025, true},
		{`{"seq":0,"time":0,"type":"run","info":{"time":5}}`, 0, true},
		{`{"seq":3,"time":-7,"type":"note"}`, -7, true},
		{`{"time":5,"seq":3}`, 0, false},
		{`{"seq":3, "time":5}`, 0, false},
		{`{"seq":3,"time":5.5}`, 0, false},
		{`{"seq":3,"time":"5"}`, 0, false},
		{`{"seq":3`, 0, false},
	} {
		got, ok := leadingTime([]byte(c.line))
		require.Equal(t, c.ok, ok, c.line)
		if ok {
			require.Equal(t, c.time, got, c.line)
			var e Event
			require.NoError(t, json.Unmarshal([]byte(c.line), &e))
			require.Equal(t, e.Time, got, c.line)
		}
	}
}
