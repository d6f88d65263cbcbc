package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/nemesis"
)

// readmeLimit is the size README.md stays under: a front door read in a
// few screens, the reference in docs/.
const readmeLimit = 15 * 1000

// repo is the repository root, as a file system.
func repo() fs.FS { return os.DirFS("..") }

// pages lists the Markdown pages whose links are checked: README.md, the
// docs/ pages and every package's README.md. docs/notes/ holds drafts
// written for other pages, merged by hand, and is left out.
func pages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"README.md", "*/README.md", "docs/*.md"} {
		m, err := fs.Glob(repo(), pattern)
		require.NoError(t, err)
		out = append(out, m...)
	}
	require.Contains(t, out, "README.md")
	require.Contains(t, out, "checker/README.md")
	return out
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := fs.ReadFile(repo(), p)
	require.NoError(t, err)
	return string(b)
}

func TestCheckLinks(t *testing.T) {
	other := "# Other page\n\n## Faults (`--nemesis`, comma separated)\n\n```sh\n# not a heading\n```\n"
	cases := []struct {
		name string
		md   string
		bad  []string // a substring of each problem, in order; none when the page is right
	}{
		{"file", "[a](other.md) and ![pic](img.png) and [dir](sub)", nil},
		{"missing file", "see [gone](gone.md)", []string{`"gone.md": no such file gone.md`}},
		{"missing image", "![pic](docs/pic.png)", []string{"no such file docs/pic.png"}},
		{"anchor here", "# Top\n\n## Lock schemes (`--lock`)\n\n[s](#lock-schemes---lock) [t](#top)", nil},
		{"missing anchor here", "# Top\n\n[s](#bottom)", []string{"no heading of page.md has the anchor #bottom"}},
		{"anchor there", "[f](other.md#faults---nemesis-comma-separated) [o](other.md#other-page)", nil},
		{"missing anchor there", "[f](other.md#faults)", []string{"no heading of other.md has the anchor #faults"}},
		{"heading in code is none", "[x](other.md#not-a-heading)", []string{"#not-a-heading"}},
		{"upper case is not the anchor", "[o](other.md#Other-Page)", []string{"#Other-Page"}},
		{"repeated heading", "## Exit codes\n\n## Exit codes\n\n[a](#exit-codes) [b](#exit-codes-1)", nil},
		{"repeated heading twice only", "## A\n\n## A\n\n[c](#a-2)", []string{"#a-2"}},
		{"setext heading", "Title here\n===\n\n[t](#title-here)", nil},
		{"explicit anchor", `<a id="here"></a>` + "\n[h](#here)", nil},
		{"link in code span", "write `[x](gone.md)` like this", nil},
		{"link in fenced code", "```\n[x](gone.md)\n```\n~~~\n[y](gone.md)\n~~~", nil},
		{"link after a code span", "`a` [x](gone.md)", []string{"gone.md"}},
		{"code in link text", "[`other.md`](other.md) [`gone`](gone.md)", []string{"gone.md"}},
		{"external", "[w](https://example.com/x#y) [m](mailto:a@b.c)", nil},
		{"line anchor on code", "[c](sub/x.go#L10-L20)", nil},
		{"other anchor on code", "[c](sub/x.go#main)", []string{"which has no headings"}},
		{"escapes the repository", "[e](../../etc/passwd)", []string{"outside the repository"}},
		{"reference definition", "[x][r]\n\n[r]: gone.md", []string{"gone.md"}},
		{"html", `<img src="gone.png">`, []string{"gone.png"}},
		{"root relative", "[r](/other.md#other-page) [s](/sub/x.go)", nil},
		{"escaped space", "[s](my%20page.md)", nil},
		{"empty", "[e]()", []string{"empty target"}},
		{"several", "[a](gone.md)\n\n[b](#nowhere)", []string{"page.md:1:", "page.md:3:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"page.md":    {Data: []byte(c.md)},
				"other.md":   {Data: []byte(other)},
				"img.png":    {Data: []byte("png")},
				"sub/x.go":   {Data: []byte("package x")},
				"my page.md": {Data: []byte("# Mine")},
			}
			problems, err := checkLinks(fsys, "page.md")
			require.NoError(t, err)
			require.Len(t, problems, len(c.bad), "problems: %q", problems)
			for i, want := range c.bad {
				require.Contains(t, problems[i], want)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	cases := []struct{ heading, want string }{
		{"Campaigns: which lock, and what breaks it", "campaigns-which-lock-and-what-breaks-it"},
		{"A run: `results.json` (`checker.Result`)", "a-run-resultsjson-checkerresult"},
		{"Settings (`--param KEY=VALUE`)", "settings---param-keyvalue"},
		{"`pause-server` and `kill` together", "pause-server-and-kill-together"},
		{"The lock sweep (`lockcheck.go`)", "the-lock-sweep-lockcheckgo"},
		{"hello (locktest → client, first line)", "hello-locktest--client-first-line"},
		{"**Bold** and [a link](x.md) and <b>tag</b>", "bold-and-a-link-and-tag"},
		{"snake_case Ünïcode 2", "snake_case-ünïcode-2"},
	}
	for _, c := range cases {
		t.Run(c.heading, func(t *testing.T) {
			require.Equal(t, c.want, slug(c.heading))
		})
	}
}

// TestLinks: every relative link and #anchor of README.md, docs/*.md and
// the packages' README.md files resolves to a file and a heading.
func TestLinks(t *testing.T) {
	var problems []string
	for _, p := range pages(t) {
		found, err := checkLinks(repo(), p)
		require.NoError(t, err)
		problems = append(problems, found...)
	}
	require.Empty(t, problems, "broken links:\n%s", strings.Join(problems, "\n"))
}

// TestReadmeFrontDoor: README.md stays under its size, links every docs/
// page and checker/README.md, and still shows the two commands .ci/run runs.
func TestReadmeFrontDoor(t *testing.T) {
	readme := read(t, "README.md")
	require.Less(t, len(readme), readmeLimit, "README.md is %d bytes: move reference text to a docs/ page", len(readme))

	linked := map[string]bool{}
	for _, l := range links(readme) {
		p, _, _ := strings.Cut(l.target, "#")
		linked[path.Clean(p)] = true
	}
	docs, err := fs.Glob(repo(), "docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	for _, p := range append(docs, "checker/README.md") {
		require.True(t, linked[p], "README.md does not link %s", p)
	}

	// The README's code blocks show each script .ci/run runs, as it runs it.
	var code strings.Builder
	fence := false
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if fence {
			code.WriteString(l + "\n")
		}
	}
	// The go test line the README quotes is the one scripts/test.sh runs.
	goTest := goTestRe.FindString(read(t, "scripts/test.sh"))
	require.NotEmpty(t, goTest, "scripts/test.sh runs no go test")
	require.Contains(t, readme, "`"+goTest+"`", "README.md does not quote scripts/test.sh's %q", goTest)

	scripts := ciScriptRe.FindAllString(read(t, ".ci/run"), -1)
	require.NotEmpty(t, scripts, ".ci/run runs no ./scripts/")
	for _, s := range scripts {
		require.Contains(t, code.String(), s, "README.md's commands do not show %s, which .ci/run runs", s)
	}
}

var (
	rowNameRe  = regexp.MustCompile("^\\| `([^`]+)` \\|")
	commandRe  = regexp.MustCompile("^\\| `locktest ([a-z-]+)")
	ciScriptRe = regexp.MustCompile(`(?m)^(\./scripts/\S+)`)
	goTestRe   = regexp.MustCompile(`(?m)^go test .*$`)
)

// tableRows returns the first-column names (`name`) of the rows of every
// table on the page whose header row starts with header.
func tableRows(md, header string) []string {
	var out []string
	in := false
	for _, l := range proseLines(md) {
		switch {
		case strings.HasPrefix(l.raw, header):
			in = true
		case in && strings.HasPrefix(l.raw, "|"):
			if m := rowNameRe.FindStringSubmatch(l.raw); m != nil {
				out = append(out, m[1])
			}
		default:
			in = false
		}
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// TestTablesNameEverySchemeAndFault: README.md has one row per scheme and
// per fault, and docs/schemes.md and docs/faults.md one full row each;
// none names a scheme or fault that does not exist.
func TestTablesNameEverySchemeAndFault(t *testing.T) {
	schemes, faults := sorted(locks.Names()), sorted(nemesis.Names())
	readme := read(t, "README.md")
	require.Equal(t, schemes, tableRows(readme, "| scheme |"), "README.md's scheme table")
	require.Equal(t, faults, tableRows(readme, "| fault |"), "README.md's fault table")
	require.Equal(t, schemes, tableRows(read(t, "docs/schemes.md"), "| name | acquire |"), "docs/schemes.md's tables")
	require.Equal(t, faults, tableRows(read(t, "docs/faults.md"), "| name | what |"), "docs/faults.md's table")
}

// commands lists the cobra commands declared in the Go files of dir (its
// tests left out) that are not hidden: the first word of each Use.
func commands(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	var out []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if sel, ok := lit.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Command" {
				return true
			}
			use, hidden := "", false
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch k, _ := kv.Key.(*ast.Ident); {
				case k == nil:
				case k.Name == "Use":
					if b, ok := kv.Value.(*ast.BasicLit); ok {
						use, _ = strconv.Unquote(b.Value)
					}
				case k.Name == "Hidden":
					id, ok := kv.Value.(*ast.Ident)
					hidden = ok && id.Name == "true"
				}
			}
			if name, _, _ := strings.Cut(use, " "); name != "" && !hidden {
				out = append(out, name)
			}
			return true
		})
	}
	return out
}

// TestCommandsDocumented: docs/running.md has a row for every command of
// the CLI that is not hidden, and for no other.
func TestCommandsDocumented(t *testing.T) {
	dir := filepath.Join("..", "cmd", "locktest")
	var cmds []string
	for _, c := range commands(t, dir) {
		if c != "locktest" { // the root command
			cmds = append(cmds, c)
		}
	}
	require.Contains(t, cmds, "run", "found no commands in %s", dir)

	var documented []string
	for _, l := range proseLines(read(t, "docs/running.md")) {
		if m := commandRe.FindStringSubmatch(l.raw); m != nil {
			documented = append(documented, m[1])
		}
	}
	require.Equal(t, sorted(cmds), sorted(documented), "docs/running.md's command table against cmd/locktest")
}
