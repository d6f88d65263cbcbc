package campaigns_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/reports"
)

// chromium finds Debian's chromium: under CI a missing one fails the test,
// elsewhere it skips with the install command.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not installed under CI: apt-get install -y chromium")
	}
	t.Skip("chromium not installed: apt-get install -y chromium")
	return ""
}

// errorHook records script errors, failed loads of any resource and
// console.error calls into the DOM once the page has loaded; the test
// inserts it into a copy of each page.
const errorHook = `<script>
window.__errs=[];
window.addEventListener('error',function(e){__errs.push('error: '+(e.message||(e.target&&(e.target.src||e.target.href))||'?'))},true);
window.addEventListener('unhandledrejection',function(e){__errs.push('rejection: '+e.reason)});
(function(){var ce=console.error;console.error=function(){__errs.push('console: '+[].join.call(arguments,' '));ce.apply(console,arguments)}})();
window.addEventListener('load',function(){document.documentElement.setAttribute('data-errors',__errs.length?__errs.join(' | '):'none')});
</script>`

// external matches a reference to anything outside the page: a URL with
// a scheme or a protocol-relative one, in an attribute or in CSS.
var external = regexp.MustCompile(`(?i)(src|href|action|srcset|poster|data)\s*=\s*["']?\s*(https?:|//|ftp:|ws:)|url\(\s*["']?\s*(https?:|//)|@import`)

// runChromium runs headless chromium on a page with name resolution
// disabled (MAP * ~NOTFOUND: any network request fails and, through the
// hook, shows), with a fresh profile, and kills its whole process group
// when it hangs.
func runChromium(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, err, "chromium: %s", errb.String())
	return out.String(), errb.String()
}

// TestPagesInBrowser opens the campaign page, a run page and its
// linearization view in a real headless chromium: they load with no
// console error and no network request, the matrix, the run's time line and
// porcupine's drawing with its annotations render, and a screenshot of
// each is kept next to the page (and copied to $LOCKTEST_SCREENSHOTS, e.g.
// docs/, for the README). The README's matrix is a real campaign's: with
// $LOCKTEST_CAMPAIGN (a campaign directory) its index.html is checked and
// shot as campaign.png; the test data's small matrix is never copied over
// it.
func TestPagesInBrowser(t *testing.T) {
	bin := chromium(t)
	dir, _ := renderStore(t)
	type pageCase struct {
		name, path, shot string
		want             []string
		size             string // window for the screenshot; "" 1400x1100
		root             string // the directory path is in; "" the test data's
	}
	pages := []pageCase{
		{"campaign", campaigns.IndexFile, "campaign.png", []string{`class="matrix"`, `class="unsafe"`, "double-holder", "report.html", "cause: ", "lock held ", "NOT RUN"}, "", ""},
		{"run", "redis-lua/pause/run1/report.html", "run.png", []string{"<svg", "double", "pause", `href="linearization.html"`, "cause: lease expired"}, "", ""},
		// porcupine's view, drawn by its script: client rows, operations,
		// the fault and the checker's anomalies as annotations.
		{"linearization", "redis-lua/pause/run1/" + reports.LinearizationFile, "linearization.png",
			// (The run is unsafe: its linearizable history is said to be
			// linearizable against a lease lock, not a bare "linearizable".)
			// The anomalies are listed above the view, which opens on the
			// first one's annotation (outlined: lt-focus).
			[]string{`id="lin-result">linearizable against a lease lock<`, `id="lin-explain"`, "come from leases that ran out",
				`id="lin-anomalies"`, "#1 double-holder", `class="client-annotation-rect lt-focus"`,
				`class="history-rect"`, ">client 1<", ">fault: pause client ", ">checker: double-holder<", "(lease-expired)"}, "2000,800", ""},
	}
	if real := os.Getenv("LOCKTEST_CAMPAIGN"); real != "" {
		pages = append(pages, pageCase{"real campaign", campaigns.IndexFile, "campaign.png",
			[]string{`class="matrix"`, "report.html", "lock held "}, "1400,1900", real})
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			root := dir
			if p.root != "" {
				root = p.root
			}
			path := filepath.Join(root, filepath.FromSlash(p.path))
			page, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NotRegexp(t, external, string(page), "the page refers to something outside itself")

			// Load a copy with the error hook and read the DOM it built.
			hooked := strings.Replace(string(page), "<head>", "<head>"+errorHook, 1)
			require.NotEqual(t, string(page), hooked)
			check := filepath.Join(filepath.Dir(path), ".check-"+filepath.Base(path))
			require.NoError(t, os.WriteFile(check, []byte(hooked), 0o644))
			t.Cleanup(func() { os.Remove(check) })
			dom, stderr := runChromium(t, bin, "--dump-dom", "file://"+check)
			require.Contains(t, dom, `data-errors="none"`, "errors in the page: %s", stderr)
			require.NotContains(t, stderr, "CONSOLE", "the page logged to the console")
			require.NotContains(t, stderr, "ERR_NAME_NOT_RESOLVED", "the page tried the network")
			for _, w := range p.want {
				require.Contains(t, dom, w)
			}

			// Screenshot the page itself.
			shot := filepath.Join(dir, p.shot)
			if p.root != "" {
				shot = filepath.Join(t.TempDir(), p.shot)
			}
			size := p.size
			if size == "" {
				size = "1400,1100"
			}
			runChromium(t, bin, "--hide-scrollbars", "--window-size="+size, "--screenshot="+shot, "file://"+path)
			st, err := os.Stat(shot)
			require.NoError(t, err)
			require.Greater(t, st.Size(), int64(10_000), "a blank screenshot")
			if p.name == "campaign" {
				return // the README's matrix is a real campaign's (LOCKTEST_CAMPAIGN), not the test data's
			}
			if keep := os.Getenv("LOCKTEST_SCREENSHOTS"); keep != "" {
				b, err := os.ReadFile(shot)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(keep, p.shot), b, 0o644))
			}
		})
	}
}

// TestNotLinearizableViewInBrowser: the porcupine view of a history that
// is not linearizable loads without errors and opens on the failing part:
// the first operation that cannot be placed is selected and scrolled to.
func TestNotLinearizableViewInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "checker", "testdata", "bad-nonlinearizable.jsonl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "history.jsonl"), b, 0o644))
	_, err = harness.CheckDir(dir, nil, true)
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(dir, reports.LinearizationFile))
	require.NoError(t, err)
	require.NotRegexp(t, external, string(page))
	// (The drawing scrolls in its own box now, so that the banner stays in
	// view: scrolled is the box's scroll, or the window's.)
	probe := `<script>window.addEventListener('load',function(){var s=document.querySelector('.selected');` +
		`var c=document.querySelector('#canvas');` +
		`document.documentElement.setAttribute('data-probe','selected='+(s?1:0)+' scrolled='+(window.scrollX>0||c.scrollLeft>0?1:0))})</script>`
	hooked := strings.Replace(string(page), "<head>", "<head>"+errorHook, 1)
	hooked = strings.Replace(hooked, "</body>", probe+"</body>", 1)
	check := filepath.Join(dir, ".check.html")
	require.NoError(t, os.WriteFile(check, []byte(hooked), 0o644))
	dom, stderr := runChromium(t, bin, "--window-size=1400,900", "--dump-dom", "file://"+check)
	require.Contains(t, dom, `data-errors="none"`, "errors in the page: %s", stderr)
	require.NotContains(t, stderr, "ERR_NAME_NOT_RESOLVED", "the page tried the network")
	require.NotContains(t, stderr, "CONSOLE", "the page logged to the console")
	require.Contains(t, dom, `data-probe="selected=1 scrolled=1"`)
	require.Contains(t, dom, `id="lin-result">not linearizable<`)
	require.Contains(t, dom, ">checker: non-linearizable<")
}
