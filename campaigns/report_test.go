package campaigns_test

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/reports"
)

// copyStore copies testdata/store (three real stored runs: redis-lua with
// no fault and under pause, redis-setnx under pause) into a temporary
// directory.
func copyStore(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("testdata", "store")
	require.NoError(t, filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	return dst
}

// renderStore checks every stored run again (writing its report.html)
// and renders the campaign pages from them.
func renderStore(t *testing.T) (string, *reports.Campaign) {
	t.Helper()
	dir := copyStore(t)
	c, err := campaigns.FromRuns(dir, func(d string) (*checker.Result, error) { return harness.CheckDir(d, nil, true) })
	require.NoError(t, err)
	require.NoError(t, campaigns.WriteReports(dir, c))
	return dir, c
}

type td struct {
	class, text, href, title string
}

// matrix reads the matrix of index.html: row name -> column -> cell.
func matrix(t *testing.T, page []byte) ([]string, map[string]map[string]td) {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	require.NoError(t, err)
	var cols []string
	rows := map[string]map[string]td{}
	var walk func(n *html.Node)
	inMatrix := false
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "table" && attr(n, "class") == "matrix" {
			inMatrix = true
			defer func() { inMatrix = false }()
		}
		if inMatrix && n.Type == html.ElementNode && n.Data == "tr" {
			var cells []*html.Node
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && (c.Data == "th" || c.Data == "td") {
					cells = append(cells, c)
				}
			}
			if len(cells) > 0 && text(cells[0]) == "" { // header row
				for _, c := range cells[1:] {
					cols = append(cols, text(c))
				}
				return
			}
			row := map[string]td{}
			for i, c := range cells[1:] {
				cell := td{class: attr(c, "class"), text: strings.Join(strings.Fields(text(c)), " "), title: attr(c, "title")}
				for a := c.FirstChild; a != nil; a = a.NextSibling {
					if a.Type == html.ElementNode && a.Data == "a" {
						cell.href = attr(a, "href")
					}
				}
				row[cols[i]] = cell
			}
			rows[text(cells[0])] = row
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return cols, rows
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	var f func(*html.Node)
	f = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			f(c)
		}
	}
	f(n)
	return strings.TrimSpace(b.String())
}

func TestCampaignFromStoredRuns(t *testing.T) {
	dir, c := renderStore(t)
	require.Equal(t, []string{"redis-lua", "redis-setnx"}, c.Rows)
	require.Equal(t, []string{"none", "pause"}, c.Columns)

	page, err := os.ReadFile(filepath.Join(dir, campaigns.IndexFile))
	require.NoError(t, err)
	cols, rows := matrix(t, page)
	require.Equal(t, []string{"none", "pause"}, cols)

	// The matrix content: verdict, colour class, anomaly kinds and counts.
	luaPause := c.Cell("redis-lua/pause")
	require.NotNil(t, luaPause)
	require.Equal(t, "unsafe", luaPause.Verdict)
	require.Positive(t, luaPause.Anomalies[string(checker.KindDoubleHolder)])
	cell := rows["redis-lua"]["pause"]
	require.Equal(t, "unsafe", cell.class)
	require.Contains(t, cell.text, "unsafe")
	require.Contains(t, cell.text, "double-holder")
	require.Contains(t, cell.text, "first after")
	// The checker's cause of the double holders, counted, with a tooltip.
	require.Equal(t, luaPause.Anomalies[string(checker.KindDoubleHolder)], luaPause.Causes[string(checker.CauseLeaseExpired)])
	require.Contains(t, cell.text, fmt.Sprintf("cause: %d lease expired (by design)", luaPause.Causes[string(checker.CauseLeaseExpired)]))
	require.Contains(t, cell.title, "double holders by cause")
	require.Contains(t, cell.title, "lease-expired: the earlier holder's lease could have run out")
	require.NotContains(t, rows["redis-lua"]["none"].text, "cause")
	require.Contains(t, rows["redis-lua"]["none"].class, "safe")
	require.Contains(t, rows["redis-lua"]["none"].text, "held")
	require.Equal(t, "safe", rows["redis-setnx"]["pause"].class)
	require.Equal(t, "empty", rows["redis-setnx"]["none"].class)

	// Every cell links to its run's page, which exists.
	for row, cs := range rows {
		for col, cell := range cs {
			if cell.class == "empty" { // no stored run for it
				continue
			}
			require.NotEmpty(t, cell.href, "%s/%s", row, col)
			require.True(t, strings.HasSuffix(cell.href, "/report.html"), cell.href)
			require.FileExists(t, filepath.Join(dir, filepath.FromSlash(cell.href)))
			require.True(t, strings.HasPrefix(cell.href, row+"/"+col+"/"), cell.href)
			// ... and that page links its linearization view, which exists.
			run, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(cell.href)))
			require.NoError(t, err)
			require.Contains(t, string(run), `href="`+reports.LinearizationFile+`"`)
			require.FileExists(t, filepath.Join(dir, filepath.FromSlash(path.Dir(cell.href)), reports.LinearizationFile))
		}
	}
	// Seeds and server versions are shown.
	require.Contains(t, string(page), "redis-1: redis 7.")
	require.Contains(t, string(page), "seed 1")

	// The machine outputs agree.
	res, err := reports.ReadCampaign(filepath.Join(dir, campaigns.ResultsFile))
	require.NoError(t, err)
	require.Len(t, res.Cells, 3)
	junit, err := os.ReadFile(filepath.Join(dir, campaigns.JUnitFile))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(junit), "<testcase "))
	md, err := os.ReadFile(filepath.Join(dir, campaigns.SummaryFile))
	require.NoError(t, err)
	// Each cell lists its anomalies by kind and count, as the matrix does.
	require.Contains(t, string(md), fmt.Sprintf("| `redis-lua` | 🟢 safe | 🔴 unsafe: %s; cause: %d lease-expired |",
		luaPause.KindsText(), luaPause.Causes[string(checker.CauseLeaseExpired)]))
	require.Contains(t, string(md), fmt.Sprintf("%d double-holder", luaPause.Anomalies[string(checker.KindDoubleHolder)]))
	require.Contains(t, string(md), "Double holders by cause: *lease-expired*")
}

// TestRefreshKeepsExpectations: regenerating a campaign from its runs
// keeps the expectations and recomputes the outcome.
func TestRefreshKeepsExpectations(t *testing.T) {
	dir, c := renderStore(t)
	c.Cell("redis-lua/pause").Expect = reports.ExpectSafe
	c.Cell("redis-lua/none").Expect = reports.ExpectSafe
	require.NoError(t, campaigns.Refresh(dir, c, nil))
	require.Equal(t, reports.Differs, c.Cell("redis-lua/pause").Outcome)
	require.Equal(t, reports.AsExpected, c.Cell("redis-lua/none").Outcome)
	require.Equal(t, 1, c.Differs())
}
