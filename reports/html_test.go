package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// page is a parsed report.
type page struct {
	raw   string
	ids   map[string]int
	hrefs []string
	texts []string // every text node, unescaped
	doc   *html.Node
}

// parsePage parses a report and checks that it loads nothing from
// anywhere: no external src or href, no script src, no link elements, no
// url() or @import pointing outside, ids unique and internal links
// resolvable.
func parsePage(t *testing.T, raw []byte) page {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(raw))
	require.NoError(t, err)
	p := page{raw: string(raw), ids: map[string]int{}, doc: doc}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "link", "iframe", "img", "object", "embed", "image", "use":
				require.Failf(t, "element that may load something", "<%s>", n.Data)
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				val := strings.TrimSpace(strings.ToLower(a.Val))
				switch key {
				case "id":
					p.ids[a.Val]++
				case "src", "href", "action", "formaction", "poster", "data", "srcset":
					require.NotEqual(t, "src", key, "<%s src=%q>", n.Data, a.Val)
					require.Falsef(t, strings.Contains(val, "http:") || strings.Contains(val, "https:") || strings.HasPrefix(val, "//"),
						"external %s=%q on <%s>", a.Key, a.Val, n.Data)
					require.Truef(t, strings.HasPrefix(val, "#"), "non-fragment link %s=%q", a.Key, a.Val)
					p.hrefs = append(p.hrefs, a.Val)
				}
				if a.Namespace == "xlink" {
					require.Failf(t, "xlink attribute", "%s=%q", a.Key, a.Val)
				}
			}
			if n.Data == "style" {
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					css := strings.ToLower(c.Data)
					require.NotContains(t, css, "@import")
					require.NotContains(t, css, "url(http")
					require.NotContains(t, css, "url(//")
				}
			}
			if n.Data == "script" {
				require.Failf(t, "script element", "the report needs no script")
			}
		}
		if n.Type == html.TextNode {
			p.texts = append(p.texts, n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for id, n := range p.ids {
		require.Equalf(t, 1, n, "id %q used %d times", id, n)
	}
	for _, href := range p.hrefs {
		require.Containsf(t, p.ids, strings.TrimPrefix(href, "#"), "link %q has no target", href)
	}
	return p
}

func (p page) text() string { return strings.Join(p.texts, "") }

func render(t *testing.T, h *history.History, r *checker.Result) page {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteRunHTML(&buf, h, r))
	return parsePage(t, buf.Bytes())
}

func TestWriteRunHTML(t *testing.T) {
	safe := func(h *history.History) *checker.Result {
		return &checker.Result{
			Verdict: checker.Safe, Why: "no two clients ever held the lock at once in 4 holds",
			Lock: "etcd", Nemeses: []string{"partition"}, Seed: 7, Fence: true, FirstViolation: -1,
			Properties: []checker.Property{{Name: "mutual-exclusion", Status: checker.Pass, Engine: "interval sweep"}},
		}
	}
	inconclusive := func(h *history.History) *checker.Result {
		return &checker.Result{
			Verdict: checker.Inconclusive, Why: "only 1 successful acquire: the run proves nothing",
			FirstViolation: -1,
			Properties:     []checker.Property{{Name: "linearizability", Status: checker.Unknown, Detail: "timed out"}},
		}
	}
	tests := []struct {
		name    string
		result  func(*history.History) *checker.Result
		verdict string
		class   string
		want    []string // substrings of the visible text
		ids     []string
	}{
		{
			name:    "unsafe",
			result:  func(h *history.History) *checker.Result { return sampleResult(t, h) },
			verdict: "UNSAFE", class: "verdict unsafe",
			want: []string{
				"2 clients held the lock at the same time", "pause client 1", "double-holder",
				"lost-update", "Client 1 acquired the lock at 0.50s", "pause client 1 (0.60s-4.00s)",
				"2.60s", "3.50s", "redis-server 7.0.15", "locktest run --lock redis-single --nemesis pause --seed 42",
				"mutual-exclusion", "interval sweep", "search timed out after 10s", "Anomalies (3)",
				"not-owner", "owner-1",
			},
			ids: []string{"anomaly-1", "anomaly-2", "anomaly-3", "timeline", "properties", "counts"},
		},
		{
			name: "safe", result: safe, verdict: "SAFE", class: "verdict safe",
			want: []string{"no two clients ever held the lock", "The checker found no anomalies.", "etcd", "partition"},
		},
		{
			name: "inconclusive", result: inconclusive, verdict: "INCONCLUSIVE", class: "verdict inconclusive",
			want: []string{"only 1 successful acquire", "timed out", "redis-single"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sampleHistory(t)
			r := tc.result(h)
			p := render(t, h, r)
			text := p.text()

			require.Contains(t, text, tc.verdict)
			require.Contains(t, p.raw, `class="`+tc.class+`"`)
			for _, w := range tc.want {
				require.Contains(t, text, w)
			}
			for _, id := range tc.ids {
				require.Contains(t, p.ids, id)
			}
			// A lane per client process, and the fault band.
			require.Contains(t, text, "client 1")
			require.Contains(t, text, "pid 4101")
			require.Contains(t, text, "pid 4102")
			require.Equal(t, 2, strings.Count(p.raw, `<g class="lane">`))
			require.Equal(t, 1, strings.Count(p.raw, `<g class="band">`))
			require.Contains(t, p.raw, `class="cfault"`)
			require.NotContains(t, p.raw, "http://")
			require.NotContains(t, p.raw, "https://")
			require.NotContains(t, p.raw, "ZgotmplZ", "html/template rejected a value")

			for i := range r.Anomalies {
				a := anchor(i)
				require.Contains(t, p.raw, `href="#`+a+`"`, "the time line links to the entry")
				require.Contains(t, p.ids, a)
				for _, op := range r.Anomalies[i].Ops {
					require.Contains(t, p.ids, "op-"+itoa(op))
				}
			}
		})
	}
}

func TestWriteRunHTMLLanesAndReplacement(t *testing.T) {
	info := defaultInfo()
	info.Clients = 3
	b := newBuilder(t, info)
	for c := 1; c <= 3; c++ {
		b.start(c, 100+c, 0)
	}
	b.op(1, history.Acquire, 0.1, 0.2, history.OK, withToken(1))
	b.faultAt("kill", "client 2", 1, 1.1)
	b.exit(2, 1.05, "killed: signal 9")
	b.start(2, 202, 1.5)
	b.faultAt("partition", "redis-1", 2, -1) // never healed
	b.op(2, history.Acquire, 2, 2.1, history.Fail, withReason(history.ReasonHeld))
	b.op(3, history.Write, 2, 2.1, history.Fail, func(inv, c *history.Event) {
		inv.Token = history.Int64(0)
		c.Reason = history.ReasonStaleToken
	})
	h := b.build(3)
	p := render(t, h, &checker.Result{Verdict: checker.Safe, FirstViolation: -1})
	text := p.text()
	require.Equal(t, 4, strings.Count(p.raw, `<g class="lane">`), "3 clients and one replacement")
	for _, s := range []string{"pid 101", "pid 102", "pid 202, restart 1", "pid 103", "kill client 2", "partition redis-1", "not healed", "killed: signal 9"} {
		require.Contains(t, text, s)
	}
	require.Contains(t, p.raw, `class="endcap"`)
	require.Contains(t, p.raw, `class="stale"`)
	require.Contains(t, p.raw, `class="ticks"`)
}

func TestWriteRunHTMLEscapes(t *testing.T) {
	const evil = `<script>alert("x")</script><img src=https://evil.example/x.png>`
	info := defaultInfo()
	info.Command = "locktest run " + evil
	info.Servers = []string{evil}
	b := newBuilder(t, info)
	b.start(1, 1, 0)
	b.faultAt("pause"+evil, "client 1"+evil, 0.1, 0.2)
	id := b.op(1, history.Acquire, 0.3, 0.4, history.Info, func(_, c *history.Event) { c.Error = evil })
	b.op(1, history.Acquire, 0.5, 0.6, history.OK, func(_, c *history.Event) { c.Owner = evil })
	h := b.build(1)
	r := &checker.Result{
		Verdict: checker.Unsafe, Why: evil, Lock: evil, FirstViolation: 0,
		Properties: []checker.Property{{Name: evil, Status: checker.Fail, Engine: evil, Detail: evil}},
		Anomalies: []checker.Anomaly{{
			Kind: evil, Severity: evil, Clients: []int{1}, Start: 0, End: ns(0.6),
			Ops: []int64{id, 999}, Faults: []string{evil}, Explanation: evil,
		}},
	}
	p := render(t, h, r)
	require.NotContains(t, p.raw, "<script")
	require.NotContains(t, p.raw, "<img")
	require.Contains(t, p.text(), evil, "the text survives, escaped")
	require.Contains(t, p.text(), "operations not in the history: 999")
}

func TestWriteRunHTMLLarge(t *testing.T) {
	if dir := os.Getenv("REPORTS_SAMPLE_DIR"); dir != "" {
		h, r := bigHistory(t, 10_000, 8)
		var buf bytes.Buffer
		require.NoError(t, WriteRunHTML(&buf, h, r))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "10k-report.html"), buf.Bytes(), 0o644))
	}
	h, r := bigHistory(t, 100_000, 8)
	require.GreaterOrEqual(t, len(h.Ops), 99_000)
	start := time.Now()
	var buf bytes.Buffer
	require.NoError(t, WriteRunHTML(&buf, h, r))
	t.Logf("100k ops: %d bytes in %v", buf.Len(), time.Since(start))
	require.Less(t, buf.Len(), 2<<20)
	p := parsePage(t, buf.Bytes())
	require.Equal(t, 9, strings.Count(p.raw, `<g class="lane">`), "8 clients, one replaced")
	require.Contains(t, p.ids, "anomaly-1")
	if dir := os.Getenv("REPORTS_SAMPLE_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "large-report.html"), buf.Bytes(), 0o644))
	}
}

func TestWriteRunHTMLNil(t *testing.T) {
	h := sampleHistory(t)
	var buf bytes.Buffer
	require.Error(t, WriteRunHTML(&buf, nil, &checker.Result{}))
	require.Error(t, WriteRunHTML(&buf, h, nil))
}

// TestSampleReport renders the sample unsafe run; with REPORTS_SAMPLE_DIR
// set it writes it there as sample-report.html, to look at.
func TestSampleReport(t *testing.T) {
	h := sampleHistory(t)
	var buf bytes.Buffer
	require.NoError(t, WriteRunHTML(&buf, h, sampleResult(t, h)))
	parsePage(t, buf.Bytes())
	if dir := os.Getenv("REPORTS_SAMPLE_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sample-report.html"), buf.Bytes(), 0o644))
	}
}

// An anomaly with a witness links it, and says whether it is 1-minimal.
func TestWriteRunHTMLWitnessLink(t *testing.T) {
	b := newBuilder(t, defaultInfo())
	b.start(1, 1, 0)
	id := b.op(1, history.Acquire, 0.5, 0.6, history.OK, func(_, c *history.Event) { c.Owner = "a" })
	h := b.build(1)
	r := &checker.Result{
		Verdict: checker.Unsafe, Why: "1 double holder", FirstViolation: 0,
		Anomalies: []checker.Anomaly{
			{Kind: checker.KindDoubleHolder, Severity: checker.SeverityViolation, Clients: []int{1}, Ops: []int64{id}, Explanation: "x",
				Witness: "witness-1/history.jsonl"},
			{Kind: checker.KindLostUpdate, Severity: checker.SeverityViolation, Clients: []int{1}, Ops: []int64{id}, Explanation: "y",
				Witness: "witness-2/history.jsonl", WitnessPartial: true},
			{Kind: checker.KindDeadlock, Severity: checker.SeverityViolation, Clients: []int{1}, Explanation: "z"},
		},
	}
	// Not render: its page check allows no link to a file, and the
	// witness, like the server logs, is a file of the run directory.
	var buf bytes.Buffer
	require.NoError(t, WriteRunHTML(&buf, h, r))
	raw := buf.String()
	require.Contains(t, raw, `<a href="witness-1/history.jsonl">`)
	require.Contains(t, raw, `<a href="witness-2/history.jsonl">`)
	require.Equal(t, 2, strings.Count(raw, "locktest check RUN_DIR/witness-"), "the anomaly without a witness has no link")
	require.Contains(t, raw, "locktest check RUN_DIR/witness-1</code> checks it")
	require.Equal(t, 1, strings.Count(raw, "not proven 1-minimal"))
}
