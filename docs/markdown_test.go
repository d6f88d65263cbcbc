package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// The link checker below reads Markdown the way GitHub renders it, as far
// as links and anchors go: fenced code blocks and code spans hold no links
// and no headings, a heading's anchor is its text slugged by GitHub's rules
// (github-slugger), and a repeated slug gets -1, -2, ... in order.

var (
	fenceRe   = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	atxRe     = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?[ \t]*$`)
	closingRe = regexp.MustCompile(`(?:^|[ \t]+)#+[ \t]*$`)
	setextRe  = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	// An inline link or image: [text](target "title"); the text may hold
	// one level of brackets.
	inlineRe = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDefRe = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	htmlRe   = regexp.MustCompile(`(?i)<(?:a|img)\b[^>]*?\s(?:href|src)\s*=\s*"([^"]*)"`)
	idRe     = regexp.MustCompile(`(?i)<a\b[^>]*?\s(?:id|name)\s*=\s*"([^"]*)"`)
	schemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	lineRe   = regexp.MustCompile(`^L[0-9]+(?:-L[0-9]+)?$`)
	linkRe   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	tagRe    = regexp.MustCompile(`<[^>]+>`)
)

// mdLine is one line of a Markdown page outside fenced code, with its code
// spans blanked (they hold no links).
type mdLine struct {
	num  int    // 1-based
	raw  string // as written
	text string // code spans replaced by "code"
}

// proseLines returns the lines of md outside fenced code blocks.
func proseLines(md string) []mdLine {
	var out []mdLine
	fence := ""
	for i, l := range strings.Split(md, "\n") {
		if m := fenceRe.FindStringSubmatch(l); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(l) == m[1]:
				fence = ""
				continue
			}
		}
		if fence != "" {
			continue
		}
		out = append(out, mdLine{num: i + 1, raw: l, text: blankCodeSpans(l)})
	}
	return out
}

// blankCodeSpans replaces every code span of a line (a run of backticks
// to the next run of the same length) by "code"; a run with no closing run
// is literal text.
func blankCodeSpans(l string) string {
	var b strings.Builder
	for i := 0; i < len(l); {
		if l[i] != '`' {
			b.WriteByte(l[i])
			i++
			continue
		}
		n := runLen(l, i)
		end := -1
		for j := i + n; j < len(l); {
			if l[j] != '`' {
				j++
				continue
			}
			m := runLen(l, j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			b.WriteString(l[i : i+n])
			i += n
			continue
		}
		b.WriteString("code")
		i = end
	}
	return b.String()
}

// runLen is the length of the run of backticks at l[i].
func runLen(l string, i int) int {
	n := 0
	for i+n < len(l) && l[i+n] == '`' {
		n++
	}
	return n
}

// headingText is what a heading line renders as, or ok false when the line
// is no ATX heading.
func headingText(l string) (string, bool) {
	m := atxRe.FindStringSubmatch(l)
	if m == nil {
		return "", false
	}
	return closingRe.ReplaceAllString(m[1], ""), true
}

// slug is GitHub's anchor for a heading written as text: the rendered text
// (code spans keep their content, links their text, emphasis marks and
// HTML tags go), lower-cased, every character but letters, digits, marks,
// '_', '-' and ' ' dropped, each space made a '-'.
func slug(text string) string {
	text = linkRe.ReplaceAllString(text, "$1")
	text = tagRe.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "`", "")
	text = strings.ReplaceAll(text, "*", "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists every anchor a page defines: its headings' slugs (a repeat
// numbered as GitHub numbers it) and explicit <a id> / <a name> anchors.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	add := func(text string) {
		s := slug(text)
		if n, dup := seen[s]; dup {
			seen[s] = n + 1
			s = s + "-" + strconv.Itoa(n+1)
		} else {
			seen[s] = 0
		}
		out[s] = true
	}
	lines := proseLines(md)
	for i, l := range lines {
		if t, ok := headingText(l.raw); ok {
			add(t)
			continue
		}
		// A setext heading: a paragraph line underlined by === or ---.
		if i > 0 && setextRe.MatchString(l.raw) && lines[i-1].num == l.num-1 {
			prev := lines[i-1].raw
			if strings.TrimSpace(prev) != "" && !strings.HasPrefix(strings.TrimSpace(prev), "|") {
				if _, isHeading := headingText(prev); !isHeading {
					add(strings.TrimSpace(prev))
				}
			}
		}
		for _, m := range idRe.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// link is one link target found on a page.
type link struct {
	line   int
	target string
}

// links lists the targets of every inline link and image, reference
// definition and HTML href/src of a page, outside code.
func links(md string) []link {
	var out []link
	for _, l := range proseLines(md) {
		for _, m := range inlineRe.FindAllStringSubmatch(l.text, -1) {
			out = append(out, link{l.num, strings.Trim(m[1], "<>")})
		}
		if m := refDefRe.FindStringSubmatch(l.text); m != nil {
			out = append(out, link{l.num, strings.Trim(m[1], "<>")})
		}
		for _, m := range htmlRe.FindAllStringSubmatch(l.text, -1) {
			out = append(out, link{l.num, m[1]})
		}
	}
	return out
}

// checkLinks reports every link of the page at file (a slash path in fsys,
// the repository) whose file does not exist in the repository or whose
// #anchor names no heading of its page; links with a scheme (https:,
// mailto:) are not followed. Line anchors (#L10, #L10-L20) are accepted on
// files that are not Markdown.
func checkLinks(fsys fs.FS, file string) ([]string, error) {
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	var problems []string
	bad := func(l link, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", file, l.line, l.target, fmt.Sprintf(format, args...)))
	}
	pages := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := pages[p]; ok {
			return a, nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		pages[p] = anchors(string(b))
		return pages[p], nil
	}
	for _, l := range links(string(b)) {
		if l.target == "" {
			bad(l, "empty target")
			continue
		}
		if schemeRe.MatchString(l.target) {
			continue
		}
		p, frag, _ := strings.Cut(l.target, "#")
		p, err := url.PathUnescape(p)
		if err != nil {
			bad(l, "bad escape: %v", err)
			continue
		}
		switch {
		case p == "":
			p = file
		case strings.HasPrefix(p, "/"):
			p = path.Clean(strings.TrimPrefix(p, "/"))
		default:
			p = path.Join(path.Dir(file), p)
		}
		if !fs.ValidPath(p) {
			bad(l, "points outside the repository")
			continue
		}
		info, err := fs.Stat(fsys, p)
		if err != nil {
			bad(l, "no such file %s", p)
			continue
		}
		if frag == "" {
			continue
		}
		if info.IsDir() || !strings.HasSuffix(p, ".md") {
			if !info.IsDir() && lineRe.MatchString(frag) {
				continue
			}
			bad(l, "anchor #%s on %s, which has no headings", frag, p)
			continue
		}
		a, err := anchorsOf(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if !a[frag] {
			bad(l, "no heading of %s has the anchor #%s", p, frag)
		}
	}
	return problems, nil
}
